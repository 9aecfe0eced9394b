public import FoundationEssentials
import Synchronization
import VaultCrypto
package import VaultHTTP

/// A DPoP key (RFC 9449): the key pair a grant's tokens are bound to.
///
/// vault generates it (P-256 through libcrypto, Ed25519 through libsodium),
/// keeps its private key encrypted in the vault with the grant's tokens,
/// and signs a fresh proof for every request that spends them: the token
/// endpoint's refreshes and each call to a protected resource. A stolen
/// access or refresh token is of no use without the key.
public struct DPoPKey: Equatable, Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The JWS algorithm: `ES256` or `EdDSA`.
    public let algorithm: String
    /// The RFC 7638 SHA-256 thumbprint of the public key, base64url: the
    /// `jkt` a provider binds tokens to.
    public let thumbprint: String
    /// The private key, base64url: a DER ECPrivateKey (ES256) or an
    /// Ed25519 seed (EdDSA). A secret: a listing reads it as "".
    package let privateKey: String

    /// The algorithms vault signs proofs with, in the order it prefers them.
    public static let supportedAlgorithms = ["ES256", "EdDSA"]

    package init(algorithm: String, thumbprint: String, privateKey: String) {
        self.algorithm = algorithm
        self.thumbprint = thumbprint
        self.privateKey = privateKey
    }

    /// The algorithm and thumbprint, never the private key: what string
    /// interpolation, `dump` and a failed test's message show.
    public var description: String { "DPoPKey(\(algorithm), jkt \(thumbprint))" }
    /// The same as `description`: the private key is never shown.
    public var debugDescription: String { description }
    /// The algorithm and thumbprint, for `dump` and reflection.
    public var customMirror: Mirror {
        Mirror(self, children: ["algorithm": algorithm, "thumbprint": thumbprint], displayStyle: .struct)
    }

    /// A new key for `algorithm` (`ES256` or `EdDSA`).
    public static func generate(algorithm: String = "ES256") throws(VaultError) -> DPoPKey {
        let alg = try DPoPKey.signing(algorithm)
        let secret: SecureBytes
        do { secret = try ProofSignature.generate(alg) } catch { throw VaultError(error) }
        var raw = secret.unsafeCopyToArray()
        defer { secureZero(&raw) }
        let encoded = Base64.encodeString(raw, .urlSafeUnpadded)
        let jwk = try DPoPKey.publicJWK(alg, secret)
        let members = jwk.map { JWTAssertion.json($0.name) + ":" + JWTAssertion.json($0.value) }
        let canonical = "{" + members.joined(separator: ",") + "}"
        let thumbprint = Base64.encodeString(try Secure.sha256(Array(canonical.utf8)), .urlSafeUnpadded)
        return DPoPKey(algorithm: alg.rawValue, thumbprint: thumbprint, privateKey: encoded)
    }

    /// The algorithm to sign with for a provider that lists `supported`
    /// (`dpop_signing_alg_values_supported`): ES256 when it is listed (the
    /// one every DPoP server implements), else EdDSA; ES256 when the
    /// provider lists nothing; nil when it lists neither.
    public static func algorithm(for supported: [String]?) -> String? {
        guard let supported, !supported.isEmpty else { return "ES256" }
        return supportedAlgorithms.first { supported.contains($0) }
    }

    /// A DPoP proof JWT (RFC 9449 section 4.2) for one request: `method`
    /// on `url` (sent as `htu` without its query and fragment), made at
    /// `now`, with `ath` when it presents `accessToken` and the server's
    /// `nonce` when it gave one.
    public func proof(method: String, url: String, accessToken: String? = nil, nonce: String? = nil, at now: Date)
        throws(VaultError) -> String
    {
        let alg = try DPoPKey.signing(algorithm)
        let secret = try secretKey()
        let jwk = try DPoPKey.publicJWK(alg, secret)
        let key =
            "{" + jwk.map { JWTAssertion.json($0.name) + ":" + JWTAssertion.json($0.value) }.joined(separator: ",")
            + "}"
        let header = [("typ", JWTAssertion.json("dpop+jwt")), ("alg", JWTAssertion.json(alg.rawValue)), ("jwk", key)]
        var body = [
            ("jti", JWTAssertion.json(Base64.encodeString(try Secure.randomBytes(16), .urlSafeUnpadded))),
            ("htm", JWTAssertion.json(method)), ("htu", JWTAssertion.json(DPoPKey.target(url))),
            ("iat", String(now.epochSeconds)),
        ]
        if let accessToken {
            let hash = try Secure.sha256(Array(accessToken.utf8))
            body.append(("ath", JWTAssertion.json(Base64.encodeString(hash, .urlSafeUnpadded))))
        }
        if let nonce {
            guard DPoPKey.isNonce(nonce) else {
                throw VaultError(.badResponse, "the server's DPoP nonce is not one RFC 9449 allows")
            }
            body.append(("nonce", JWTAssertion.json(nonce)))
        }
        let input = JWTAssertion.segment(header) + "." + JWTAssertion.segment(body)
        let signature: [UInt8]
        do { signature = try ProofSignature.sign(alg, privateKey: secret, data: Array(input.utf8)) } catch {
            throw VaultError(error)
        }
        return input + "." + Base64.encodeString(signature, .urlSafeUnpadded)
    }

    /// The URL as `htu` carries it: the target URI a server rebuilds (RFC
    /// 9110 section 7.1) for the request an HTTP client makes of `url`.
    /// Without query, fragment or user info; normalized as RFC 9449
    /// section 4.3 has servers compare (RFC 3986 sections 6.2.2 and
    /// 6.2.3): scheme and host in lower case, the scheme's default port
    /// left out, an empty path as `/`, dot segments removed.
    package static func target(_ url: String) -> String {
        let bare = URLPolicy.redacted(url)
        guard let separator = bare.firstRange(of: "://") else { return bare }
        let scheme = bare[..<separator.lowerBound].lowercased()
        let rest = bare[separator.upperBound...]
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<pathStart].lowercased()
        let defaultPort = ["http": ":80", "https": ":443"][scheme]
        if let defaultPort, authority.hasSuffix(defaultPort) { authority.removeLast(defaultPort.count) }
        let path = rest[pathStart...]
        return scheme + "://" + authority + removingDotSegments(path.isEmpty ? "/" : String(path))
    }

    /// `path` without `.` and `..` segments (RFC 3986 section 5.2.4);
    /// `path` starts with `/`.
    static func removingDotSegments(_ path: String) -> String {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        var kept: [Substring] = []
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            switch segment {
            case ".":
                if last { kept.append("") }
            case "..":
                if kept.count > 1 { kept.removeLast() }
                if last { kept.append("") }
            default:
                kept.append(segment)
            }
        }
        return kept.joined(separator: "/")
    }

    /// An HTTP method as a proof names it (`htm`): capitals and hyphens,
    /// as vault takes it from people and programs.
    package static func isMethod(_ s: String) -> Bool {
        (1...32).contains(s.utf8.count) && s.utf8.allSatisfy { (0x41...0x5a).contains($0) || $0 == 0x2d }
    }

    /// A URL a proof can name (`htu`): absolute http or https, printable
    /// ASCII without a backslash (which parsers read differently), at most
    /// 8 KiB.
    package static func isRequestURL(_ s: String) -> Bool {
        let start = s.prefix(8).lowercased()
        return (start.hasPrefix("https://") || start.hasPrefix("http://")) && s.utf8.count <= 8192
            && s.utf8.allSatisfy { (0x21...0x7e).contains($0) && $0 != 0x5c }
    }

    /// RFC 9449 section 8.1: a nonce is one or more NQCHAR (%x21 / %x23-5B / %x5D-7E).
    package static func isNonce(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 1024
            && s.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }

    private func secretKey() throws(VaultError) -> SecureBytes {
        guard var bytes = Base64.decode(Array(privateKey.utf8), .urlSafeUnpadded), !bytes.isEmpty else {
            throw VaultError(.damaged, "the grant's DPoP key cannot be read")
        }
        defer { secureZero(&bytes) }
        return try Secure.copy(bytes)
    }

    private static func signing(_ algorithm: String) throws(VaultError) -> ProofSignature.Algorithm {
        guard let alg = ProofSignature.Algorithm(rawValue: algorithm) else {
            throw VaultError(.invalidInput, "DPoP algorithm '\(algorithm)' is not one vault signs with (ES256, EdDSA)")
        }
        return alg
    }

    private static func publicJWK(_ alg: ProofSignature.Algorithm, _ secret: SecureBytes) throws(VaultError)
        -> [(name: String, value: String)]
    {
        do { return try ProofSignature.publicJWK(alg, privateKey: secret) } catch {
            throw VaultError(.damaged, "the grant's DPoP key cannot be read (\(error.reason))")
        }
    }
}

