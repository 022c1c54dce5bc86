import BoardControl
import BoardSupport
import Boardloop
import CDaemon
import CMosquitto
import Glibc
import Logging

/// libmosquitto driven by the main loop, with no thread of its own: its
/// socket is a port source (readable → `mosquitto_loop_read`; writable
/// interest only while `mosquitto_want_write` says so →
/// `mosquitto_loop_write`), a timer armed for when the keepalive is due
/// calls `mosquitto_loop_misc` (the ping; idle, the client wakes twice per
/// keepalive: the ping and its answer), and it connects again by itself
/// after any loss, with exponential back-off and jitter, forever.
///
/// Connecting blocks (the broker's name is resolved with `getaddrinfo`,
/// which may wait for DNS), so each attempt runs `mosquitto_connect_async`
/// on a short-lived thread of its own with a fresh client instance the loop
/// does not touch meanwhile; the thread hands the instance back through a
/// perform request. The TLS handshake and MQTT's CONNECT/CONNACK then run
/// on the loop, non-blocking. Each attempt has its own instance, so a lost
/// or refused connection is simply destroyed (its socket with it) and the
/// next attempt starts clean; the port source is made for each socket.
///
/// Main loop only, except the connecting thread as described.
final class MQTTClient {
    struct Settings: Equatable {
        var host: String
        var port: Int
        var clientID: String
        var username: String?
        var password: String?
        var tls: MQTTConfig.TLS?
        var keepalive: Int
        /// The last will: published by the broker when the connection is
        /// lost without a DISCONNECT (`offline`, retained).
        var will: (topic: String, payload: String, qos: Int, retain: Bool)
        var reconnectMin: Duration
        var reconnectMax: Duration

        static func == (a: Settings, b: Settings) -> Bool {
            a.host == b.host && a.port == b.port && a.clientID == b.clientID && a.username == b.username && a.password == b.password
                && a.tls == b.tls && a.keepalive == b.keepalive && a.will.topic == b.will.topic && a.will.payload == b.will.payload
                && a.reconnectMin == b.reconnectMin && a.reconnectMax == b.reconnectMax
        }
    }

    enum State: Equatable {
        /// Not started, or stopped.
        case idle
        /// A thread resolves the name and opens the socket.
        case opening
        /// The socket is open: the TLS handshake and CONNECT/CONNACK run.
        case handshaking
        /// CONNACK accepted: publishing and subscribing work.
        case up
        /// Waiting to try again.
        case waiting
    }

    /// How long a connection may take from its socket to the broker's
    /// CONNACK before it is given up (a broker that accepts and never
    /// answers).
    static let handshakeTimeout: Duration = .seconds(10)

    let loop: BoardRunLoop
    let logger: Logger
    private(set) var settings: Settings
    private(set) var state: State = .idle
    /// The connected (or handshaking) instance, main loop only.
    private var instance: UncheckedPointer?
    private var mosq: OpaquePointer? { instance?.pointer }
    private var source: PortSource?
    /// Whether the source watches for writability now.
    private var wantsWrite = false
    /// Armed for when the keepalive is due (`keepaliveDue`), only while
    /// connected.
    private var misc: RunLoopTimer?
    /// When the connection last read and last wrote (called into the
    /// library that may have), on the loop's clock: libmosquitto pings
    /// once either is a keepalive old.
    private var lastRead = MonotonicInstant(nanoseconds: 0)
    private var lastWrite = MonotonicInstant(nanoseconds: 0)
    /// Keepalive ticks (`mosquitto_loop_misc` calls), for the tests.
    private(set) var keepaliveTicks: UInt64 = 0
    /// The next attempt, or the handshake's deadline.
    private var retry: RunLoopTimer?
    private let opened: PerformWorkItem
    private let attempt = Attempt()
    /// Failures in a row (the back-off doubles with each).
    private(set) var failures = 0
    /// Connections made in all, and losses.
    private(set) var connections: UInt64 = 0
    private(set) var losses: UInt64 = 0
    /// Why the last attempt failed or the last connection was lost (nil
    /// once connected).
    private(set) var lastError: String?
    /// Why the broker refused the last CONNECT (set from the connect callback).
    private var refused: String?
    /// The broker refused MQTT 5 (a 3.1.1-only broker): boardd speaks
    /// MQTT 3.1.1 to it until the settings change. With MQTT 5, every
    /// subscription asks for retain-as-published, so a retained command
    /// published while boardd is connected still says it is retained.
    private(set) var speaks311 = false
    /// The library's last error or warning line (it says what TLS did not accept).
    private let libraryLog = LockedValue<String?>(nil)

