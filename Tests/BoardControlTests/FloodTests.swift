import BoardControl
import Testing

/// boardctl's side of `flood`: the rate's grammar and limits, the request,
/// and the line it prints.
@Suite struct FloodTests {
    @Test func ratesParseToWholeEdgesPerSecond() {
        let good: [(String, Int)] = [
            ("2kHz", 2000), ("500Hz", 500), ("100/s", 100), ("2.5kHz", 2500), ("100kHz", 100_000), ("1Hz", 1), ("0.001kHz", 1),
            ("3KHZ", 3000),
        ]
        for (text, hz) in good { #expect((try? Flood.parseRate(text).get()) == hz, "\(text)") }
        for bad in ["", "kHz", "2", "2 kHz", "-1Hz", "0Hz", "1.5Hz", "100.0001kHz", "101kHz", "1e3Hz", "2.kHz", ".5kHz", "fast", "2MHz"] {
            guard case let .failure(why) = Flood.parseRate(bad) else {
                Issue.record("'\(bad)' parsed")
                continue
            }
            #expect(why.message.contains("'\(bad)'"), "\(why.message)")
        }
        #expect((try? Flood.parseRate("101kHz").get()) == nil)
        if case let .failure(why) = Flood.parseRate("200kHz") { #expect(why.message.contains("at most 100kHz")) }
    }

    @Test func ratesAndDurationsPrintShort() {
        #expect(Flood.rateText(2000) == "2kHz")
        #expect(Flood.rateText(2500) == "2.5kHz")
        #expect(Flood.rateText(100_000) == "100kHz")
        #expect(Flood.rateText(500) == "500Hz")
        #expect(Flood.rateText(1001) == "1.001kHz")
    }

    @Test func theRequestAndTheLinePrinted() {
        #expect(
            Command.flood(line: "button", edges: 1000, rate: "2kHz").request.json(id: 1).serialized
                == #"{"v":1,"id":1,"cmd":"flood","line":"button","edges":1000,"rate":"2kHz"}"#)
        #expect(
            Command.floodStop(line: "button").request.json(id: 2).serialized == #"{"v":1,"id":2,"cmd":"flood","line":"button","stop":true}"#)
        let started = JSON.object([
            ("line", .string("button")), ("edges", .int(1000)), ("rate_hz", .int(2000)), ("duration_ns", .int(499_500_000)),
        ])
        #expect(Command.flood(line: "button", edges: 1000, rate: "2kHz").human(started) == "button: flooding 1000 edges at 2kHz, done in 499.5ms")
        let stopped = JSON.object([("line", .string("button")), ("stopped", .bool(true)), ("driven", .int(120)), ("edges", .int(1000))])
        #expect(Command.floodStop(line: "button").human(stopped) == "button: flood stopped after 120 of 1000 edges")
    }
}
