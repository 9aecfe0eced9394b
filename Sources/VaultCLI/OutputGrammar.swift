/// What machine outputs may carry. Text from providers, imports and synced
/// records reaches a header, git, SASL or a shell only when it fits that
/// protocol's grammar; it is refused, never repaired, otherwise.
enum OutputGrammar {
    /// RFC 6750 section 2.1 `b64token`: what a bearer token may be in a
    /// header and in SASL (RFC 7628 section 3.1 uses the same rule).
    static func isBearerToken(_ token: String) -> Bool {
        let scalars = token.unicodeScalars
        guard let firstPad = scalars.firstIndex(of: "=") ?? Optional(scalars.endIndex),
            firstPad != scalars.startIndex
        else { return false }
        let body = scalars[..<firstPad].allSatisfy { s in
            (s.isASCII && (s.properties.isAlphabetic || ("0"..."9").contains(s))) || "-._~+/".unicodeScalars.contains(s)
        }
        return body && scalars[firstPad...].allSatisfy { $0 == "=" }
    }

    /// True when `text` has no C0 or C1 control and no DEL.
    static func hasNoControls(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { !((0x00...0x1f).contains($0.value) || (0x7f...0x9f).contains($0.value)) }
    }

    /// A SASL user name (XOAUTH2's `user=`, OAUTHBEARER's authzid): not
    /// empty and without controls, so neither ^A nor a line break can add a
    /// field of its own.
    static func isSASLUser(_ user: String) -> Bool { !user.isEmpty && hasNoControls(user) }

    /// RFC 7628 `host=`: a DNS name, an IPv4 address or a bracketed IPv6 address.
    static func isSASLHost(_ host: String) -> Bool {
        guard !host.isEmpty, host.utf8.count <= 255 else { return false }
        if host.hasPrefix("[") {
            guard host.hasSuffix("]"), host.count > 2 else { return false }
            return host.dropFirst().dropLast().unicodeScalars.allSatisfy {
                $0.properties.isASCIIHexDigit || $0 == ":" || $0 == "."
            }
        }
        return host.unicodeScalars.allSatisfy {
            ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || $0 == "." || $0 == "-"
        }
    }

    /// RFC 7628 `port=`: a decimal TCP port, 1 to 65535.
    static func isSASLPort(_ port: String) -> Bool {
        guard !port.isEmpty, port.utf8.count <= 5, port.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            let n = Int(port)
        else { return false }
        return (1...65535).contains(n)
    }

    /// A value in git's credential protocol: one line, no NUL.
    static func isGitValue(_ value: String) -> Bool {
        !value.unicodeScalars.contains { $0 == "\0" || $0 == "\n" || $0 == "\r" }
    }

    /// An environment variable's value: the C environment ends it at NUL.
    static func isEnvironmentValue(_ value: String) -> Bool { !value.unicodeScalars.contains("\0") }
}
