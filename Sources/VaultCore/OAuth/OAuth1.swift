public import VaultCrypto
import VaultHTTP

/// How OAuth 1.0a requests are signed (RFC 5849 section 3.4).
public enum OAuth1SignatureMethod: String, Sendable, Codable {
    case hmacSHA1 = "HMAC-SHA1"
    case rsaSHA1 = "RSA-SHA1"
    /// Only over TLS: the secrets themselves are the signature.
    case plaintext = "PLAINTEXT"
}

/// What signs a request: client credentials and, once authorized, token credentials.
public struct OAuth1Credentials {
    /// The consumer key.
    public var consumerKey: String
    /// The consumer secret; for RSA-SHA1, the PEM private key.
    public var consumerSecret: SecureBytes
    /// The token, once authorized.
    public var token: String?
    /// The token secret, once authorized.
    public var tokenSecret: String?
    /// How requests are signed.
    public var method: OAuth1SignatureMethod

    /// Creates credentials.
    public init(
        consumerKey: String, consumerSecret: SecureBytes, token: String? = nil, tokenSecret: String? = nil,
        method: OAuth1SignatureMethod
    ) {
        self.consumerKey = consumerKey
        self.consumerSecret = consumerSecret
        self.token = token
        self.tokenSecret = tokenSecret
        self.method = method
    }
}

/// RFC 5849: signature base strings, signatures and where they go.
public enum OAuth1 {
    /// Section 3.6: everything but unreserved characters, in upper-case hex.
    public static func encode(_ s: String) -> String { FormEncoding.percentEncode(s) }

