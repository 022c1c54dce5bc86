import BoardloopGPIOMock
import Foundation
import Testing

@testable import BoardSupport

/// Detection from fixture roots: a fake /proc/device-tree and
/// /sys/class/gpio/gpiochip*/label, as a real machine has them.
@Suite struct DetectionTests {
    static let expected: [(root: String, board: String?, because: String)] = [
        ("raspberry-pi-3-model-b", "raspberry-pi-3", "compatible \"raspberrypi,3-model-b\""),
        ("raspberry-pi-3-model-b-plus", "raspberry-pi-3", "compatible \"raspberrypi,3-model-b-plus\""),
        ("raspberry-pi-zero-2-w", "raspberry-pi-3", "compatible \"raspberrypi,model-zero-2-w\""),
        ("raspberry-pi-4-model-b", "raspberry-pi-4", "compatible \"raspberrypi,4-model-b\""),
        ("raspberry-pi-400", "raspberry-pi-4", "compatible \"raspberrypi,400\""),
        ("compute-module-4", "raspberry-pi-4", "compatible \"raspberrypi,4-compute-module\""),
        ("raspberry-pi-5-model-b", "raspberry-pi-5", "compatible \"raspberrypi,5-model-b\""),
        ("raspberry-pi-500", "raspberry-pi-5", "compatible \"raspberrypi,500\""),
        ("compute-module-5", "raspberry-pi-5", "compatible \"raspberrypi,5-compute-module\""),
        ("model-only-pi-4", "raspberry-pi-4", "model starts with \"Raspberry Pi 4\""),
        ("chips-only-pi-5", "raspberry-pi-5", "GPIO chip pinctrl-rp1 present"),
        ("gpio-sim", "gpio-sim", "GPIO chips boardloop-sim0, boardloop-sim1 present"),
        ("no-match", nil, ""),
    ]

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
