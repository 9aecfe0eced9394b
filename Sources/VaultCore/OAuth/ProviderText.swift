/// The character rules of RFC 6749 Appendix A for what a provider sends,
/// and the cleaning of free text before a person sees it. Tokens end up in
/// HTTP headers, git's credential protocol, SASL and shell variables: a
/// token that breaks those grammars is refused, never repaired.
public enum ProviderText {
    /// `access_token`, `refresh_token` (and ID tokens): 1*VSCHAR, printable
    /// ASCII %x20-7E (RFC 6749 Appendix A.12, A.17). Not empty.
    public static func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7e }
    }

    /// `token_type`: 1*name-char, letters, digits, `-`, `.`, `_` (A.13).
    public static func isTokenType(_ s: String) -> Bool {
        !s.isEmpty
            && s.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a)
                    || $0 == 0x2d || $0 == 0x2e || $0 == 0x5f
            }
    }

    /// A scope token: 1*( %x21 / %x23-5B / %x5D-7E ), printable ASCII
    /// without space, `"` and `\` (A.4).
    public static func isScope(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { $0 > 0x20 && $0 <= 0x7e && $0 != 0x22 && $0 != 0x5c }
    }

    /// `error`: 1*( %x20-21 / %x23-5B / %x5D-7E ), printable ASCII without
    /// `"` and `\` (A.7).
    public static func isErrorCode(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7e && $0 != 0x22 && $0 != 0x5c }
    }

    /// Free text from a provider (an `error_description`, a device code
    /// message) made safe for a terminal and one line: control characters
    /// (C0, DEL, C1), line and paragraph separators and the bidirectional
    /// overrides, embeddings, isolates and marks are removed; at most
    /// `limit` characters are kept.
    public static func sanitized(_ s: String, limit: Int = 300) -> String {
        var out = String.UnicodeScalarView()
        var count = 0
        for u in s.unicodeScalars where !isUnsafe(u) {
            guard count < limit else { break }
            out.append(u)
            count += 1
        }
        return String(out)
    }

    /// True for scalars a terminal or a bidirectional renderer would act on.
    static func isUnsafe(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x00...0x1f, 0x7f...0x9f: true  // C0, DEL, C1
        case 0x2028, 0x2029: true  // line and paragraph separators
        case 0x061c, 0x200e, 0x200f, 0x202a...0x202e, 0x2066...0x2069: true  // bidirectional controls
        default: false
        }
    }
}
