import BoardloopGPIOMock
import Foundation
import Testing

@testable import BoardSupport

/// Detection from fixture roots: a fake /proc/device-tree and
/// /sys/class/gpio/gpiochip*/label, as a real machine has them.
@Suite struct DetectionTests {
    static let expected: [(root: String, board: String?, because: String)] = [
        ("raspberry-pi-zero", "raspberry-pi-zero", "compatible \"raspberrypi,model-zero\""),
        ("raspberry-pi-zero-w", "raspberry-pi-zero-w", "compatible \"raspberrypi,model-zero-w\""),
        ("raspberry-pi-1-model-b-plus", "raspberry-pi-1", "compatible \"raspberrypi,model-b-plus\""),
        ("raspberry-pi-1-model-a-plus", "raspberry-pi-1", "compatible \"raspberrypi,model-a-plus\""),
        ("raspberry-pi-2-model-b", "raspberry-pi-2", "compatible \"raspberrypi,2-model-b\""),
        ("raspberry-pi-3-model-b", "raspberry-pi-3", "compatible \"raspberrypi,3-model-b\""),
        ("raspberry-pi-3-model-b-plus", "raspberry-pi-3", "compatible \"raspberrypi,3-model-b-plus\""),
        ("raspberry-pi-3-model-a-plus", "raspberry-pi-3", "compatible \"raspberrypi,3-model-a-plus\""),
        ("raspberry-pi-zero-2-w", "raspberry-pi-zero-2-w", "compatible \"raspberrypi,model-zero-2-w\""),
        ("raspberry-pi-4-model-b", "raspberry-pi-4", "compatible \"raspberrypi,4-model-b\""),
        ("raspberry-pi-400", "raspberry-pi-400", "compatible \"raspberrypi,400\""),
        ("raspberry-pi-5-model-b", "raspberry-pi-5", "compatible \"raspberrypi,5-model-b\""),
        ("raspberry-pi-500", "raspberry-pi-500", "compatible \"raspberrypi,500\""),
        ("model-only-pi-4", "raspberry-pi-4", "model starts with \"Raspberry Pi 4 Model B\""),
        ("chips-only-pi-5", "raspberry-pi-5", "GPIO chip pinctrl-rp1 present"),
        ("gpio-sim", "gpio-sim", "GPIO chips boardloop-sim0, boardloop-sim1 present"),
        ("no-match", nil, ""),
    ]

    /// Compute Modules: no 40-pin header of their own, whatever the SoC.
    static let computeModules: [(root: String, because: String)] = [
        ("compute-module-1", "compatible \"raspberrypi,compute-module\""),
        ("compute-module-3", "compatible \"raspberrypi,3-compute-module\""),
        ("compute-module-3-plus", "compatible \"raspberrypi,3-compute-module\""),
        ("compute-module-4", "compatible \"raspberrypi,4-compute-module\""),
        ("compute-module-4s", "compatible \"raspberrypi,4-compute-module-s\""),
        ("compute-module-5", "compatible \"raspberrypi,5-compute-module\""),
    ]

    @Test(arguments: computeModules.map(\.root))
    func aComputeModuleIsNoHeaderBoard(_ root: String) throws {
        let want = try #require(Self.computeModules.first { $0.root == root })
        let facts = MachineFacts.read(root: Paths.roots + "/" + root)
        let (boards, _) = Paths.catalog.loadAll()
        let verdict = BoardDetection.detect(facts, boards: boards)
        #expect(verdict == .computeModule(because: want.because))
        let message = BoardDetection.failureMessage(verdict, facts: facts, known: [])
        #expect(message.contains("a compute module"))
        #expect(message.contains("name the carrier's board file"))
    }

    @Test func aCarrierBoardFileNamingTheModuleIsFound() throws {
        var carrier = try Paths.board("raspberry-pi-4")
        carrier.name = "my-cm4-carrier"
        carrier.detect = Board.DetectRules(compatible: ["raspberrypi,4-compute-module"])
        let (boards, _) = Paths.catalog.loadAll()
        let facts = MachineFacts.read(root: Paths.roots + "/compute-module-4")
        guard case let .found(b, because) = BoardDetection.detect(facts, boards: boards + [carrier]) else {
            Issue.record("not found")
            return
        }
        #expect(b.name == "my-cm4-carrier")
        #expect(because == "compatible \"raspberrypi,4-compute-module\"")
    }

    @Test func theMostSpecificCompatibleStringWins() throws {
        // The Zero 2 W's SoC string is the Pi 3's too; its own string comes first.
        let facts = MachineFacts(compatible: ["raspberrypi,model-zero-2-w", "brcm,bcm2837"])
        let (boards, _) = Paths.catalog.loadAll()
        guard case let .found(b, _) = BoardDetection.detect(facts, boards: boards) else {
            Issue.record("not found")
            return
        }
        #expect(b.name == "raspberry-pi-zero-2-w")
        // An unknown BCM2837 board still matches the Pi 3 by its SoC.
        let other = MachineFacts(compatible: ["raspberrypi,3-model-z", "brcm,bcm2837"])
        guard case let .found(p3, because) = BoardDetection.detect(other, boards: boards) else {
            Issue.record("not found")
            return
        }
        #expect(p3.name == "raspberry-pi-3")
        #expect(because == "compatible \"brcm,bcm2837\"")
    }

