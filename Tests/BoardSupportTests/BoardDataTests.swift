import BoardControl
import BoardloopGPIOMock
import Foundation
import Testing

@testable import BoardSupport

enum Paths {
    static let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path
    static let packageRoot = URL(fileURLWithPath: tests).deletingLastPathComponent().deletingLastPathComponent().path
    static let boards = packageRoot + "/boards"
    static let roots = tests + "/Fixtures/roots"
    static let catalog = BoardCatalog(directories: [boards])

    static func board(_ name: String) throws -> Board {
        let log = DiagnosticLog(file: name)
        let b = catalog.board(named: name, log: log)
        #expect(log.items.map(\.description) == [])
        return try #require(b)
    }
}

/// The published 40-pin header: physical pin → Broadcom GPIO number.
let piHeaderGPIO: [Int: Int] = [
    3: 2, 5: 3, 7: 4, 8: 14, 10: 15, 11: 17, 12: 18, 13: 27, 15: 22, 16: 23, 18: 24, 19: 10, 21: 9, 22: 25, 23: 11,
    24: 8, 26: 7, 29: 5, 31: 6, 32: 12, 33: 13, 35: 19, 36: 16, 37: 26, 38: 20, 40: 21,
]
let piBoards: [(String, String, Int)] = [
    ("raspberry-pi-zero", "pinctrl-bcm2835", 54), ("raspberry-pi-zero-w", "pinctrl-bcm2835", 54), ("raspberry-pi-1", "pinctrl-bcm2835", 54),
    ("raspberry-pi-2", "pinctrl-bcm2835", 54), ("raspberry-pi-3", "pinctrl-bcm2835", 54), ("raspberry-pi-zero-2-w", "pinctrl-bcm2835", 54),
    ("raspberry-pi-4", "pinctrl-bcm2711", 58), ("raspberry-pi-400", "pinctrl-bcm2711", 58), ("raspberry-pi-5", "pinctrl-rp1", 54),
    ("raspberry-pi-500", "pinctrl-rp1", 54),
]
/// The boards whose kernels name the Bluetooth UART's lines (32, 33) TXD0 and RXD0.
let bluetoothUARTBoards = ["raspberry-pi-zero-w", "raspberry-pi-3", "raspberry-pi-zero-2-w", "raspberry-pi-4", "raspberry-pi-400"]

