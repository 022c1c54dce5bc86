import BoardControl
import BoardDaemon
import BoardloopGPIO

/// What `boardd --version` prints: the release (shared with boardctl), the
/// commit it was built from, and the libgpiod it was built against and runs
/// with (the GPIO layer's two branches differ), and the libmosquitto it runs with.
enum BoarddVersion {
    static let release = Release.version

    static var text: String {
        let gpio = LibgpiodBackend.shared
        return """
            boardd \(release) (libgpiod \(gpio.libraryVersion), API \(gpio.apiVersion).x)
            commit \(Release.commit)
            built against libgpiod \(Release.libgpiod) (the \(gpio.apiVersion).x branch), running with libgpiod \(gpio.libraryVersion)
            \(mqtt)
            """
    }

    /// The libmosquitto boardd would load for an mqtt: block. Only when
    /// `--version` is asked for: swift-argument-parser reads `text` at every
    /// start, and loading the library maps OpenSSL (1.8 MiB resident) into a
    /// boardd that may never use MQTT.
    static var mqtt: String {
        CommandLine.arguments.dropFirst().contains("--version") ? "MQTT: libmosquitto \(MQTTLibrary.version)" : "MQTT: libmosquitto"
    }
}