    /// Called on the loop: the connection is up (CONNACK accepted), it
    /// went down (with why), a message arrived, and everything queued was
    /// written (`want_write` turned false).
    var onUp: () -> Void = {}
    var onDown: (String) -> Void = { _ in }
    var onMessage: (String, UnsafeRawBufferPointer, Bool) -> Void = { _, _, _ in }
    var onDrained: () -> Void = {}

    /// Its timers (made at the start) and the connecting thread's hand-over.
    static let budget = LoopBudget(timers: 2, performs: 1)
    /// The connection's socket, a source once connected.
    static let socketBudget = LoopBudget(sources: 1)

    init(loop: BoardRunLoop, settings: Settings, logger: Logger) {
        self.loop = loop
        self.settings = settings
        self.logger = logger
        let box = WeakClient()
        opened = PerformWorkItem(modes: [.common]) { box.client?.openFinished() }
        box.client = self
    }

    deinit {
        instance?.destroy()
    }

    // MARK: Start, stop

    func start() throws {
        let m = RunLoopTimer.rearmable(tolerance: .milliseconds(100)) { [unowned self] _ in self.miscTick() }
        try loop.add(m, mode: .common)
        misc = m
        let r = RunLoopTimer.rearmable { [unowned self] _ in self.retryTick() }
        try loop.add(r, mode: .common)
        retry = r
        open()
    }

    /// New settings that need no new connection (the back-off's).
    func adopt(_ s: Settings) { settings = s }

    /// New settings (a reload): the connection is made again with them.
    func reconnect(with s: Settings, because why: String) {
        if s.host != settings.host || s.port != settings.port { speaks311 = false }
        settings = s
        guard state != .idle else { return }
        if state == .opening {
            // The thread's instance is dropped when it hands it back.
            attempt.stale = true
            return
        }
        close(goodbye: .milliseconds(200))
        logger.notice("mqtt: connecting again (\(why))")
        failures = 0
        open()
    }

    /// A clean end: DISCONNECT is sent (the broker does not publish the
    /// will) and what is queued written, for at most `flush`.
    func stop(flush: Duration = .milliseconds(500)) {
        close(goodbye: flush)
        misc?.invalidate()
        retry?.invalidate()
        misc = nil
        retry = nil
        state = .idle
        if attempt.joinOrAbandon(timeout: .seconds(2)) == false {
            logger.warning("mqtt: the connecting thread did not finish within 2 s (name resolution?); left behind")
        }
    }

    /// DISCONNECT, and what is queued written, for at most `flush`.
    private func goodbye(_ m: OpaquePointer, flush: Duration) {
        bdm_disconnect(m)
        let end = MonotonicClock.nanoseconds &+ UInt64(flush.nanosecondsClamped)
        var p = pollfd(fd: bdm_socket(m), events: Int16(POLLOUT), revents: 0)
        while bdm_want_write(m), p.fd >= 0, MonotonicClock.nanoseconds < end {
            guard poll(&p, 1, 50) >= 0 else { break }
            if bdm_loop_write(m, 1) != MOSQ_ERR_SUCCESS.rawValue { break }
        }
    }

    // MARK: Publishing

    /// Whether the socket's buffer is full (the broker does not read):
    /// what would be published now waits in libmosquitto's memory instead.
    var backlogged: Bool { state == .up && wantsWrite }

