import BoardControl

/// Encodes an `Encodable` value as a `JSON` value and prints it pretty, with
/// every object's keys sorted: what `boardd --check --json` prints, without
/// Foundation's `JSONEncoder`.
///
/// Optional properties that are nil are left out (the synthesised
/// `encodeIfPresent`), as `JSONEncoder` leaves them out. Keys are sorted by
/// their Unicode scalars, so the output is the same on every machine.
enum JSONValueEncoder {
    static func encode<T: Encodable>(_ value: T) throws -> JSON {
        let slot = Slot()
        try value.encode(to: ValueEncoder(slot: slot, codingPath: []))
        return slot.resolved
    }

    /// Two-space indented JSON, `"key" : value` as `JSONEncoder` prints it.
    static func pretty(_ value: JSON) -> String {
        var out = ""
        write(value, indent: 0, to: &out)
        return out
    }

    static func pretty<T: Encodable>(_ value: T) -> String {
        (try? encode(value)).map(pretty) ?? "{}"
    }

    private static func write(_ value: JSON, indent: Int, to out: inout String) {
        let inner = String(repeating: "  ", count: indent + 1)
        switch value {
        case let .array(items) where !items.isEmpty:
            out += "[\n"
            for (i, item) in items.enumerated() {
                out += inner
                write(item, indent: indent + 1, to: &out)
                out += i == items.count - 1 ? "\n" : ",\n"
            }
            out += String(repeating: "  ", count: indent) + "]"
        case let .object(members) where !members.isEmpty:
            out += "{\n"
            for (i, (key, item)) in members.enumerated() {
                out += inner + JSON.string(key).serialized + " : "
                write(item, indent: indent + 1, to: &out)
                out += i == members.count - 1 ? "\n" : ",\n"
            }
            out += String(repeating: "  ", count: indent) + "}"
        default:
            out += value.serialized
        }
    }

    /// Where one value is encoded: a leaf, or the members or items that
    /// containers add to it (containers share it, as encoders expect).
    final class Slot {
        var value: JSON = .null
        var members: [(String, Slot)]?
        var items: [Slot]?

        var resolved: JSON {
            if let members {
                // The last write of a key wins, as in a dictionary.
                var byKey: [String: Slot] = [:]
                for (k, s) in members { byKey[k] = s }
                return .object(byKey.keys.sorted { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) }.map { ($0, byKey[$0]!.resolved) })
            }
            if let items { return .array(items.map(\.resolved)) }
            return value
        }

        func member(_ key: String) -> Slot {
            let s = Slot()
            if members == nil { members = [] }
            members!.append((key, s))
            return s
        }

        func item() -> Slot {
            let s = Slot()
            if items == nil { items = [] }
            items!.append(s)
            return s
        }
    }

    struct ValueEncoder: Encoder {
        let slot: Slot
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            if slot.members == nil { slot.members = [] }
            return KeyedEncodingContainer(Keyed<Key>(slot: slot, codingPath: codingPath))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            if slot.items == nil { slot.items = [] }
            return Unkeyed(slot: slot, codingPath: codingPath)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer { Single(slot: slot, codingPath: codingPath) }
    }

    static func leaf<T: Encodable>(_ value: T, in slot: Slot, _ codingPath: [any CodingKey]) throws {
        switch value {
        case let v as String: slot.value = .string(v)
        case let v as Bool: slot.value = .bool(v)
        case let v as Int: slot.value = .int(Int64(v))
        case let v as Int64: slot.value = .int(v)
        case let v as Int32: slot.value = .int(Int64(v))
        case let v as UInt32: slot.value = .int(Int64(v))
        case let v as UInt64: slot.value = Int64(exactly: v).map(JSON.int) ?? .double(Double(v))
        case let v as UInt: slot.value = Int64(exactly: v).map(JSON.int) ?? .double(Double(v))
        case let v as Double: slot.value = .double(v)
        default: try value.encode(to: ValueEncoder(slot: slot, codingPath: codingPath))
        }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let slot: Slot
        let codingPath: [any CodingKey]

        mutating func encodeNil(forKey key: Key) throws { slot.member(key.stringValue).value = .null }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            try JSONValueEncoder.leaf(value, in: slot.member(key.stringValue), codingPath + [key])
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
            -> KeyedEncodingContainer<NestedKey>
        {
            ValueEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key]).container(keyedBy: keyType)
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            ValueEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key]).unkeyedContainer()
        }
        mutating func superEncoder() -> any Encoder { ValueEncoder(slot: slot.member("super"), codingPath: codingPath) }
        mutating func superEncoder(forKey key: Key) -> any Encoder {
            ValueEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key])
        }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let slot: Slot
        let codingPath: [any CodingKey]
        var count: Int { slot.items?.count ?? 0 }

        mutating func encodeNil() throws { slot.item().value = .null }
        mutating func encode<T: Encodable>(_ value: T) throws { try JSONValueEncoder.leaf(value, in: slot.item(), codingPath) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            ValueEncoder(slot: slot.item(), codingPath: codingPath).container(keyedBy: keyType)
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            ValueEncoder(slot: slot.item(), codingPath: codingPath).unkeyedContainer()
        }
        mutating func superEncoder() -> any Encoder { ValueEncoder(slot: slot.item(), codingPath: codingPath) }
    }

    struct Single: SingleValueEncodingContainer {
        let slot: Slot
        let codingPath: [any CodingKey]

        mutating func encodeNil() throws { slot.value = .null }
        mutating func encode<T: Encodable>(_ value: T) throws { try JSONValueEncoder.leaf(value, in: slot, codingPath) }
    }
}
