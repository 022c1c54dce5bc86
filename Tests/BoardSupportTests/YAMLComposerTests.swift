import Testing

@testable import BoardSupport

/// The YAML reader's own composer, from libyaml's events: the tree, its
/// marks, tags and styles, and what it refuses, with libyaml's own words.
@Suite struct YAMLComposerTests {
    func compose(_ text: String, tags: [String] = ["!include", "!secret"], source: Int = 0) -> (Node?, [String]) {
        let log = DiagnosticLog(file: "t.yaml")
        var r = YAMLReader(log: log)
        r.scalarTags = tags
        let root = r.compose(text, source: source)
        return (root, log.sorted.map(\.description))
    }

    @Test func aDocumentComposesWithMarksTagsAndStyles() throws {
        let (root, errors) = compose("a: 1\nb: 'two'\nc: [x, \"y\"]\nd: !secret token\ne: |\n  text\n")
        #expect(errors.isEmpty)
        guard case let .mapping(m) = try #require(root) else { Issue.record("not a mapping"); return }
        #expect(m.keys.compactMap(\.string) == ["a", "b", "c", "d", "e"])
        #expect(m.mark == Mark(line: 1, column: 1))
        guard case let .scalar(one) = m[0].value, case let .scalar(two) = m[1].value, case let .sequence(list) = m[2].value,
            case let .scalar(secret) = m[3].value, case let .scalar(block) = m[4].value
        else { Issue.record("shapes: \(m)"); return }
        #expect(one.string == "1" && one.style == .plain && one.tag == .implicit && one.mark == Mark(line: 1, column: 4))
        #expect(two.string == "two" && two.style == .singleQuoted && two.tag == .str)
        #expect(list.style == .flow && list.map { $0.string } == ["x", "y"] && list[1].tag == .str)
        #expect(secret.tag.description == "!secret" && secret.string == "token")
        #expect(block.style == .literal && block.string == "text\n")
    }

    @Test func anAliasIsACopyOfItsAnchoredNode() throws {
        let (root, errors) = compose("base: &b { pin: LED, output: {} }\nother: *b\n")
        #expect(errors.isEmpty)
        guard case let .mapping(m) = try #require(root) else { return }
        #expect(m[0].value == m[1].value)
        #expect(m[1].value.mark == Mark(line: 1, column: 7))  // where it was written (its anchor)
    }

    @Test func anUndefinedAliasAndASecondDocumentAreSyntaxErrors() {
        #expect(compose("a: *nowhere\n").1 == ["t.yaml:1:4: error: YAML syntax: found undefined alias"])
        #expect(
            compose("a: 1\n---\nb: 2\n").1
                == ["t.yaml:2:1: error: YAML syntax: but found another document (expected a single document in the stream at 1:1)"])
    }

    @Test func libyamlsOwnWordsAndMarks() {
        #expect(
            compose("a: [1, 2\nb: 3\n").1
                == ["t.yaml:2:2: error: YAML syntax: did not find expected ',' or ']' (while parsing a flow sequence at 1:4)"])
    }

    @Test func emptyTextAndAByteOrderMark() throws {
        #expect(compose("").0 == nil && compose("").1.isEmpty)
        #expect(compose("# only a comment\n").0 == nil)
        let (root, errors) = compose("\u{FEFF}board: demo\n")
        #expect(errors.isEmpty)
        #expect(try #require(root).mark == Mark(line: 1, column: 1))
    }

    @Test func aSourceIsStampedIntoEveryMark() throws {
        let (root, _) = compose("a: { b: [c] }\n", source: 3)
        guard case let .mapping(m) = try #require(root), case let .mapping(inner) = m[0].value, case let .sequence(q) = inner[0].value
        else { return }
        #expect([m.mark.source, m[0].key.mark.source, inner.mark.source, q[0].mark.source] == [3, 3, 3, 3])
        let log = DiagnosticLog(file: "t.yaml")
        #expect(YAMLReader(log: log).position(q[0]) == Position(line: 1, column: 10, source: 3))
        #expect(YAMLReader.position(q[0]) == Position(line: 1, column: 10))
    }

    @Test func tagsOutsideTheLanguageAreRefusedWhereTheyAre() {
        #expect(
            compose("a: !secrt x\nb: !!str y\nc: !!map {}\nd: !!int 3\ne: !include [x]\n").1 == [
                "t.yaml:1:4: error: unknown tag '!secrt'; did you mean '!secret'? (the config language has only the tags !include and !secret)",
                "t.yaml:4:4: error: unknown tag '!!int': the config language has only the tags !include and !secret (write the value itself; quotes make a string)",
                "t.yaml:5:4: error: !include takes a single value (!include NAME), found a list",
            ])
        #expect(
            compose("a: !secret x\n", tags: []).1
                == ["t.yaml:1:4: error: unknown tag '!secret': the config language has no tags (write the value itself; quotes make a string)"])
    }

    /// Past the depth limit a collection is reported once and skipped, and
    /// the rest still read.
    @Test func tooDeepIsReportedOnceAndTheRestRead() {
        let text = "a: " + String(repeating: "[", count: 200) + String(repeating: "]", count: 200) + "\nb: !bad x\n"
        let (root, errors) = compose(text)
        #expect(root == nil)
        #expect(
            errors == [
                "t.yaml:1:103: error: lists and mappings are nested more than 100 deep here; a config needs only a few levels",
                "t.yaml:2:4: error: unknown tag '!bad': the config language has only the tags !include and !secret (write the value itself; quotes make a string)",
            ])
    }

    /// A file nested a million deep stops at libyaml's usual limit (Debian's
    /// libyaml has none, and its scanner slows with every level): reading
    /// stops there, so the file costs what a thousand levels cost.
    @Test func aMillionDeepStopsAtAThousand() {
        let n = 1_000_000
        let text = "a: " + String(repeating: "[", count: n) + String(repeating: "]", count: n) + "\n"
        let (root, errors) = compose(text)
        #expect(root == nil)
        #expect(
            errors == [
                "t.yaml:1:1003: error: YAML: lists and mappings are nested more than 1000 deep here; a config needs only a few levels"
            ])
    }

    /// After an alias expands the document too far nothing more is
    /// composed, but a syntax error after it is still what is reported.
    @Test func aSyntaxErrorAfterAnAliasOverflowIsWhatIsReported() {
        var text = "a: &a [" + Array(repeating: "x", count: 1000).joined(separator: ", ") + "]\n"
        text += "b: &b [" + Array(repeating: "*a", count: 200).joined(separator: ", ") + "]\n"
        let errors = compose(text).1
        #expect(errors.count == 1 && errors[0].contains("alias *a makes the document larger than 100000 nodes"))
        #expect(compose(text + "c: [\n").1.first?.contains("YAML syntax") == true)
    }
}
