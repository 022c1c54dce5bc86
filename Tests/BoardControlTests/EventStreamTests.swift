import BoardControl
import Testing

/// `boardctl events`' lines as a person reads them, and its request.
@Suite struct EventStreamTests {
    @Test func anEventIsOneLineTimeLoopLineTextKind() throws {
        let reaction = try #require(
            JSON.parse(
                #"{"t_ns":1795507630123456789,"loop":"main","kind":"reaction","line":"button","text":"button: press -> flip","level":"info","reaction":"flip","took_ns":85000}"#
            ))
        let line = EventStream.human(reaction)
        #expect(line.hasSuffix(".123456 main  button  press -> flip (reaction, 85us)"), "\(line)")
        let time = line.prefix(15)
        #expect(time.count == 15 && time.filter { $0 == ":" }.count == 2, "\(line)")

        let mode = try #require(JSON.parse(#"{"t_ns":5000,"loop":"w","kind":"mode","text":"mode default -> quiet (mode action)"}"#))
        #expect(EventStream.human(mode).hasSuffix(".000005 w  -  mode default -> quiet (mode action) (mode)"), "\(EventStream.human(mode))")
    }

    @Test func theRequestNamesFollowAndTheLine() {
        #expect(EventStream.request(line: "bell", follow: true).line(id: 3) == #"{"v":1,"id":3,"cmd":"events","follow":true,"line":"bell"}"# + "\n")
        #expect(EventStream.request(line: nil, follow: false).line(id: 1) == #"{"v":1,"id":1,"cmd":"events","follow":false}"# + "\n")
    }
}
