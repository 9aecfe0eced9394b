/// A JSON value kept as a provider sent it: the fields of a token response
/// that vault has no field of its own for (`refresh_token_expires_in`,
/// Microsoft's `ext_expires_in`, a provider's user or team object).
public enum JSONValue: Sendable, Equatable, Codable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A finite number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; its keys are unique.
    case object([String: JSONValue])

    /// Deepest nesting kept (the record reader allows 32 levels in all).
    static let maximumDepth = 8

    /// Reads any JSON value; numbers must be finite.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let d = try? c.decode(Double.self) {
            guard d.isFinite else {
                throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a finite number")
            }
            self = .number(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    /// Writes the value as JSON.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// Levels of nesting: 1 for a scalar.
    var depth: Int {
        switch self {
        case .array(let a): 1 + (a.map(\.depth).max() ?? 0)
        case .object(let o): 1 + (o.values.map(\.depth).max() ?? 0)
        default: 1
        }
    }

    /// A copy for people who did not ask to see secrets: every string
    /// under a key that names a token, secret, password, key or code reads
    /// `redacted` (`token_type` excepted).
    public func redacted(key: String? = nil) -> JSONValue {
        switch self {
        case .string where key.map(JSONValue.namesSecret) == true: .string("redacted")
        case .array(let a): .array(a.map { $0.redacted(key: key) })
        case .object(let o):
            .object(Dictionary(uniqueKeysWithValues: o.map { ($0.key, $0.value.redacted(key: $0.key)) }))
        default: self
        }
    }

    static func namesSecret(_ key: String) -> Bool {
        let k = key.lowercased()
        guard k != "token_type" else { return false }
        return ["token", "secret", "password", "key", "code", "assertion"].contains { k.contains($0) }
    }
}
