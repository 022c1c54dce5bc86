import BoardControl
import BoardloopGPIO

/// What `boardd --version` prints: the release (shared with boardctl), and
/// the libgpiod it was built against and runs with (the GPIO layer's two
/// branches differ).
enum BoarddVersion {
    static let release = Release.version

    static var text: String {
        let gpio = LibgpiodBackend.shared
        return "boardd \(release) (libgpiod \(gpio.libraryVersion), API \(gpio.apiVersion).x)"
    }
}
