import BoardloopTestSupport
import CDaemon
import Clibmosquitto
import Foundation
import Glibc
import XCTest

/// A real `mosquitto` broker on 127.0.0.1, started by a test on a free
/// port with a generated config: anonymous, with a password file, or
/// with TLS. Stopped (SIGTERM, then SIGKILL) when released. Its queue per
/// client is unbounded (`max_queued_messages 0`): a test's probe that
/// falls behind on a loaded machine is not dropped messages it counts.
final class Broker: @unchecked Sendable {
    struct Credentials {
        var user: String
        var password: String
    }

    let port: Int
    let dir: String
    let credentials: Credentials?
    let tls: TestCA?
    private var process: Process?
    private let output = Pipe()

    /// Whether `mosquitto` is installed (scripts/install-deps.sh installs it).
    static var installed: Bool { FileManager.default.isExecutableFile(atPath: "/usr/sbin/mosquitto") }

    init(credentials: Credentials? = nil, tls: TestCA? = nil, port: Int? = nil) throws {
        guard Self.installed else { throw BrokerError("mosquitto is not installed: run scripts/install-deps.sh (it installs the broker the MQTT tests start)") }
        self.port = port ?? Self.freePort()
        self.credentials = credentials
        self.tls = tls
        dir = NSTemporaryDirectory() + "broker-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var conf = """
            listener \(self.port) 127.0.0.1
            persistence false
            max_queued_messages 0
            log_dest stderr
            log_type error
            log_type warning
            log_type notice
            user \(String(cString: getpwuid(geteuid()).pointee.pw_name))

            """
        if let c = credentials {
            let file = dir + "/passwords"
            try Self.run("/usr/bin/mosquitto_passwd", ["-b", "-c", file, c.user, c.password])
            conf += "allow_anonymous false\npassword_file \(file)\n"
        } else {
            conf += "allow_anonymous true\n"
        }
        if let t = tls {
            conf += "cafile \(t.caCert)\ncertfile \(t.serverCert)\nkeyfile \(t.serverKey)\n"
        }
        try conf.write(toFile: dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Starts it (again, after `kill`) and waits until it accepts connections.
    func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/sbin/mosquitto")
        p.arguments = ["-c", dir + "/mosquitto.conf"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try p.run()
        process = p
        let end = Date().addingTimeInterval(20)
        while Date() < end {
            if Self.accepts(port) { return }
            guard p.isRunning else { throw BrokerError("mosquitto exited at start (\(p.terminationStatus)); config in \(dir)") }
            usleep(20_000)
        }
        throw BrokerError("mosquitto did not listen on \(port) within 20 s")
    }

    /// Kills it at once (SIGKILL: no clean end, as a broker's crash or a
    /// power cut), and waits for the port to close.
    func kill() {
        guard let p = process, p.isRunning else { return }
        Glibc.kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    /// Stops it where it is (SIGSTOP: it answers nothing, its sockets stay
    /// open, as a broker that hangs) or lets it go on (SIGCONT).
    func pause(_ on: Bool) {
        guard let p = process, p.isRunning else { return }
        Glibc.kill(p.processIdentifier, on ? SIGSTOP : SIGCONT)
    }

    func stop() {
        guard let p = process, p.isRunning else { return }
        Glibc.kill(p.processIdentifier, SIGCONT)
        Glibc.kill(p.processIdentifier, SIGTERM)
        let end = Date().addingTimeInterval(5)
        while p.isRunning && Date() < end { usleep(10_000) }
        if p.isRunning { Glibc.kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        process = nil
    }

    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &a) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return false }
        // The port is from the ephemeral range: while nothing listens, a
        // connect to it can pick that very port as its own and connect to
        // itself (TCP's simultaneous open), which is not the broker.
        var me = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &me) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: me.sin_port)) != port
    }

    /// The next port to try: below the kernel's ephemeral range (which
    /// starts at 32768), so no connection picks it as its own, and never
    /// the same one twice in a process, so a client of an earlier test
    /// that still reconnects to its broker's port cannot reach a later
    /// test's broker. Each process starts elsewhere (its pid).
    private static let nextPort = Locked(20_000 + Int(getpid() % 400) * 30)

    /// A port free now, of those `nextPort` hands out.
    static func freePort() -> Int {
        while true {
            let port = nextPort.withLock { p -> Int in
                defer { p = p + 1 >= 32_000 ? 20_000 : p + 1 }
                return p
            }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = in_port_t(UInt16(port).bigEndian)
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            let ok = withUnsafePointer(to: &a) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            close(fd)
            if ok { return port }
        }
    }

    static func run(_ tool: String, _ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw BrokerError("\(tool) \(args.joined(separator: " ")) exited \(p.terminationStatus)") }
    }
}

struct BrokerError: Error, CustomStringConvertible {
    let description: String
    init(_ s: String) { description = s }
}

/// A throwaway certificate authority made with openssl, and a server
/// certificate it signed for 127.0.0.1 and localhost.
struct TestCA: Sendable {
    let dir: String
    var caCert: String { dir + "/ca.crt" }
    var serverCert: String { dir + "/server.crt" }
    var serverKey: String { dir + "/server.key" }

    /// One made per test process for each name ("right", "wrong").
    static func make(_ name: String) throws -> TestCA {
        let dir = NSTemporaryDirectory() + "test-ca-\(getpid())-\(name)"
        if FileManager.default.fileExists(atPath: dir + "/server.crt") { return TestCA(dir: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ssl = "/usr/bin/openssl"
        try Broker.run(ssl, ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/ca.key", "-out", dir + "/ca.crt", "-days", "2",
            "-subj", "/CN=boardloop test CA \(name)"])
        try Broker.run(ssl, ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/server.key", "-out", dir + "/server.csr", "-subj", "/CN=localhost"])
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(toFile: dir + "/san.ext", atomically: true, encoding: .utf8)
        try Broker.run(ssl, ["x509", "-req", "-in", dir + "/server.csr", "-CA", dir + "/ca.crt", "-CAkey", dir + "/ca.key", "-CAcreateserial",
            "-out", dir + "/server.crt", "-days", "2", "-extfile", dir + "/san.ext"])
        return TestCA(dir: dir)
    }
}

/// A test's own MQTT client (libmosquitto with its own thread): it
/// subscribes to everything and keeps every message, for waits with a deadline.
final class Probe: @unchecked Sendable {
    struct Message: CustomStringConvertible {
        var topic: String
        var payload: String
        var retained: Bool
        var description: String { "\(topic) \(payload)\(retained ? " (retained)" : "")" }
        var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any] }
    }

    private let mosq: OpaquePointer
    private let got = Locked([Message]())
    private let subscribed = Locked(false)
    private let connects = Locked(0)
    /// Message ids the broker has acknowledged (PUBACK), not yet waited for.
    private let acked = Locked(Set<Int32>())

    init(port: Int, credentials: Broker.Credentials? = nil, subscribe: String = "#") throws {
        mosquitto_lib_init()
        guard let m = mosquitto_new("probe-\(getpid())-\(UInt32.random(in: 0...UInt32.max))", true, nil) else { throw BrokerError("mosquitto_new") }
        mosq = m
        mosquitto_user_data_set(m, Unmanaged.passUnretained(self).toOpaque())
        if let c = credentials { mosquitto_username_pw_set(m, c.user, c.password) }
        mosquitto_message_callback_set(m) { _, obj, msg in
            guard let obj, let msg else { return }
            let p = Unmanaged<Probe>.fromOpaque(obj).takeUnretainedValue()
            let payload = String(decoding: UnsafeRawBufferPointer(start: msg.pointee.payload, count: Int(msg.pointee.payloadlen)), as: UTF8.self)
            let m = Message(topic: String(cString: msg.pointee.topic), payload: payload, retained: msg.pointee.retain)
            p.got.withLock { $0.append(m) }
        }
        mosquitto_subscribe_callback_set(m) { _, obj, _, _, _ in
            guard let obj else { return }
            Unmanaged<Probe>.fromOpaque(obj).takeUnretainedValue().subscribed.withLock { $0 = true }
        }
        mosquitto_publish_callback_set(m) { _, obj, mid in
            guard let obj else { return }
            _ = Unmanaged<Probe>.fromOpaque(obj).takeUnretainedValue().acked.withLock { $0.insert(mid) }
        }
        // Subscribes at each CONNACK (a reconnect included), so the
        // subscription is never sent ahead of the session it belongs to.
        mosquitto_connect_callback_set(m) { mosq, obj, rc in
            guard let obj, let mosq, rc == 0 else { return }
            let p = Unmanaged<Probe>.fromOpaque(obj).takeUnretainedValue()
            p.connects.withLock { $0 += 1 }
            mosquitto_subscribe(mosq, nil, p.topic, 1)
        }
        topic = subscribe
        let rc = mosquitto_connect(m, "127.0.0.1", Int32(port), 30)
        guard rc == 0 else { throw BrokerError("probe cannot connect: \(String(cString: mosquitto_strerror(rc)))") }
        // Its network loop on a thread of its own, waiting in poll():
        // libmosquitto's own loop waits in select(), which cannot watch an
        // fd numbered 1024 or more, and a long test process reaches that.
        mosquitto_threaded_set(m, true)
        network.start(m)
        // Subscribed (SUBACK) before the test goes on.
        let end = Date().addingTimeInterval(20)
        while !subscribed.withLock({ $0 }) && Date() < end { usleep(2_000) }
        guard subscribed.withLock({ $0 }) else {
            throw BrokerError("the probe's subscription was not acknowledged within 20 s (CONNACKs: \(connects.withLock { $0 }))")
        }
    }

    /// What it subscribes to, at each connection.
    private var topic = "#"

    deinit {
        mosquitto_disconnect(mosq)
        network.stop()
        mosquitto_destroy(mosq)
    }

    private let network = PollLoop()

    /// A client's network loop: poll() on its socket, then its reads,
    /// writes and housekeeping, until stopped (joined, bounded).
    final class PollLoop: @unchecked Sendable {
        private let running = Locked(true)
        private let started = Locked(false)
        private let done = DispatchSemaphore(value: 0)

        func start(_ m: OpaquePointer) {
            started.withLock { $0 = true }
            let client = Client(m)
            Thread { [self] in
                while running.withLock({ $0 }) {
                    let fd = mosquitto_socket(client.m)
                    guard fd >= 0 else {
                        usleep(20_000)
                        _ = mosquitto_reconnect(client.m)
                        continue
                    }
                    var p = pollfd(fd: fd, events: Int16(POLLIN) | (mosquitto_want_write(client.m) ? Int16(POLLOUT) : 0), revents: 0)
                    if poll(&p, 1, 50) > 0 {
                        if p.revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 { _ = mosquitto_loop_read(client.m, 1) }
                        if p.revents & Int16(POLLOUT) != 0 { _ = mosquitto_loop_write(client.m, 1) }
                    }
                    _ = mosquitto_loop_misc(client.m)
                }
                done.signal()
            }.start()
        }

        func stop() {
            running.withLock { $0 = false }
            guard started.withLock({ $0 }) else { return }
            _ = done.wait(timeout: .now() + 5)
        }

        private struct Client: @unchecked Sendable {
            let m: OpaquePointer
            init(_ m: OpaquePointer) { self.m = m }
        }
    }

    var messages: [Message] { got.withLock { $0 } }

    func clear() { got.withLock { $0 = [] } }

    /// Publishes at QoS 1 and returns once the broker has it (its PUBACK,
    /// at most 10 s): what the test does next comes after it at the broker.
    func publish(_ topic: String, _ payload: String, retain: Bool = false) {
        var mid: Int32 = 0
        let rc = payload.withCString { mosquitto_publish(mosq, &mid, topic, Int32(strlen($0)), $0, 1, retain) }
        guard rc == 0 else { return }
        let end = Date().addingTimeInterval(10)
        while !acked.withLock({ $0.contains(mid) }) && Date() < end { usleep(1_000) }
        acked.withLock { _ = $0.remove(mid) }
    }

    /// The first message (in arrival order) that `match` accepts, waiting at most `seconds`.
    func wait(seconds: Double = 20, _ match: (Message) -> Bool) -> Message? {
        let end = Date().addingTimeInterval(seconds)
        repeat {
            if let m = messages.first(where: match) { return m }
            usleep(10_000)
        } while Date() < end
        return nil
    }

    func wait(_ topic: String, _ payload: String? = nil, seconds: Double = 20) -> Message? {
        wait(seconds: seconds) { $0.topic == topic && (payload == nil || $0.payload == payload) }
    }

    /// Messages on `topic`, in order.
    func on(_ topic: String) -> [Message] { messages.filter { $0.topic == topic } }
}

/// One request on a boardd control socket, and its reply line.
func controlRequest(_ socketPath: String, _ json: String) throws -> String {
    let fd = bd_unix_connect(socketPath)
    guard fd >= 0 else { throw BrokerError("cannot connect to \(socketPath): \(String(cString: strerror(-fd)))") }
    defer { close(fd) }
    let flags = fcntl(fd, F_GETFL)
    _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
    var tv = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    let line = Array((json + "\n").utf8)
    guard write(fd, line, line.count) == line.count else { throw BrokerError("write to the control socket failed") }
    var reply: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 4096)
    while !reply.contains(0x0a) {
        let n = read(fd, &buf, buf.count)
        guard n > 0 else { break }
        reply += buf[0..<n]
    }
    return String(decoding: reply, as: UTF8.self)
}

/// The Python venvs scripts/install-deps.sh makes for the tests (under
/// ~/.cache/boardloop), their helper scripts run as processes, and the
/// fleet example laid out for a test.
enum PythonTools {
    /// `bin/NAME` of the venv `venv` there; a failure that says to make it
    /// when it is missing (these tests do not skip).
    static func python(venv: String, _ name: String, installs what: String) throws -> String {
        let env = ProcessInfo.processInfo.environment
        let cache = env["XDG_CACHE_HOME"] ?? ((env["HOME"] ?? "/root") + "/.cache")
        let path = cache + "/boardloop/\(venv)/bin/\(name)"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BrokerError("no \(path): run scripts/install-deps.sh (it installs \(what) from PyPI there)")
        }
        return path
    }

    /// Runs `executable` with `arguments` to its end: its exit status and
    /// what it wrote to stdout and stderr, together.
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationStatus, text)
    }

    /// A new directory with examples/fleet's shared packages (common.yaml,
    /// mqtt.yaml) and a secrets.yaml giving `mqtt_password`; the caller
    /// removes it.
    static func fleetDirectory(password: String) throws -> String {
        let dir = NSTemporaryDirectory() + "fleet-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for f in ["common.yaml", "mqtt.yaml"] {
            try FileManager.default.copyItem(atPath: Fixtures.examples + "/fleet/" + f, toPath: dir + "/" + f)
        }
        try "mqtt_password: \(password)\n".write(toFile: dir + "/secrets.yaml", atomically: true, encoding: .utf8)
        chmod(dir + "/secrets.yaml", 0o600)
        return dir
    }
}
