/// Text from outside (providers, stores, imports, other users, forwarded
/// peers) made safe for a person to read: C0 and C1 controls, DEL, the
/// bidirectional overrides and isolates and the line separators are shown
/// as `\u{...}`, so they can neither drive a terminal, forge a line, nor
/// reorder what a person reads. The command line's messages and the
/// agent's prompts and log lines all go through this one function.
package enum DisplayText {
    /// `text` with every scalar a terminal would act on written out.
    package static func escaped(_ text: String) -> String {
        // Printable ASCII, most of what is shown, needs nothing: returned
        // as it is, without building a copy scalar by scalar.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) { return text }
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if needsEscape(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1f, 0x7f...0x9f: return true  // C0, DEL, C1
        case 0x202a...0x202e, 0x2066...0x2069: return true  // embeddings, overrides, isolates
        case 0x200e, 0x200f, 0x061c: return true  // directional marks
        case 0x2028, 0x2029: return true  // line and paragraph separators
        default: return false
        }
    }
}
