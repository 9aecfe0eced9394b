internal import CSodium

/// Base64 through libsodium, whose encoder and decoder run in constant time
/// (they also handle key material: key files).
public enum Base64 {
    /// The alphabet and padding.
    public enum Variant: Sendable {
        /// RFC 4648 section 4, with `=` padding.
        case standard
        /// RFC 4648 section 5 (`-` and `_`), without padding.
        case urlSafeUnpadded

        var sodium: Int32 {
            switch self {
            case .standard: sodium_base64_VARIANT_ORIGINAL
            case .urlSafeUnpadded: sodium_base64_VARIANT_URLSAFE_NO_PADDING
            }
        }
    }

    /// Encodes `data` as ASCII bytes.
    public static func encode(_ data: [UInt8], _ variant: Variant) -> [UInt8] {
        let length = sodium_base64_encoded_len(data.count, variant.sodium)  // includes the NUL
        var out = [CChar](repeating: 0, count: length)
        _ = data.withUnsafeBufferPointer { d in
            sodium_bin2base64(&out, length, d.baseAddress, data.count, variant.sodium)
        }
        return out.dropLast().map { UInt8(bitPattern: $0) }
    }

    /// Encodes `data` as a string.
    public static func encodeString(_ data: [UInt8], _ variant: Variant) -> String {
        String(decoding: encode(data, variant), as: UTF8.self)
    }

    /// Decodes strictly: wrong characters, wrong padding, trailing data or
    /// non-zero unused bits give nil.
    public static func decode(_ text: [UInt8], _ variant: Variant) -> [UInt8]? {
        guard (try? Sodium.ready()) != nil else { return nil }
        var out = [UInt8](repeating: 0, count: text.count * 3 / 4 + 3)
        var length = 0
        var end: UnsafePointer<CChar>? = nil
        let rc = text.withUnsafeBufferPointer { t in
            t.withMemoryRebound(to: CChar.self) { chars in
                sodium_base642bin(&out, out.count, chars.baseAddress, text.count, nil, &length, &end, variant.sodium)
            }
        }
        guard rc == 0, let end else { return nil }
        // Everything must have been consumed.
        let consumed = text.withUnsafeBufferPointer { t in
            t.withMemoryRebound(to: CChar.self) { UnsafePointer(end) - $0.baseAddress! }
        }
        guard consumed == text.count else { return nil }
        return Array(out.prefix(length))
    }
}