@Suite struct BoardDataTests {
    @Test func everyBoardFileLoads() throws {
        let (boards, problems) = Paths.catalog.loadAll()
        #expect(problems.map(\.description) == [])
        #expect(
            boards.map(\.name) == [
                "demo", "generic", "gpio-sim", "raspberry-pi-1", "raspberry-pi-2", "raspberry-pi-3", "raspberry-pi-4", "raspberry-pi-400",
                "raspberry-pi-5", "raspberry-pi-500", "raspberry-pi-zero", "raspberry-pi-zero-2-w", "raspberry-pi-zero-w",
            ])
        for b in boards {
            // No physical pin twice, no GPIO name twice, every GPIO on a declared chip.
            let physical = b.pins.compactMap(\.physical)
            #expect(Set(physical).count == physical.count, "\(b.name)")
            let names = b.pins.filter { $0.chipLine != nil }.flatMap(\.allNames).map { $0.uppercased() }
            #expect(Set(names).count == names.count, "\(b.name)")
            for p in b.pins {
                if let (chip, offset) = p.chipLine {
                    let c = try #require(b.chip(label: chip), "\(b.name) \(p.name)")
                    #expect(Int(offset) < (c.lines ?? Int.max))
                }
            }
        }
    }

    @Test(arguments: piBoards.map(\.0))
    func piHeaderMatchesThePublishedPinout(_ name: String) throws {
        let b = try Paths.board(name)
        let (_, label, lines) = try #require(piBoards.first { $0.0 == name })
        #expect(b.chips.map(\.label) == [label])
        #expect(b.chips.map(\.lines) == [lines])
        #expect(b.pins.compactMap(\.physical) == Array(1...40))
        for (pin, gpio) in piHeaderGPIO {
            let p = try #require(b.pin(physical: pin))
            #expect(p.name == "GPIO\(gpio)", "pin \(pin)")
            #expect(p.kind == .gpio(chip: label, offset: UInt32(gpio)), "pin \(pin)")
            // GPIO17, BCM17, PIN11 all name it, in any case.
            for alias in ["GPIO\(gpio)", "BCM\(gpio)", "PIN\(pin)", "gpio\(gpio)", "pin\(pin)"] {
                #expect(b.pin(named: alias)?.physical == pin, "\(alias)")
            }
        }
        #expect(b.pin(physical: 11)?.name == "GPIO17")
        #expect(b.pin(physical: 12)?.name == "GPIO18")
        #expect(b.pin(physical: 40)?.name == "GPIO21")
        for pin in [1, 17] { #expect(b.pin(physical: pin)?.kind == .power("3V3")) }
        for pin in [2, 4] { #expect(b.pin(physical: pin)?.kind == .power("5V")) }
        for pin in [6, 9, 14, 20, 25, 30, 34, 39] { #expect(b.pin(physical: pin)?.kind == .ground, "pin \(pin)") }
        #expect(b.pin(physical: 27)?.name == "ID_SD")
        #expect(b.pin(physical: 28)?.name == "ID_SC")
        for pin in [27, 28] {
            guard case .reserved = b.pin(physical: pin)?.kind else {
                Issue.record("pin \(pin) is not reserved")
                continue
            }
        }
        // Function names.
        #expect(b.pin(named: "SDA1")?.physical == 3)
        #expect(b.pin(named: "SCL1")?.physical == 5)
        #expect(b.pin(named: "TXD")?.physical == 8)
        #expect(b.pin(named: "RXD")?.physical == 10)
        // TXD0/RXD0 name the header's UART only where no other line is so named.
        let bt = bluetoothUARTBoards.contains(name)
        #expect(b.pin(named: "TXD0")?.physical == (bt ? nil : 8))
        #expect(b.pin(named: "RXD0")?.physical == (bt ? nil : 10))
        #expect(b.pin(named: "SPI0_MOSI")?.physical == 19)
        #expect(b.pin(named: "PCM_CLK")?.physical == 12)
    }

    @Test func raspberryPiKernelLineNamesAreAccepted() throws {
        for name in ["raspberry-pi-3", "raspberry-pi-4"] {
            let b = try Paths.board(name)
            #expect(b.pin(named: "SPI_CE0_N")?.name == "GPIO8")
            #expect(b.pin(named: "GPIO_GCLK")?.name == "GPIO4")
            #expect(b.pin(named: "TXD1")?.name == "GPIO14")
            #expect(b.pin(named: "ID_SDA")?.physical == 27)
        }
        #expect(try Paths.board("raspberry-pi-5").pin(named: "ID_SCL")?.physical == 28)
    }

    /// Both namings of every header line: GPIO2 … GPIO27 (Raspberry Pi OS
    /// since 2024) and mainline's (SDA1, GPIO_GCLK, SPI_*, TXD1 …), each the
    /// kernel's name of the pin's own line.
    @Test(arguments: piBoards.map(\.0))
    func chipsNameEveryLineInBothNamings(_ name: String) throws {
        let b = try Paths.board(name)
        let c = try #require(b.chips.first)
        let lines = try #require(c.lines)
        #expect(c.names.count == lines, "every line is named")
        #expect(c.naming == "Raspberry Pi OS since 2024")
        #expect(c.altNaming != nil)
        for g in 2...27 { #expect(c.names[UInt32(g)] == "GPIO\(g)", "line \(g)") }
        let rp1 = c.label == "pinctrl-rp1"
        #expect(c.names[0] == (rp1 ? "ID_SD" : "ID_SDA"))
        #expect(c.names[1] == (rp1 ? "ID_SC" : "ID_SCL"))
        for (pin, gpio) in piHeaderGPIO {
            _ = try #require(b.pin(physical: pin))
            for n in c.kernelNames(of: UInt32(gpio)) { #expect(b.pin(named: n)?.physical == pin, "\(n)") }
        }
        if rp1 {
            #expect(c.altNames[2] == "PIN3")
        } else {
            for (g, n) in [(2, "SDA1"), (3, "SCL1"), (4, "GPIO_GCLK"), (7, "SPI_CE1_N"), (8, "SPI_CE0_N"), (9, "SPI_MISO"), (10, "SPI_MOSI"), (11, "SPI_SCLK")] {
                #expect(c.altNames[UInt32(g)] == n, "line \(g)")
            }
        }
    }

    /// No name of a pin is the kernel's name of another line: `TXD0` on a
    /// Pi 4 is line 32 (the Bluetooth UART), not GPIO14.
    @Test(arguments: piBoards.map(\.0))
    func noPinNameShadowsAnotherLine(_ name: String) throws {
        let b = try Paths.board(name)
        for p in b.pins {
            guard let (label, offset) = p.chipLine, let c = b.chip(label: label) else { continue }
            for n in p.allNames {
                if let o = c.offset(ofLine: n) { #expect(o == offset, "\(name): \(p.name) answers to \(n), line \(o)'s name") }
            }
        }
    }

    @Test func anAliasThatIsAnotherLinesKernelNameIsAnError() {
        let log = DiagnosticLog(file: "b.yaml")
        let text = """
            name: b
            chips:
              - { label: c, lines: 40, names: { 14: GPIO14, 32: TXD0 } }
            header:
              - { pin: 8, gpio: 14, aliases: [TXD0, TXD] }
            """
        #expect(BoardFile.parse(text, file: "b.yaml", log: log) == nil)
        #expect(
            log.items.map(\.description) == [
                "b.yaml:5:5: error: header[0]: name 'TXD0' is the kernel's name of line 32 of c, not of this pin's line 14; drop it"
            ])
    }

    @Test func nearestPinNamesForAMisspelling() throws {
        let b = try Paths.board("raspberry-pi-4")
        #expect(b.nearestPinNames(to: "GPIO72") == ["GPIO12", "GPIO2", "GPIO22"])
        #expect(b.nearestPinNames(to: "SDA") == ["SDA1"])
    }

    @Test func gpioSimBoardMatchesTheSimChipsFile() throws {
        let text = try String(contentsOfFile: Paths.boards + "/sim-chips.conf", encoding: .utf8)
        var chips: [Board.Chip] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let f = line.split(separator: " ").map(String.init)
            if f.first == "chip" { chips.append(Board.Chip(label: f[1], lines: Int(f[2]))) }
            if f.first == "line" { chips[chips.count - 1].names[UInt32(f[1])!] = f[2] }
        }
        let b = try Paths.board("gpio-sim")
        #expect(b.chips == chips)
        #expect(b.pin(named: "BUTTON")?.kind == .gpio(chip: "boardloop-sim0", offset: 17))
        #expect(b.pin(named: "LED")?.kind == .gpio(chip: "boardloop-sim0", offset: 27))
        #expect(b.pin(named: "SIM1_7")?.kind == .gpio(chip: "boardloop-sim1", offset: 7))
    }

    @Test func demoBoardIsTheMockChipsWithItsDevices() throws {
        let b = try Paths.board("demo")
        #expect(b.backend == .mock)
        #expect(b.detect.isEmpty)
        // The button and the e-stop rest high (the daemon's mock chips start so).
        #expect(b.chips.map(\.idleHigh) == [[17, 22], []])
        // The GPIO layer's example board has the same chips, button and LED.
        let mock = MockGPIO.exampleBoard()
        let mockChips = try mock.listChips()
        #expect(b.chips.map(\.label) == mockChips.map(\.label))
        #expect(b.chips.map(\.lines) == mockChips.map(\.lineCount))
        let names = b.chips[0].names
        #expect(names[17] == "BUTTON" && names[27] == "LED")
        for device in ["BUTTON", "ESTOP", "LED", "VALVE", "FAN", "CHATTER"] {
            #expect(b.pin(named: device) != nil, "\(device)")
        }
    }

    @Test func genericBoardHasNoHeader() throws {
        let b = try Paths.board("generic")
        #expect(b.isGeneric)
        #expect(b.detect.isEmpty)
    }
}

@Suite struct BoardFileErrorTests {
    func errors(_ text: String) -> [String] {
        let log = DiagnosticLog(file: "b.yaml")
        _ = BoardFile.parse(text, file: "b.yaml", log: log)
        return log.items.map(\.description)
    }

    /// A line that rests high must be on its chip (mock chips are made
    /// from the file: a line past the end cannot be set high).
    @Test func anIdleHighLinePastTheChipIsReported() {
        let text = """
            name: x
            chips: [ { label: c0, lines: 8, idle_high: [3, 8] } ]
            header: [ { pin: 1, gpio: 1 } ]
            """
        let e = errors(text)
        #expect(e.count == 1, "\(e)")
        #expect(e.first?.contains("b.yaml:2:") == true && e.first?.contains("line 8 is not on this chip (it has 8 lines: 0...7)") == true, "\(e)")
    }

    @Test func aPinTwiceAndAnUnknownChipAreReported() {
        let text = """
            name: x
            chips: [ { label: c0, lines: 8 } ]
            header:
              - { pin: 1, gpio: 1 }
              - { pin: 1, gpio: 2 }
              - { pin: 3, gpio: 1, chip: c0, name: OTHER }
              - { pin: 4, chip: c9, offset: 0, name: FAR }
              - { pin: 5, gpio: 9 }
            """
        #expect(errors(text) == [
            "b.yaml:5:5: error: header[1]: physical pin 1 is listed twice (also header[0])",
            "b.yaml:5:5: error: header[1]: name 'PIN1' is used twice (also header[0])",
            "b.yaml:6:5: error: header[2]: name 'GPIO1' is used twice (also header[0])",
            "b.yaml:6:5: error: header[2]: line c0:1 is listed twice (also header[0])",
            "b.yaml:7:5: error: header[3]: chip 'c9' is not in the board's chips",
            "b.yaml:8:5: error: header[4]: offset 9 is beyond chip 'c0' (8 lines)",
        ])
    }

    @Test func unknownKeysInABoardFile() {
        #expect(errors("name: x\ntitel: X\n") == ["b.yaml:2:1: error: titel: unknown key 'titel'; did you mean 'title'?"])
    }
}

@Suite struct CatalogTests {
    /// /etc wins over /usr/share, which wins over the checkout.
    @Test func earlierDirectoriesWin() throws {
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-catalog-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        let etc = tmp + "/etc/boardd/boards"
        let share = tmp + "/usr/share/boardd/boards"
        for d in [etc, share] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        try "name: raspberry-pi-4\ntitle: Mine\n".write(toFile: etc + "/raspberry-pi-4.yaml", atomically: true, encoding: .utf8)
        try "name: raspberry-pi-4\ntitle: Installed\n".write(toFile: share + "/raspberry-pi-4.yaml", atomically: true, encoding: .utf8)
        try "name: extra\ntitle: Extra\n".write(toFile: share + "/extra.yaml", atomically: true, encoding: .utf8)
        let catalog = BoardCatalog(directories: [etc, share, Paths.boards])
        let log = DiagnosticLog(file: "t")
        #expect(catalog.board(named: "raspberry-pi-4", log: log)?.title == "Mine")
        #expect(catalog.board(named: "extra", log: log)?.title == "Extra")
        #expect(catalog.board(named: "raspberry-pi-5", log: log)?.file == Paths.boards + "/raspberry-pi-5.yaml")
        #expect(log.items.isEmpty)
        #expect(BoardCatalog(directories: [share, etc]).board(named: "raspberry-pi-4", log: log)?.title == "Installed")
    }

    @Test func theStandardOrderEndsWithTheCheckout() {
        let dirs = BoardCatalog.standardDirectories()
        #expect(dirs == ["/etc/boardd/boards", "/usr/share/boardd/boards", Paths.boards])
    }

    @Test func everyBoardFileIsBuiltInAsItIs() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Paths.boards).filter { $0.hasSuffix(".yaml") }
        #expect(BoardCatalog.builtInBoards.keys.sorted() == files.map { String($0.dropLast(5)) }.sorted())
        for file in files {
            let text = try String(contentsOfFile: Paths.boards + "/" + file, encoding: .utf8)
            #expect(BoardCatalog.builtInBoards[String(file.dropLast(5))] == text, "\(file)")
        }
        let (boards, problems) = BoardCatalog(directories: [], builtIn: BoardCatalog.builtInBoards).loadAll()
        #expect(problems.map(\.description) == [])
        #expect(boards.map(\.name) == BoardCatalog.builtInBoards.keys.sorted())
        #expect(boards.allSatisfy { $0.file == "boards/\($0.name).yaml (built in)" })
    }

    @Test func aDirectoryOverridesABuiltInBoard() throws {
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-catalog-builtin-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        try "name: generic\ntitle: Mine\n".write(toFile: tmp + "/generic.yaml", atomically: true, encoding: .utf8)
        let catalog = BoardCatalog(directories: [tmp], builtIn: BoardCatalog.builtInBoards)
        let log = DiagnosticLog(file: "t")
        #expect(catalog.board(named: "generic", log: log)?.title == "Mine")
        #expect(catalog.board(named: "raspberry-pi-5", log: log)?.file == "boards/raspberry-pi-5.yaml (built in)")
        #expect(log.items.isEmpty)
        let sources = Dictionary(uniqueKeysWithValues: catalog.sources().map { ($0.name, $0.sources) })
        #expect(sources["generic"] == [.file(tmp + "/generic.yaml"), .builtIn])
        #expect(sources["raspberry-pi-5"] == [.builtIn])
        #expect(catalog.loadAll().boards.first { $0.name == "generic" }?.title == "Mine")
        #expect(BoardCatalog.standard(searchingFirst: [tmp]).directories.first == tmp)
    }

    @Test func aFileWhoseNameDiffersFromItsBoardIsAnError() throws {
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-catalog-name-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        try "name: other\n".write(toFile: tmp + "/mine.yaml", atomically: true, encoding: .utf8)
        let log = DiagnosticLog(file: "t")
        #expect(BoardCatalog(directories: [tmp]).board(named: "mine", log: log) == nil)
        #expect(log.items.map(\.description) == ["\(tmp)/mine.yaml: error: name: the board is named 'other' but its file is mine.yaml"])
    }
}

