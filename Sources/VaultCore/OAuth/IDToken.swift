package import FoundationEssentials
import VaultCrypto

/// The claims vault checks in an ID token received straight from the token
/// endpoint over TLS. OpenID Connect Core 3.1.3.7 lets such a client rely
/// on TLS instead of the signature; the claims are still checked.
package struct IDTokenClaims: Decodable {
    var iss: String
    var sub: String
    var aud: [String]
    var exp: Double
    var nonce: String?
    var email: String?
    var email_verified: Bool?
    var iat: Double?
    var auth_time: Double?
    var azp: String?

    enum CodingKeys: String, CodingKey { case iss, sub, aud, exp, nonce, email, email_verified, iat, auth_time, azp }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iss = try c.decode(String.self, forKey: .iss)
        sub = try c.decode(String.self, forKey: .sub)
        if let one = try? c.decode(String.self, forKey: .aud) {
            aud = [one]
        } else {
            aud = try c.decode([String].self, forKey: .aud)
        }
        exp = try c.decode(Double.self, forKey: .exp)
        nonce = try c.decodeIfPresent(String.self, forKey: .nonce)
        iat = try c.decodeIfPresent(Double.self, forKey: .iat)
        auth_time = try c.decodeIfPresent(Double.self, forKey: .auth_time)
        azp = try c.decodeIfPresent(String.self, forKey: .azp)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        // Some providers send "true"/"false" as strings.
        if let b = try? c.decodeIfPresent(Bool.self, forKey: .email_verified) {
            email_verified = b
        } else {
            email_verified = (try? c.decodeIfPresent(String.self, forKey: .email_verified)).flatMap {
                $0.map { $0 == "true" }
            }
        }
    }

    /// The claims of an ID token, unchecked; nil when it is no JWT with them.
    static func parse(_ token: String) -> IDTokenClaims? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = JWTSegment.decode(Array(parts[1].utf8)) else { return nil }
        return try? JSONDecoder().decode(IDTokenClaims.self, from: Data(payload))
    }

    /// Parses the payload and checks issuer, audience, expiry and nonce.
    package static func verify(_ token: String, issuer: String, clientID: String, nonce: String?, now: Date)
        throws(VaultError) -> IDTokenClaims
    {
        guard let claims = parse(token) else { throw VaultError(.badResponse, "the ID token is malformed") }
        try claims.checkBasics(issuer: issuer, clientID: clientID, now: now, what: "")
        if let nonce {
            guard claims.nonce == nonce else {
                throw VaultError(.badResponse, "the ID token's nonce does not match this authorization (replayed?)")
            }
        }
        return claims
    }

    /// Issuer, audience and expiry, the checks every ID token gets.
    /// `what` (with its colon) starts the messages.
    func checkBasics(issuer: String?, clientID: String?, now: Date, what: String) throws(VaultError) {
        if let issuer, !IDTokenClaims.matches(issuer: iss, pattern: issuer) {
            throw VaultError(
                .badResponse,
                "\(what)the ID token comes from another issuer ('\(ProviderText.sanitized(iss, limit: 200))', expected '\(issuer)')"
            )
        }
        if let clientID, !aud.contains(clientID) {
            throw VaultError(
                .badResponse, "\(what)the ID token is for another client (audience does not contain '\(clientID)')")
        }
        // A minute of leeway for clock skew.
        guard exp + 60 > now.timeIntervalSince1970 else {
            throw VaultError(.badResponse, "\(what)the ID token has expired")
        }
    }

    /// OpenID Connect Core 12.2: an ID token in a refresh answer must say
    /// the same as the one from the original authentication: the same
    /// `iss`, `sub`, `aud` and `azp` (none if the original had none), the
    /// original `auth_time`, and an `iat` no earlier than the original's;
    /// and pass the checks of any ID token. Without an original (an
    /// imported grant) only those checks apply. Throws `.badResponse`.
    static func verifyRefreshed(
        _ token: String, original: String?, issuer: String?, clientID: String?, now: Date, what: String
    ) throws(VaultError) -> IDTokenClaims {
        let prefix = "\(what): "
        guard let new = parse(token) else {
            throw VaultError(.badResponse, "\(prefix)the ID token in the refresh answer is malformed")
        }
        try new.checkBasics(issuer: issuer, clientID: clientID, now: now, what: prefix)
        guard let old = original.flatMap(parse) else { return new }
        func differs(_ claim: String) -> VaultError {
            VaultError(
                .badResponse,
                "\(prefix)the ID token in the refresh answer differs from the original in '\(claim)' (OpenID Connect Core 12.2)"
            )
        }
        if new.iss != old.iss { throw differs("iss") }
        if new.sub != old.sub { throw differs("sub") }
        if Set(new.aud) != Set(old.aud) { throw differs("aud") }
        if new.azp != old.azp { throw differs("azp") }
        if let t = new.auth_time, let o = old.auth_time, t != o { throw differs("auth_time") }
        if let t = new.iat, let o = old.iat, t < o { throw differs("iat") }
        return new
    }

    /// Exact match, except that `{tenantid}` in the pattern stands for one
    /// path segment (Microsoft's multi-tenant issuer).
    package static func matches(issuer: String, pattern: String) -> Bool {
        guard let r = pattern.firstRange(of: "{tenantid}") else { return issuer == pattern }
        let prefix = pattern[..<r.lowerBound]
        let suffix = pattern[r.upperBound...]
        guard issuer.hasPrefix(prefix), issuer.hasSuffix(suffix), issuer.count > prefix.count + suffix.count else {
            return false
        }
        let middle = issuer.dropFirst(prefix.count).dropLast(suffix.count)
        return !middle.contains("/")
    }

    /// The account named by an ID token that is not verified here (imports):
    /// a label only, never trusted for anything else.
    package static func unverifiedAccount(_ token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = JWTSegment.decode(Array(parts[1].utf8)) else { return nil }
        struct Claims: Decodable {
            var email: String?
            var sub: String?
        }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: Data(payload)) else { return nil }
        return claims.email ?? claims.sub
    }

    /// The account label: a verified e-mail address, else the subject.
    var account: String { (email_verified != false ? email : nil) ?? sub }
}

/// JWT segments: base64url without padding, read leniently since tokens
/// from the wild sometimes carry padding or non-canonical final bits.
enum JWTSegment {
    static func decode(_ text: [UInt8]) -> [UInt8]? {
        var t = text
        while t.last == UInt8(ascii: "=") { t.removeLast() }
        if let exact = Base64.decode(t, .urlSafeUnpadded) { return exact }
        // Clear the unused low bits of the last character and retry.
        guard let last = t.last, t.count % 4 != 1 else { return nil }
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        guard let index = alphabet.firstIndex(of: last) else { return nil }
        let unused = t.count % 4 == 2 ? 4 : 2
        t[t.count - 1] = alphabet[(index >> unused) << unused]
        return Base64.decode(t, .urlSafeUnpadded)
    }
}

extension Grant {
    /// When the grant's ID token expires (its `exp`), or nil when it holds
    /// none or one that is no JWT with the claims an ID token has.
    package var idTokenExpiry: Date? {
        idToken.flatMap(IDTokenClaims.parse).map { Date(timeIntervalSince1970: $0.exp) }
    }
}