/// The DPoP nonces servers gave (RFC 9449 section 8), by origin, for this
/// process's lifetime: the next proof to that server carries the newest.
package final class DPoPNonces: Sendable {
    package static let shared = DPoPNonces()
    private let nonces = Mutex<[String: String]>([:])

    /// The newest nonce of `url`'s server, if it gave one.
    package func nonce(for url: String) -> String? {
        nonces.withLock { $0[DPoPNonces.origin(url)] }
    }

    /// Remembers the `DPoP-Nonce` header of `response` from `url`'s server.
    package func remember(_ response: HTTPResponse, from url: String) {
        guard let nonce = response.header("dpop-nonce"), DPoPKey.isNonce(nonce) else { return }
        nonces.withLock { $0[DPoPNonces.origin(url)] = nonce }
    }

    /// `scheme://host:port` of a URL, lower-cased.
    static func origin(_ url: String) -> String {
        let parts = DPoPKey.target(url).split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0].hasSuffix(":"), parts[1].isEmpty else { return url.lowercased() }
        return (parts[0] + "//" + parts[2]).lowercased()
    }

    /// True when `response` asks for a proof with a nonce (`use_dpop_nonce`),
    /// in an OAuth error body (token endpoint) or a WWW-Authenticate header
    /// (resource server).
    static func asksForNonce(_ response: HTTPResponse) -> Bool {
        guard response.status == 400 || response.status == 401,
            let nonce = response.header("dpop-nonce"), DPoPKey.isNonce(nonce)
        else { return false }
        if OAuthErrorBody(response.body).code == "use_dpop_nonce" { return true }
        return response.header("www-authenticate")?.contains("use_dpop_nonce") ?? false
    }
}

