/// Which URLs vault talks to: `https` anywhere, plain `http` only to a
/// loopback host (local test servers, the redirect listener).
public enum URLPolicy {
    /// Throws `refusedURL` unless `url` is absolute https, or http to loopback.
    public static func check(_ url: String) throws(HTTPError) {
        // RFC 3986 has no backslash in a URL; WHATWG parsers read one in the
        // authority as a slash, so `http://evil\@127.0.0.1/` names two hosts.
        guard !url.contains("\\") else {
            throw HTTPError(.refusedURL, "a URL with a backslash is refused: parsers disagree on its host")
        }
        guard let (scheme, host) = schemeAndHost(url), !host.isEmpty else {
            throw HTTPError(.refusedURL, "not an absolute http(s) url: \(redacted(url))")
        }
        switch scheme {
        case "https": return
        case "http":
            guard isLoopback(host) else {
                throw HTTPError(.refusedURL, "plain http is refused for \(host); use https")
            }
        default:
            throw HTTPError(.refusedURL, "the url scheme '\(scheme)' is refused; use https")
        }
    }

    /// True for 127.0.0.0/8, ::1 and localhost.
    public static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased()
        if h == "localhost" || h == "[::1]" || h == "::1" { return true }
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The lower-cased scheme and host of an absolute URL, without user
    /// info or port.
    public static func schemeAndHost(_ url: String) -> (String, String)? {
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return nil }
        let scheme = url[..<colon].lowercased()
        var rest = url[url.index(colon, offsetBy: 3)...]
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        var host = String(rest)
        if host.hasPrefix("[") {
            if let close = host.firstIndex(of: "]") { host = String(host[...close]) }
        } else if let portColon = host.lastIndex(of: ":") {
            host = String(host[..<portColon])
        }
        return (scheme, host.lowercased())
    }

    /// A URL for messages: scheme, host and path only, never the query
    /// (which can carry codes or tokens) or user info.
    public static func redacted(_ url: String) -> String {
        var text = url
        if let q = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = String(text[..<q]) }
        // The authority without user info: host and port stay.
        if let at = userInfoEnd(text) { text = String(text[..<authorityStart(text)!]) + text[text.index(after: at)...] }
        return text
    }

    /// True when the URL's authority carries a user or password.
    public static func hasUserInfo(_ url: String) -> Bool { userInfoEnd(url) != nil }

    /// Where the authority starts, after `scheme://`.
    private static func authorityStart(_ url: String) -> String.Index? {
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return nil }
        return url.index(colon, offsetBy: 3)
    }

    /// The `@` that ends the authority's user info, if any.
    private static func userInfoEnd(_ url: String) -> String.Index? {
        guard let start = authorityStart(url) else { return nil }
        let end = url[start...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
        return url[start..<end].lastIndex(of: "@")
    }
}
