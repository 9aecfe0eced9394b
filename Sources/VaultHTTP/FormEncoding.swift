/// `application/x-www-form-urlencoded` and URL query strings, encoded the
/// strict way: everything but RFC 3986's unreserved characters is
/// percent-encoded, spaces included (as %20).
public enum FormEncoding {
    /// Encodes pairs in order: `a=1&b=2`.
    public static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }

    /// Percent-encodes all but `A-Z a-z 0-9 - . _ ~`.
    public static func percentEncode(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF")
        for b in text.utf8 {
            switch b {
            case 0x41...0x5a, 0x61...0x7a, 0x30...0x39, 0x2d, 0x2e, 0x5f, 0x7e:
                out.append(Character(Unicode.Scalar(b)))
            default:
                out.append("%")
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 15)])
            }
        }
        return out
    }

    /// Decodes `a=1&b=2` (with `+` as space); malformed escapes are kept as
    /// they are. Later duplicates do not replace earlier ones.
    public static func decode(_ query: Substring) -> [(String, String)] {
        query.split(separator: "&", omittingEmptySubsequences: true).map { part in
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (percentDecode(pieces[0]), pieces.count > 1 ? percentDecode(pieces[1]) : "")
        }
    }

    /// Decodes percent escapes and `+` as space; malformed escapes stay as written.
    public static func percentDecode(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let b = utf8.first {
            utf8 = utf8.dropFirst()
            if b == 0x2b {
                bytes.append(0x20)
            } else if b == 0x25, utf8.count >= 2,
                let v = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(v)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends query pairs to a URL that may already have a query.
    public static func appendQuery(_ url: String, _ pairs: [(String, String)]) -> String {
        guard !pairs.isEmpty else { return url }
        return url + (url.contains("?") ? "&" : "?") + encode(pairs)
    }
}