    /// Publishes; false when the client is not up or libmosquitto refused it.
    @discardableResult
    func publish(_ topic: String, _ payload: some Collection<UInt8>, qos: Int, retain: Bool) -> Bool {
        guard state == .up, let m = mosq else { return false }
        let bytes = Array(payload)
        let rc = bytes.withUnsafeBytes { p in
            bdm_publish(m, nil, topic, Int32(p.count), p.baseAddress, Int32(qos), retain)
        }
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            if rc == MOSQ_ERR_PAYLOAD_SIZE.rawValue || rc == MOSQ_ERR_INVAL.rawValue || rc == MOSQ_ERR_MALFORMED_UTF8.rawValue {
                logger.warning("mqtt: cannot publish to \(topic): \(Self.describe(rc))")
            }
            return false
        }
        lastWrite = loop.now
        updateInterest()
        return true
    }

    func subscribe(_ pattern: String, qos: Int) {
        guard state == .up, let m = mosq else { return }
        // MQTT 5: the broker keeps a message's retain flag on what it
        // forwards to this subscription (MQTT 3.1.1 clears it on a live one).
        let rc =
            speaks311
            ? bdm_subscribe(m, nil, pattern, Int32(qos))
            : bdm_subscribe_v5(m, nil, pattern, Int32(qos), Int32(MQTT_SUB_OPT_RETAIN_AS_PUBLISHED.rawValue), nil)
        if rc != MOSQ_ERR_SUCCESS.rawValue { logger.warning("mqtt: cannot subscribe to \(pattern): \(Self.describe(rc))") }
        lastWrite = loop.now
        updateInterest()
    }

    func unsubscribe(_ pattern: String) {
        guard state == .up, let m = mosq else { return }
        _ = bdm_unsubscribe(m, nil, pattern)
        lastWrite = loop.now
        updateInterest()
    }

    // MARK: Connecting

    private func open() {
        guard let m = makeInstance() else {
            scheduleRetry(after: "cannot make a client instance")
            return
        }
        state = .opening
        refused = nil
        libraryLog.withLock { $0 = nil }
        let s = settings
        let loop = self.loop, item = opened
        attempt.start(m) { p in
            let rc = bdm_connect_async(p.pointer, s.host, Int32(s.port), Int32(s.keepalive))
            let e = errno
            return (rc, e)
        } done: {
            _ = try? loop.perform(item)
        }
    }

    /// A fresh instance with the settings: credentials, TLS, the will, callbacks.
    private func makeInstance() -> UncheckedPointer? {
        let s = settings
        let context = Unmanaged.passRetained(InstanceContext(self, libraryLog))
        guard let m = bdm_new(s.clientID, true, context.toOpaque()) else {
            logger.error("mqtt: mosquitto_new failed: \(String(cString: strerror(errno)))")
            context.release()
            return nil
        }
        var ok = true
        func check(_ rc: Int32, _ what: String) {
            guard rc != MOSQ_ERR_SUCCESS.rawValue else { return }
            logger.error("mqtt: \(what): \(Self.describe(rc))")
            ok = false
        }
        if !speaks311 { check(bdm_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5), "MQTT 5") }
        if let u = s.username { check(bdm_username_pw_set(m, u, s.password), "username and password") }
        if let t = s.tls {
            if let ca = t.caFile {
                check(bdm_tls_set(m, ca, nil, t.certFile, t.keyFile, nil), "TLS files")
            } else {
                check(bdm_int_option(m, MOSQ_OPT_TLS_USE_OS_CERTS, 1), "TLS with the system's CA certificates")
                if let cert = t.certFile { check(bdm_tls_set(m, nil, "/etc/ssl/certs", cert, t.keyFile, nil), "TLS client certificate") }
            }
            if !t.verify {
                check(bdm_tls_opts_set(m, 0, nil, nil), "TLS without verification")
                check(bdm_tls_insecure_set(m, true), "TLS without host name check")
            }
        }
        let w = s.will
        check(
            w.payload.withCString { bdm_will_set(m, w.topic, Int32(strlen($0)), $0, Int32(w.qos), w.retain) }, "the last will")
        bdm_connect_callback_set(m) { _, obj, rc in
            guard let obj else { return }
            Unmanaged<InstanceContext>.fromOpaque(obj).takeUnretainedValue().client?.connected(rc)
        }
        bdm_message_callback_set(m) { _, obj, msg in
            guard let obj, let msg, let topic = msg.pointee.topic,
                let c = Unmanaged<InstanceContext>.fromOpaque(obj).takeUnretainedValue().client
            else { return }
            c.onMessage(
                String(cString: topic), UnsafeRawBufferPointer(start: msg.pointee.payload, count: Int(max(0, msg.pointee.payloadlen))),
                msg.pointee.retain)
        }
        bdm_log_callback_set(m) { _, obj, level, text in
            guard let obj, let text, level & Int32(MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0 else { return }
            let line = String(cString: text)
            Unmanaged<InstanceContext>.fromOpaque(obj).takeUnretainedValue().libraryLog.withLock { $0 = line }
        }
        let i = UncheckedPointer(pointer: m, context: context)
        guard ok else {
            i.destroy()
            return nil
        }
        return i
    }

    /// On the loop: the connecting thread handed its instance back.
    private func openFinished() {
        guard let (p, rc, e, stale) = attempt.finish() else { return }
        guard state == .opening, !stale else {
            p.destroy()
            if state == .opening { open() }  // new settings while it connected
            return
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            p.destroy()
            fail("cannot connect to \(settings.host):\(settings.port): \(Self.describe(rc, errno: e, library: libraryLog.withLock { $0 }))")
            return
        }
        instance = p
        let fd = bdm_socket(p.pointer)
        // With TLS, the handshake can start only once the TCP connection
        // is made (a connect in progress is not writable yet), and
        // libmosquitto does not ask to write meanwhile: writability is
        // watched until the first event says the socket is connected.
        wantsWrite = bdm_want_write(p.pointer) || settings.tls != nil
        let s = PortSource(fd: fd, interest: wantsWrite ? [.readable, .writable] : .readable) { [unowned self] _, ev in self.ready(ev) }
        do {
            try loop.add(s, mode: .common)
        } catch {
            p.destroy()
            instance = nil
            fail("cannot watch the connection's socket: \(error)")
            return
        }
        source = s
        state = .handshaking
        retry?.arm(after: Self.handshakeTimeout)
    }

    /// CONNACK (from inside `mosquitto_loop_read`).
    private func connected(_ rc: Int32) {
        guard rc == 0 else {
            if !speaks311 && (rc == 1 || rc == Int32(MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION.rawValue)) {
                // A 3.1.1-only broker answers a version-5 CONNECT with
                // "unacceptable protocol version": the next attempt speaks 3.1.1.
                speaks311 = true
                refused = "it does not speak MQTT 5; boardd connects with MQTT 3.1.1 (a retained command published while boardd is connected then reaches it as a live one)"
                return
            }
            refused = Self.connack(rc, mqtt5: !speaks311)
            return
        }
        state = .up
        failures = 0
        lastError = nil
        connections &+= 1
        retry?.disarm()
        lastRead = loop.now
        lastWrite = lastRead
        misc?.arm(at: keepaliveDue)
        logger.notice(
            "mqtt: connected to \(settings.host):\(settings.port) as \(settings.clientID)\(settings.tls != nil ? " (TLS)" : "")\(speaks311 ? " with MQTT 3.1.1" : "")")
        onUp()
        updateInterest()
    }

    // MARK: The socket

    private func ready(_ ev: PortSource.Events) {
        guard let m = mosq else { return }
        // The TLS handshake goes on in `mosquitto_loop_read`, whichever way
        // the socket is ready (its `loop_write` does not take part in it).
        let handshake = state == .handshaking && settings.tls != nil
        if handshake || ev.contains(.readable) || ev.contains(.error) || ev.contains(.hangup) {
            let rc = bdm_loop_read(m, 1)
            // (A callback may have ended this connection: then it is not ours to judge.)
            guard mosq == m else { return }
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { return lost(rc) }
            lastRead = loop.now
            // A reset that came with data: the data was read, the socket is gone.
            if ev.contains(.hangup) || ev.contains(.error) { return lost(MOSQ_ERR_CONN_LOST.rawValue) }
        }
        if ev.contains(.writable) {
            let rc = bdm_loop_write(m, 1)
            guard mosq == m else { return }
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { return lost(rc) }
            lastWrite = loop.now
        }
        updateInterest()
    }

    /// When libmosquitto's keepalive is due: a keepalive after the older
    /// of the last read and the last write, and a second more (it counts
    /// whole seconds, so then it is due by its clock too, and still is for
    /// a tick up to `keepaliveEarly` before). Traffic moves it later
    /// without touching the timer: a tick that comes earlier than that
    /// arms it again for the new time.
    var keepaliveDue: MonotonicInstant {
        min(lastRead, lastWrite) + .seconds(Int64(max(settings.keepalive, 1)) + 1)
    }

    /// How early a tick may call `mosquitto_loop_misc` (less than the
    /// second `keepaliveDue` adds).
    static let keepaliveEarly: Duration = .milliseconds(500)

    /// The keepalive: `mosquitto_loop_misc` sends a ping (and ends a
    /// connection whose last ping had no answer); both times are then
    /// now, as they are in the library.
    private func miscTick() {
        guard state == .up, let m = mosq else { return }
        let due = keepaliveDue
        if loop.now + Self.keepaliveEarly < due {
            misc?.arm(at: due)
            return
        }
        keepaliveTicks &+= 1
        let rc = bdm_loop_misc(m)
        guard mosq == m else { return }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { return lost(rc) }
        lastRead = loop.now
        lastWrite = lastRead
        misc?.arm(at: keepaliveDue)
        updateInterest()
    }

    /// Writable interest exactly while libmosquitto has something to write.
    private func updateInterest() {
        guard let m = mosq, let s = source else { return }
        let w = bdm_want_write(m)
        guard w != wantsWrite else { return }
        wantsWrite = w
        s.interest = w ? [.readable, .writable] : .readable
        if !w && state == .up { onDrained() }
    }

    private func retryTick() {
        switch state {
        case .waiting: open()
        case .handshaking: lost(nil, why: "no CONNACK from the broker within \(DurationText.format(Self.handshakeTimeout))")
        default: break
        }
    }

    // MARK: Losing it

    private func lost(_ rc: Int32?, why: String? = nil) {
        let wasUp = state == .up
        let reason =
            why ?? refused.map { "the broker refused the connection: \($0)" }
            ?? "connection to \(settings.host):\(settings.port) lost: \(Self.describe(rc ?? MOSQ_ERR_CONN_LOST.rawValue, errno: errno, library: libraryLog.withLock { $0 }))"
        close()
        if wasUp {
            losses &+= 1
            onDown(reason)
        }
        fail(reason)
    }

    /// Ends the connection; with `goodbye`, a connected one says it first
    /// (DISCONNECT, what is queued written) for at most that long.
    private func close(goodbye flush: Duration? = nil) {
        source?.invalidate()
        source = nil
        wantsWrite = false
        if let i = instance {
            if let flush, state == .up { goodbye(i.pointer, flush: flush) }
            i.destroy()
            instance = nil
        }
        if state == .up || state == .handshaking { state = .waiting }
        retry?.disarm()
        misc?.disarm()
    }

    private func fail(_ why: String) {
        failures += 1
        scheduleRetry(after: why)
    }

    private func scheduleRetry(after why: String) {
        state = .waiting
        lastError = why
        let d = Self.backoff(failures: failures, min: settings.reconnectMin, max: settings.reconnectMax)
        logger.warning("mqtt: \(why); trying again in \(DurationText.format(d))")
        retry?.arm(after: d)
    }

    /// The wait before attempt `failures + 1`: `min` doubled per failure
    /// up to `max`, then a random part of it cut ("equal jitter": between
    /// half and all of it), so a fleet that lost its broker at once does
    /// not come back at once.
    static func backoff(failures: Int, min: Duration, max: Duration, random: Double = Double.random(in: 0...1)) -> Duration {
        let base = Swift.min(max, min * (1 << Swift.min(Swift.max(failures - 1, 0), 20)))
        let ms = Double(base.nanosecondsClamped / 1_000_000)
        return .milliseconds(Int64((ms / 2 + ms / 2 * random).rounded()))
    }

    // MARK: Words

    /// What to do when the unit's sandbox refuses the broker's socket: the
    /// network drop-in (docs/deploy.md, "The network drop-in"), which the
    /// package ships in /usr/share/boardd and install.sh writes itself.
    static let networkDropInHint =
        "boardd.service allows no network without its drop-in: sudo install -D -m 0644 /usr/share/boardd/network.conf /etc/systemd/system/boardd.service.d/network.conf && sudo systemctl daemon-reload && sudo systemctl restart boardd"

    static func describe(_ rc: Int32, errno e: Int32 = 0, library: String? = nil) -> String {
        var text: String
        if rc == MOSQ_ERR_ERRNO.rawValue {
            text = String(cString: strerror(e))
            // What boardd.service's sandbox answers (RestrictAddressFamilies=AF_UNIX).
            if e == EAFNOSUPPORT { text += " (" + networkDropInHint + ")" }
        } else if rc == MOSQ_ERR_EAI.rawValue {
            text = "cannot resolve the broker's name"
        } else if rc == MOSQ_ERR_KEEPALIVE.rawValue {
            // (libmosquitto 2.0's own text for it is "Unknown error.")
            text = "the broker did not answer the keepalive ping"
        } else {
            text = String(cString: bdm_strerror(rc))
        }
        if let library, !library.isEmpty { text += " (\(library))" }
        return text
    }

    /// A refused CONNACK's code in words: MQTT 3.1.1's return codes, or
    /// (`mqtt5`) MQTT 5's reason codes.
    static func connack(_ rc: Int32, mqtt5: Bool) -> String {
        let text = String(cString: mqtt5 ? bdm_reason_string(rc) : bdm_connack_string(rc))
        switch (mqtt5, rc) {
        case (false, 4), (false, 5), (true, 134), (true, 135): return "\(text) (check mqtt.username and the password)"
        case (false, 2), (true, 133): return "\(text) (check mqtt.client_id)"
        default: return text
        }
    }
}

