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
            MQTT: libmosquitto \(MQTTLibrary.version)
            """
    }
}