extension Grant {
    /// True when the grant holds a DPoP key: its refresh token may be bound
    /// to it (RFC 9449 section 5), so every token request carries a proof,
    /// and the key never leaves its vault.
    public var isDPoPBound: Bool { dpopKey != nil }

    /// True when the access token itself is bound to the grant's key
    /// (`token_type` DPoP): every use needs a proof signed by it, so it is
    /// never handed out as a bearer token alone. A provider may answer a
    /// request made with a proof with a bearer access token, binding only
    /// the refresh token; that access token is sent as a bearer token.
    public var accessTokenIsDPoPBound: Bool { dpopKey != nil && tokenType?.lowercased() == "dpop" }

    /// The header fields that authorize `method` on `url` with the grant's
    /// access token: `Authorization: Bearer`, or for a DPoP access token
    /// `Authorization: DPoP` and a `DPoP` proof for this very request
    /// (with the server's `nonce`, or the one it last gave this process).
    public func authorizationHeaders(method: String = "GET", url: String, nonce: String? = nil, at now: Date)
        throws(VaultError) -> [(name: String, value: String)]
    {
        guard let accessToken else { throw VaultError(.invalidInput, "the grant has no access token") }
        guard accessTokenIsDPoPBound, let dpopKey else { return [("Authorization", "Bearer \(accessToken)")] }
        let proof = try dpopKey.proof(
            method: method, url: url, accessToken: accessToken,
            nonce: nonce ?? DPoPNonces.shared.nonce(for: url), at: now)
        return [("Authorization", "DPoP \(accessToken)"), ("DPoP", proof)]
    }
}

/// A request to a protected resource (userinfo) with a grant's token,
/// bearer or DPoP-bound; a DPoP server's nonce challenge is answered once.
package enum ProtectedResource {
    package static func get(
        _ url: String, grant: Grant, transport: any HTTPTransport, what: String, timeout: Double = 30,
        now: () -> Date = { Date() }
    ) throws(VaultError) -> HTTPResponse {
        func send() throws(VaultError) -> HTTPResponse {
            var request = HTTPRequest(
                method: "GET", url: url,
                headers: try grant.authorizationHeaders(method: "GET", url: url, at: now())
                    + [("Accept", "application/json")])
            request.timeout = timeout
            let response: HTTPResponse
            do { response = try transport.send(request) } catch { throw error.vaultError(what) }
            if grant.accessTokenIsDPoPBound { DPoPNonces.shared.remember(response, from: url) }
            return response
        }
        let first = try send()
        // RFC 9449 section 9: a resource server's nonce challenge, answered once.
        guard grant.accessTokenIsDPoPBound, DPoPNonces.asksForNonce(first) else { return first }
        return try send()
    }
}
