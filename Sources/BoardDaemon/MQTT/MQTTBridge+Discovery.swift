import BoardControl
import Boardloop
import BoardSupport
import Logging

/// Home Assistant's discovery message, published and removed.
extension MQTTBridge {
    // MARK: Home Assistant discovery

    func discoveryTopic(_ c: MQTTConfig) -> String { Self.discoveryTopic(c) }

    /// `<prefix>/device/<client id>/config`: Home Assistant's topic for a
    /// device-based discovery message.
    static func discoveryTopic(_ c: MQTTConfig) -> String { "\(c.discovery?.prefix ?? "homeassistant")/device/\(objectID(c.clientID))/config" }

    /// `[a-zA-Z0-9_-]`, as Home Assistant's discovery topics want.
    static func objectID(_ s: String) -> String {
        String(s.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") ? $0 : "_" })
    }

    func publishDiscovery(states republish: Bool) {
        guard client.state == .up else { return }
        guard config.discovery != nil else {
            if !discovered.isEmpty {
                publish(discoveryTopic(config), [], qos: 1, retain: true)
                discovered = [:]
            }
            return
        }
        let (payload, components) = MQTTDiscovery.payload(config: config, names: names, removed: discovered)
        publish(discoveryTopic(config), Array(payload.serialized.utf8), qos: 1, retain: true)
        discovered = components
        if republish {
            for (t, p) in states.sorted(by: { $0.key < $1.key }) { publish(t, p, qos: config.qos.states, retain: true) }
        }
    }
}
