import Testing

@testable import BoardSupport

/// Reading past YAML syntax errors: each error is reported with the key
/// path of the block it is in, the block is blanked out and the rest read.
@Suite struct YAMLRecoveryTests {
    func recover(_ text: String) -> (root: String?, skipped: [String], errors: [String]) {
        let log = DiagnosticLog(file: "t.yaml")
        var skipped: [YAMLSkippedBlock] = []
        let root = YAMLReader(log: log).compose(recovering: text, skipped: &skipped)
        let keys: String? = root.flatMap { node in
            guard case let .mapping(m) = node else { return nil }
            return m.keys.compactMap(\.string).joined(separator: ",")
        }
        return (keys, skipped.map(\.path), log.sorted.map(\.description))
    }

    @Test func aTabIndentedLineIsSkippedWithItsEntry() {
        let r = recover("lines:\n  a:\n    pin: x\n\tinput: {}\n  b: { pin: y }\nmodes: {}\n")
        #expect(r.skipped == ["lines.a"])
        #expect(r.errors == ["t.yaml:4:1: error: lines.a: YAML syntax: a tab character indents this line; YAML indents with spaces"])
        #expect(r.root == "lines,modes")
    }

    @Test func anItemOfATopLevelListIsSkippedAlone() {
        // Items at the key's own indentation, as YAML allows.
        let r = recover("reactions:\n- on: x\n- on: [y\n  do: z\n- on: w\ntasks: {}\n")
        #expect(r.skipped == ["reactions[1]"])
        #expect(r.root == "reactions,tasks")
    }

    @Test func aBrokenTopLevelLineSkipsItsSection() {
        let r = recover("board: [demo\nlines:\n  a: 1\n")
        #expect(r.skipped == ["board"])
        #expect(r.root == "lines")
    }

    @Test func severalErrorsAreEachReported() {
        let r = recover("a:\n  x: {\n  y: 1\nb:\n  z: [\n  w: 2\n")
        #expect(r.skipped == ["a.x", "b.z"])
        #expect(r.errors.count == 2)
        #expect(r.root == "a,b")
    }

    @Test func recoveryIsBounded() {
        let broken = (0..<50).map { "k\($0):\n  e: {\n" }.joined()
        let r = recover(broken)
        #expect(r.skipped.count == YAMLReader.maximumSyntaxRecoveries)
        #expect(r.errors.count == YAMLReader.maximumSyntaxRecoveries + 1)
        #expect(r.root == nil)
    }

    /// Found by the config fuzz test (when duplicate keys were found by
    /// renaming them and composing again, a recovery once made that loop
    /// endless): a syntax error blanked out and duplicate keys elsewhere,
    /// every duplicate reported with its first occurrence, in one compose.
    @Test func duplicateKeysAcrossARecoveryEnd() {
        let text =
            "boa  led: { pin: GPIO27, output: { initial: off } }\nrd: demo\nlines:\n"
            + "  led: { p1,\u{85}~%in: LED, output: { initial: off, initial: on } }\n"
            + "  button: { pin: BUTTON, input: !!map {} }\n  led: { pin: MOCK0_3*a0, output: {} }\n"
            + "tasks:\n  t: { every: 1s, do: [ toggle: led ], every: 2s }\n"
        let r = recover(text)
        #expect(r.root == nil)
        #expect(
            r.errors == [
                "t.yaml:5:36: error: key 'initial' is given more than once in this mapping (first at 5:22)",
                "t.yaml:7:3: error: key 'led' is given more than once in this mapping (first at 4:3)",
                "t.yaml:9:40: error: key 'every' is given more than once in this mapping (first at 9:8)",
            ])
    }

    /// Keys given twice are all reported up to a bound, and the rest counted.
    @Test func manyDuplicateKeysAreListedToABoundAndCounted() {
        let text = "a: 1\n" + (0..<100).map { _ in "a: 2\n" }.joined()
        let r = recover(text)
        #expect(r.root == nil)
        #expect(r.errors.count == YAMLReader.maximumDuplicateGroups + 1)
        #expect(r.errors.first == "t.yaml:2:1: error: key 'a' is given more than once in this mapping (first at 1:1)")
        #expect(r.errors.last == "t.yaml:\(YAMLReader.maximumDuplicateGroups + 2):1: error: 36 more keys are given more than once in their mappings (the first 64 are listed)")
    }

    @Test func composeWithoutRecoveryStillStopsAtTheFirstError() {
        let log = DiagnosticLog(file: "t.yaml")
        #expect(YAMLReader(log: log).compose("a:\n  x: {\n  y: 1\nb:\n  z: [\n") == nil)
        #expect(log.errors.count == 1)
        #expect(log.errors.first?.path == "")
    }
}