@Suite struct DurationTests {
    @Test func unitsAndFractions() {
        let cases: [(String, Duration)] = [
            ("500us", .microseconds(500)), ("20ms", .milliseconds(20)), ("1.5s", .milliseconds(1500)), ("2min", .seconds(120)),
            ("1h", .seconds(3600)), ("0ms", .zero), ("0.25ms", .microseconds(250)), ("1µs", .microseconds(1)),
        ]
        for (text, d) in cases { #expect(DurationText.parse(text) == .success(d), "\(text)") }
    }

    @Test func problems() {
        #expect(DurationText.parse("20") == .failure(.noUnit))
        #expect(DurationText.parse("20sec") == .failure(.unknownUnit("sec")))
        #expect(DurationText.parse("-1s") == .failure(.negative))
        #expect(DurationText.parse("fast") == .failure(.notANumber))
        #expect(DurationText.parse("1.0000000001ms") == .failure(.tooPrecise))
        #expect(DurationText.parse("99999999999h") == .failure(.tooLarge))
    }

    @Test func formatting() {
        #expect(DurationText.format(.milliseconds(1500)) == "1.5s")
        #expect(DurationText.format(.seconds(120)) == "2min")
        #expect(DurationText.format(.microseconds(500)) == "500us")
        #expect(DurationText.format(.nanoseconds(1_250_000)) == "1.25ms")
    }
}

@Suite struct FileSystemTests {
    @Test func pathsJoinAndSplitAsDirnameDoes() {
        #expect(FileSystem.join("/a/b", "c") == "/a/b/c")
        #expect(FileSystem.join("/a/b/", "c") == "/a/b/c")
        #expect(FileSystem.join("/a", "/abs") == "/abs")
        #expect(FileSystem.join("", "c") == "c")
        #expect(FileSystem.parent("/a/b/c") == "/a/b")
        #expect(FileSystem.parent("/a/b/") == "/a")
        #expect(FileSystem.parent("/a") == "/")
        #expect(FileSystem.parent("/") == "/")
        #expect(FileSystem.parent("a") == ".")
    }

