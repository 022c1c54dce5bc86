import BoardDaemon
import BoardSupport
import Testing

/// A start reads the board file its config names and no other: whether the
/// config is for this machine (which needs detection, over every board
/// file) is asked only when a command's program is missing, and a board
/// that does not match this machine answers it without the others.
@Suite struct BoardReadTests {
    static func config(program: String) -> String {
        """
        board: raspberry-pi-4
        lines:
          bell: { pin: GPIO17, input: { edge: falling } }
        commands:
          chime: { argv: ["\(program)"] }
        reactions:
          - { on: { line: bell, edge: falling }, do: [ run: chime ] }
        """
    }

    static func load(_ text: String, facts: MachineFacts) -> (LoadResult, parsed: Int, all: Int) {
        let catalog = BoardCatalog(directories: [Fixtures.boards])
        let options = LoadOptions(catalog: catalog, machine: MachineInfo(cpuCount: 4, facts: facts))
        let result = ConfigLoader.load(text: text, file: "bell.yaml", options: options)
        let parsed = catalog.boardsParsed
        return (result, parsed, catalog.names.count)
    }

    static let aPi4 = MachineFacts(model: "Raspberry Pi 4 Model B Rev 1.5", compatible: ["raspberrypi,4-model-b", "brcm,bcm2711"])

    @Test func programsThereMeanOneBoardFile() throws {
        let (r, parsed, _) = Self.load(Self.config(program: "/bin/sh"), facts: Self.aPi4)
        #expect(r.config != nil, "\(r.errors)")
        #expect(parsed == 1, "boards parsed: \(parsed)")
        #expect(r.warnings.isEmpty, "\(r.warnings)")
    }

    @Test func aMissingProgramElsewhereReadsNoOtherBoard() throws {
        // A laptop (no device tree): the Pi's board does not match it, so
        // this is not the machine the config is for, and no warning.
        let (r, parsed, _) = Self.load(Self.config(program: "/nonexistent/chime"), facts: MachineFacts())
        #expect(r.config != nil, "\(r.errors)")
        #expect(parsed == 1, "boards parsed: \(parsed)")
        #expect(r.warnings.isEmpty, "\(r.warnings)")
    }

    @Test func aMissingProgramOnItsBoardIsWarnedAfterDetection() throws {
        let (r, parsed, all) = Self.load(Self.config(program: "/nonexistent/chime"), facts: Self.aPi4)
        #expect(r.config != nil, "\(r.errors)")
        #expect(parsed == 1 + all, "the config's board, then every board for detection: \(parsed) of \(all)")
        #expect(r.warnings.map(\.message).contains { $0.contains("'/nonexistent/chime' does not exist on this machine") }, "\(r.warnings)")
    }
}