    /// Section 3.4.1.2: scheme and host in lower case, no default port,
    /// no query or fragment, "/" for an empty path.
    public static func baseURI(_ url: String) throws(VaultError) -> String {
        guard let sep = url.firstRange(of: "://") else { throw VaultError(.invalidInput, "not an absolute url") }
        let scheme = url[..<sep.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { throw VaultError(.invalidInput, "not an http(s) url") }
        var rest = url[sep.upperBound...]
        if let cut = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<cut] }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<slash]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var host = authority.lowercased()
        if let colon = host.lastIndex(of: ":"), !host.hasSuffix("]") {
            let port = host[host.index(after: colon)...]
            if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
                host = String(host[..<colon])
            }
        }
        guard !host.isEmpty else { throw VaultError(.invalidInput, "the url has no host") }
        let path = rest[slash...]
        return "\(scheme)://\(host)\(path.isEmpty ? "/" : String(path))"
    }

    /// Section 3.4.1: the signature base string over the query, the form
    /// body and the protocol parameters (without oauth_signature and realm).
    public static func signatureBaseString(
        method: String, url: String, bodyForm: String?, oauthParameters: [(String, String)]
    ) throws(VaultError) -> String {
        var params: [(String, String)] = []
        if let q = url.firstIndex(of: "?") {
            let query = url[url.index(after: q)...].prefix { $0 != "#" }
            params += FormEncoding.decode(query)
        }
        if let bodyForm { params += FormEncoding.decode(Substring(bodyForm)) }
        params += oauthParameters.filter { $0.0 != "oauth_signature" && $0.0 != "realm" }
        let normalized = params.map { (encode($0.0), encode($0.1)) }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            .map { "\($0.0)=\($0.1)" }.joined(separator: "&")
        return [method.uppercased(), encode(try baseURI(url)), encode(normalized)].joined(separator: "&")
    }

    /// Signs a request; returns all protocol parameters, oauth_signature included.
    /// `extra` carries oauth_callback or oauth_verifier during authorization.
    public static func sign(
        method: String, url: String, bodyForm: String? = nil, credentials c: OAuth1Credentials,
        nonce: String, timestamp: Int64, extra: [(String, String)] = [], includeVersion: Bool = true
    ) throws(VaultError) -> [(String, String)] {
        // PLAINTEXT sends the secrets themselves: only over TLS (or to loopback).
        if c.method == .plaintext, url.lowercased().hasPrefix("http://"),
            !(URLPolicy.schemeAndHost(url).map { URLPolicy.isLoopback($0.1) } ?? false)
        {
            throw VaultError(.invalidInput, "PLAINTEXT signatures are only sent over https")
        }
        var oauth: [(String, String)] = [
            ("oauth_consumer_key", c.consumerKey), ("oauth_signature_method", c.method.rawValue),
            ("oauth_timestamp", String(timestamp)), ("oauth_nonce", nonce),
        ]
        if let token = c.token { oauth.append(("oauth_token", token)) }
        if includeVersion { oauth.append(("oauth_version", "1.0")) }
        oauth += extra
        let base = try signatureBaseString(method: method, url: url, bodyForm: bodyForm, oauthParameters: oauth)
        let signature: String
        do {
            switch c.method {
            case .hmacSHA1, .plaintext:
                // The key: encoded consumer secret & encoded token secret.
                let consumer = c.consumerSecret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
                var keyText = Array((encode(consumer) + "&" + encode(c.tokenSecret ?? "")).utf8)
                defer { secureZero(&keyText) }
                if c.method == .plaintext {
                    signature = String(decoding: keyText, as: UTF8.self)
                } else {
                    let key = try SecureBytes(copying: keyText)
                    signature = Base64.encodeString(
                        try LegacySignature.hmacSHA1(key: key, data: Array(base.utf8)), .standard)
                }
            case .rsaSHA1:
                signature = Base64.encodeString(
                    try LegacySignature.rsaSHA1(privateKeyPEM: c.consumerSecret, data: Array(base.utf8)), .standard)
            }
        } catch {
            throw VaultError(.invalidInput, "cannot sign the request: \(error.reason)")
        }
        return oauth + [("oauth_signature", signature)]
    }

    /// Section 3.5.1: `OAuth realm="...", name="value", ...`.
    public static func authorizationHeader(_ parameters: [(String, String)], realm: String? = nil) -> String {
        var parts = realm.map { ["realm=\"\(encode($0))\""] } ?? []
        parts += parameters.map { "\(encode($0.0))=\"\(encode($0.1))\"" }
        return "OAuth " + parts.joined(separator: ", ")
    }

    /// Section 3.5.3: the URL with the protocol parameters added to its query.
    public static func signedURL(_ url: String, _ parameters: [(String, String)]) -> String {
        let fragment = url.firstIndex(of: "#").map { String(url[$0...]) } ?? ""
        let bare = url.firstIndex(of: "#").map { String(url[..<$0]) } ?? url
        return FormEncoding.appendQuery(bare, parameters) + fragment
    }

    /// A random nonce: 16 bytes in hexadecimal, since some servers (oauthlib's
    /// defaults among them) accept only letters and digits.
    public static func nonce() throws(VaultError) -> String {
        try Secure.randomBytes(16).hex
    }
}

extension Grant {
    /// The credentials that sign requests with this OAuth 1.0a grant.
    public func oauth1Credentials() throws(VaultError) -> OAuth1Credentials {
        guard kind == .oauth1, let token = accessToken, let config = providerConfiguration,
            let key = config.clientID, let secret = config.clientSecret
        else {
            throw VaultError(
                .invalidInput, "this is not an OAuth 1.0a grant with a consumer key and secret",
                remedy: .oauth1GrantFields)
        }
        guard let method = OAuth1SignatureMethod(rawValue: config.signatureMethod ?? "HMAC-SHA1") else {
            throw VaultError(.invalidInput, "unknown signature method '\(config.signatureMethod ?? "")'")
        }
        let consumerSecret = try Secure.copy(Array(secret.utf8))
        return OAuth1Credentials(
            consumerKey: key, consumerSecret: consumerSecret, token: token, tokenSecret: tokenSecret, method: method)
    }
}