/// libmosquitto, loaded the first time a config's `mqtt:` block (or
/// `--version`) asks for it, not linked: a boardd without MQTT never maps
/// it, nor the OpenSSL it brings (CMosquitto).
public enum MQTTLibrary {
    /// Loads it (once); nil, or why it cannot be loaded.
    public static func load() -> String? {
        var error = [CChar](repeating: 0, count: 512)
        guard bdm_load(&error, error.count) != 0 else { return nil }
        let why = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "cannot load libmosquitto (\(why)); the mqtt: block needs it: apt install libmosquitto1"
    }

    /// The libmosquitto boardd runs with (`boardd --version`), or why there is none.
    public static var version: String {
        if load() != nil { return "not installed (apt install libmosquitto1; only the mqtt: block needs it)" }
        var major: Int32 = 0, minor: Int32 = 0, revision: Int32 = 0
        _ = bdm_lib_version(&major, &minor, &revision)
        return "\(major).\(minor).\(revision)"
    }
}

/// An instance and what its callbacks reach (its user data, retained
/// while the instance lives: the connecting thread may log through it
/// after the client is gone), handed between threads.
struct UncheckedPointer: @unchecked Sendable {
    let pointer: OpaquePointer
    let context: Unmanaged<InstanceContext>

    /// Destroys the instance (its socket with it), then lets its context go.
    func destroy() {
        bdm_destroy(pointer)
        context.release()
    }
}

