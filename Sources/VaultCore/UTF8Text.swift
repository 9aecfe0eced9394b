extension String {
    /// The string `bytes` spell in UTF-8, or nil when they are not
    /// well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates,
    /// nothing past U+10FFFF).
    ///
    /// Concrete and without a dynamic cast, unlike the standard library's
    /// `String(validating:as:)`, which is generic and instantiated at run
    /// time: on a command's hot path its first call cost more than the
    /// check (a scan of the conformance tables of the whole binary).
    package init?(utf8Validating bytes: [UInt8]) {
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xbf
            switch b {
            case 0x00...0x7f:
                i += 1
                continue
            case 0xc2...0xdf: length = 2
            case 0xe0:
                length = 3
                low = 0xa0
            case 0xed:
                length = 3
                high = 0x9f
            case 0xe1...0xef: length = 3
            case 0xf0:
                length = 4
                low = 0x90
            case 0xf4:
                length = 4
                high = 0x8f
            case 0xf1...0xf3: length = 4
            default: return nil
            }
            guard i + length <= bytes.count, (low...high).contains(bytes[i + 1]) else { return nil }
            for k in 2..<length where !(0x80...0xbf).contains(bytes[i + k]) { return nil }
            i += length
        }
        self = String.copying(utf8: bytes)
    }

    /// A string of bytes known to be well-formed UTF-8.
    private static func copying(utf8 bytes: [UInt8]) -> String {
        String(unsafeUninitializedCapacity: bytes.count) { buffer in
            _ = buffer.initialize(from: bytes)
            return bytes.count
        }
    }

    /// `value` in lower-case hexadecimal, `width` digits at least (zeros in
    /// front): without the generic `String(_:radix:)`, for the same reason.
    package init(hex value: UInt64, width: Int = 0) {
        var digits: [UInt8] = []
        var v = value
        repeat {
            let nibble = UInt8(v & 15)
            digits.append(nibble < 10 ? 0x30 + nibble : 0x61 + nibble - 10)
            v >>= 4
        } while v != 0
        while digits.count < width { digits.append(0x30) }
        digits.reverse()
        self = String.copying(utf8: digits)
    }
}