    @Test func theLongestModelPrefixWins() throws {
        let (boards, _) = Paths.catalog.loadAll()
        for (model, board) in [
            ("Raspberry Pi 400 Rev 1.0", "raspberry-pi-400"), ("Raspberry Pi 500 Rev 1.0", "raspberry-pi-500"),
            ("Raspberry Pi 5 Model B Rev 1.0", "raspberry-pi-5"), ("Raspberry Pi Zero 2 W Rev 1.0", "raspberry-pi-zero-2-w"),
            ("Raspberry Pi Zero W Rev 1.1", "raspberry-pi-zero-w"), ("Raspberry Pi Zero Rev 1.3", "raspberry-pi-zero"),
        ] {
            guard case let .found(b, _) = BoardDetection.detect(MachineFacts(model: model), boards: boards) else {
                Issue.record("\(model): not found")
                continue
            }
            #expect(b.name == board, "\(model)")
        }
    }

    @Test func singleCoreBoardsHaveOneCPU() throws {
        for name in ["raspberry-pi-zero", "raspberry-pi-zero-w", "raspberry-pi-1"] { #expect(try Paths.board(name).cpus == 1, "\(name)") }
        for name in ["raspberry-pi-2", "raspberry-pi-3", "raspberry-pi-zero-2-w", "raspberry-pi-4", "raspberry-pi-400", "raspberry-pi-5", "raspberry-pi-500"] {
            #expect(try Paths.board(name).cpus == 4, "\(name)")
        }
    }

    /// The naming the running kernel gives a board's lines, read from the
    /// chips' line names (here mock chips standing for the character devices).
    @Test func theKernelsNamingIsReported() throws {
        let b = try Paths.board("raspberry-pi-4")
        func facts(_ names: [UInt32: String]) throws -> MachineFacts {
            let chip = try MockChip(name: "gpiochip0", label: "pinctrl-bcm2711", lineCount: 58, lineNames: names)
            return MachineFacts.read(root: Paths.roots + "/does-not-exist", backend: try MockGPIO([chip]))
        }
        let current = try facts(b.chips[0].names)
        #expect(current.lineNames["pinctrl-bcm2711"]?[2] == "GPIO2")
        #expect(BoardDetection.naming(b, current).first?.contains("Raspberry Pi OS since 2024") == true)
        var mainline = b.chips[0].names
        for (o, n) in b.chips[0].altNames { mainline[o] = n }
        let old = BoardDetection.naming(b, try facts(mainline))
        #expect(old.first?.contains("mainline kernels") == true, "\(old)")
        #expect(BoardDetection.naming(b, MachineFacts()).first?.contains("not present") == true)
    }

    @Test(arguments: expected.map(\.root))
    func detectsTheBoardOfAFixtureRoot(_ root: String) throws {
        let want = try #require(Self.expected.first { $0.root == root })
        let facts = MachineFacts.read(root: Paths.roots + "/" + root)
        let (boards, _) = Paths.catalog.loadAll()
        let verdict = BoardDetection.detect(facts, boards: boards)
        if let name = want.board {
            guard case let .found(b, because) = verdict else {
                Issue.record("\(root): \(verdict)")
                return
            }
            #expect(b.name == name)
            #expect(because == want.because)
        } else {
            #expect(verdict == .noMatch)
        }
    }

    @Test func readsModelCompatibleAndChipLabels() {
        let facts = MachineFacts.read(root: Paths.roots + "/raspberry-pi-5-model-b")
        #expect(facts.model == "Raspberry Pi 5 Model B Rev 1.0")
        #expect(facts.compatible == ["raspberrypi,5-model-b", "brcm,bcm2712"])
        #expect(facts.chipLabels == [
            "gpio-brcmstb@107d508500", "gpio-brcmstb@107d508520", "gpio-brcmstb@107d517c00", "gpio-brcmstb@107d517c20",
            "pinctrl-rp1",
        ])
    }

    @Test func noMatchListsWhatWasReadAndTheKnownBoards() {
        let facts = MachineFacts.read(root: Paths.roots + "/no-match")
        let message = BoardDetection.failureMessage(.noMatch, facts: facts, known: ["a", "b"])
        #expect(
            message
                == "auto-detection found no matching board (read model: \"Acme SBC Rev 2\"; compatible: acme,sbc, rockchip,rk3399; gpio chips: gpio0, gpio1; known boards: a, b); name the board, e.g. board: generic"
        )
    }

    @Test func anEmptyRootReadsNothing() {
        let facts = MachineFacts.read(root: Paths.roots + "/does-not-exist")
        #expect(facts == MachineFacts())
    }

    @Test func twoBoardsMatchingEquallyIsAmbiguous() throws {
        var a = try Paths.board("raspberry-pi-4")
        a.name = "copy"
        let facts = MachineFacts.read(root: Paths.roots + "/raspberry-pi-4-model-b")
        #expect(
            BoardDetection.detect(facts, boards: [try Paths.board("raspberry-pi-4"), a])
                == .ambiguous(["copy", "raspberry-pi-4"], because: "each matches by device-tree compatible"))
    }
}