/// An instance's user data: the client (weak: the callbacks that reach it
/// run on the loop, inside its calls) and the library's last error line
/// (written from whichever thread calls into the instance).
final class InstanceContext: @unchecked Sendable {
    weak var client: MQTTClient?
    let libraryLog: LockedValue<String?>
    init(_ client: MQTTClient, _ log: LockedValue<String?>) {
        self.client = client
        libraryLog = log
    }
}

private final class WeakClient: @unchecked Sendable {
    weak var client: MQTTClient?
}

/// One connecting thread at a time: started on the loop, its result taken
/// back on the loop (under a lock the thread's hand-over also takes).
final class Attempt: @unchecked Sendable {
    private let lock = Lock()
    // With `lock` held:
    private var result: (UncheckedPointer, Int32, Int32)?
    private var pointer: UncheckedPointer?
    /// Main loop only.
    private var thread: pthread_t?
    /// The settings changed while it connected: its instance is dropped.
    var stale = false

    func start(
        _ p: UncheckedPointer, _ body: @escaping @Sendable (UncheckedPointer) -> (Int32, Int32), done: @escaping @Sendable () -> Void
    ) {
        stale = false
        lock.withLock {
            result = nil
            pointer = p
        }
        let run: @Sendable () -> Void = { [self] in
            let (rc, e) = body(p)
            lock.withLock { result = (p, rc, e) }
            done()
        }
        switch DaemonThread.start(run) {
        case let .success(t): thread = t
        case let .failure(e):
            lock.withLock { result = (p, MOSQ_ERR_ERRNO.rawValue, e.errno) }
            done()
        }
    }

    /// The finished attempt's instance and outcome (nil: none finished).
    func finish() -> (UncheckedPointer, Int32, Int32, Bool)? {
        guard let r = lock.withLock({ () -> (UncheckedPointer, Int32, Int32)? in
            defer { result = nil }
            return result
        }) else { return nil }
        if let t = thread {
            pthread_join(t, nil)
            thread = nil
        }
        return (r.0, r.1, r.2, stale)
    }

    /// At a stop: waits for a thread still connecting; false if it did not
    /// end in time (it is detached and its instance left to it).
    func joinOrAbandon(timeout: Duration) -> Bool {
        guard let t = thread else { return true }
        thread = nil
        if bd_thread_timedjoin(t, Int32(timeout.nanosecondsClamped / 1_000_000)) == 0 {
            if let r = lock.withLock({ () -> (UncheckedPointer, Int32, Int32)? in
                defer { result = nil }
                return result
            }) {
                r.0.destroy()
            }
            return true
        }
        pthread_detach(t)
        return false
    }
}