    @Test func filesAreReadWholeAndDirectoriesListedSorted() throws {
        let board = try FileSystem.readText(Paths.boards + "/demo.yaml").get()
        #expect(board == (try String(contentsOfFile: Paths.boards + "/demo.yaml", encoding: .utf8)))
        // /proc files report size 0 to stat; they are read to the end anyway.
        #expect(try FileSystem.readText("/proc/self/status").get().contains("VmRSS"))
        let names = FileSystem.list(Paths.boards)
        #expect(names.contains("demo.yaml") && names == names.sorted())
        #expect(FileSystem.isDirectory(Paths.boards) && !FileSystem.isDirectory(Paths.boards + "/demo.yaml"))
        #expect(FileSystem.list("/nonexistent") == [])
        #expect(FileSystem.readLink("/proc/self/exe")?.hasPrefix("/") == true)
    }

    @Test func readErrorsSayWhy() throws {
        #expect(FileSystem.readText("/nonexistent/x").failure?.description == "no such file")
        #expect(FileSystem.readText("/").failure?.description == "it is a directory, not a file")
        // Config and board files: regular files only, at most 4 MiB.
        #expect(FileSystem.readConfigText("/dev/null").failure?.description == "not a regular file (a character device)")
        #expect(FileSystem.readConfigText("/dev/zero", what: "a board file").failure?.description == "not a regular file (a character device)")
        #expect(try FileSystem.readConfigText(Paths.boards + "/demo.yaml").get().hasPrefix("# Demo board"))
    }
}

extension Result {
    var failure: Failure? {
        if case let .failure(e) = self { return e }
        return nil
    }
}
