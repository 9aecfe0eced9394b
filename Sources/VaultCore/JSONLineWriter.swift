/// Writes one JSON object, fields in the order they are added, without
/// Foundation's encoder: for lines written on the token path (the audit
/// log), where a `JSONEncoder` costs a short-lived process more than the
/// rest of the line's work (its first use looks up conformances at run
/// time). Strings are escaped for JSON (RFC 8259, section 7): quotation
/// mark, reverse solidus and control characters; everything else is
/// written as its UTF-8.
package struct JSONLineWriter {
    package private(set) var bytes: [UInt8] = [0x7b]
    private var first = true

    package init() {}

    /// A string field; nothing when `value` is nil.
    package mutating func field(_ key: String, _ value: String?) {
        guard let value else { return }
        self.key(key)
        JSONLineWriter.appendString(value, to: &bytes)
    }

    /// An integer field; nothing when `value` is nil.
    package mutating func field(_ key: String, _ value: Int64?) {
        guard let value else { return }
        self.key(key)
        bytes += Array(String(value).utf8)
    }

    /// A field holding the object `body` writes; nothing when `present`
    /// is false.
    package mutating func object(_ key: String, present: Bool = true, _ body: (inout JSONLineWriter) -> Void) {
        guard present else { return }
        self.key(key)
        var inner = JSONLineWriter()
        body(&inner)
        bytes += inner.closed
    }

    /// The object, closed.
    package var closed: [UInt8] { bytes + [0x7d] }

    private mutating func key(_ key: String) {
        if !first { bytes.append(0x2c) }
        first = false
        JSONLineWriter.appendString(key, to: &bytes)
        bytes.append(0x3a)
    }

    /// `text` as a JSON string.
    package static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(0x22)
        for byte in text.utf8 {
            switch byte {
            case 0x22: out += [0x5c, 0x22]
            case 0x5c: out += [0x5c, 0x5c]
            case 0x08: out += [0x5c, 0x62]
            case 0x0c: out += [0x5c, 0x66]
            case 0x0a: out += [0x5c, 0x6e]
            case 0x0d: out += [0x5c, 0x72]
            case 0x09: out += [0x5c, 0x74]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += [0x5c, 0x75, 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0x0f)]]
            default: out.append(byte)
            }
        }
        out.append(0x22)
    }
}
