package import FoundationEssentials
import VaultCrypto

/// The signed assertions of RFC 7523: a JWT signed with RS256 by a
/// service account's key (section 2.1, the JWT bearer grant) or by a
/// client's key (section 2.2, `private_key_jwt` client authentication).
///
/// Every assertion is short-lived (`lifetime`, well under Google's limit
/// of an hour), dated by this machine's clock (`iat`, `exp`), made for one
/// token endpoint (`aud`) and unique (`jti`), so a captured one is of
/// little use and a refused one says something about the clock.
package enum JWTAssertion {
    /// Seconds an assertion is valid for.
    package static let lifetime: Int64 = 300

    /// The claims of one assertion.
    package struct Claims {
        /// `iss`: the client id, or the service account's e-mail address.
        var issuer: String
        /// `sub`: the client id again for client authentication, the user
        /// acted for (domain-wide delegation), or nil (the issuer itself,
        /// as Google's own libraries send it).
        var subject: String?
        /// `aud`: the token endpoint.
        var audience: String
        /// `scope`, Google's claim for what the token is asked for.
        var scope: String?
        /// When the assertion is made (`iat`); `exp` is `lifetime` later.
        var now: Date

        package init(issuer: String, subject: String?, audience: String, scope: String? = nil, now: Date) {
            self.issuer = issuer
            self.subject = subject
            self.audience = audience
            self.scope = scope
            self.now = now
        }
    }

    /// The compact JWS of `claims`, signed with RS256 by `privateKeyPEM`,
    /// whose form is checked first (`checkPrivateKey`).
    package static func sign(_ claims: Claims, keyID: String?, privateKeyPEM: String) throws(VaultError) -> String {
        try checkPrivateKey(privateKeyPEM, source: "the stored private key")
        var header = [("alg", json("RS256")), ("typ", json("JWT"))]
        if let keyID { header.append(("kid", json(keyID))) }
        let iat = claims.now.epochSeconds
        let jti = try Secure.randomBytes(16).hex
        var body = [("iss", json(claims.issuer))]
        if let subject = claims.subject { body.append(("sub", json(subject))) }
        body += [("aud", json(claims.audience))]
        if let scope = claims.scope { body.append(("scope", json(scope))) }
        body += [("iat", String(iat)), ("exp", String(iat + lifetime)), ("jti", json(jti))]
        let input = segment(header) + "." + segment(body)
        let key = try Secure.copy(Array(privateKeyPEM.utf8))
        let signature = try Secure.signRS256(privateKeyPEM: key, data: Array(input.utf8))
        return input + "." + Base64.encodeString(signature, .urlSafeUnpadded)
    }

    /// Refuses what cannot sign RS256 assertions, saying how to fix it: a
    /// PKCS#1 key (`BEGIN RSA PRIVATE KEY`), an encrypted key (vault would
    /// have to ask for its password every time; it keeps the key encrypted
    /// itself), a key of another algorithm or under 2048 bits. Accepts an
    /// unencrypted PKCS#8 RSA key (`BEGIN PRIVATE KEY`), Google's form.
    package static func checkPrivateKey(_ pem: String, source: String) throws(VaultError) {
        if pem.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || pem.contains("Proc-Type: 4,ENCRYPTED") {
            throw VaultError(
                .invalidInput, "\(source) is encrypted with a password, which vault cannot ask for on each use",
                remedy: .pkcs8Key(from: .encrypted))
        }
        if pem.contains("-----BEGIN RSA PRIVATE KEY-----") {
            throw VaultError(
                .invalidInput,
                "\(source) is a PKCS#1 key (BEGIN RSA PRIVATE KEY); vault needs PKCS#8 (BEGIN PRIVATE KEY)",
                remedy: .pkcs8Key(from: .pkcs1))
        }
        guard pem.contains("-----BEGIN PRIVATE KEY-----"), pem.contains("-----END PRIVATE KEY-----") else {
            throw VaultError(
                .invalidInput, "\(source) is not a PEM private key (-----BEGIN PRIVATE KEY-----)",
                remedy: .pkcs8Key(from: .other))
        }
        let key = try Secure.copy(Array(pem.utf8))
        let kind: RSASignature.KeyKind
        do { kind = try RSASignature.inspect(privateKeyPEM: key) } catch {
            if error.code == .unavailable { throw VaultError(.internalError, "cannot sign: \(error.reason)") }
            throw VaultError(.invalidInput, "\(source) cannot be read as a private key (damaged or not PEM)")
        }
        switch kind {
        case .other:
            throw VaultError(.invalidInput, "\(source) is not an RSA key; the assertions are signed with RS256")
        case .rsa(let bits) where bits < 2048:
            throw VaultError(.invalidInput, "\(source) is a \(bits)-bit RSA key; at least 2048 bits are needed")
        case .rsa:
            break
        }
    }

    /// A JSON object with members in this order, base64url-encoded.
    static func segment(_ members: [(String, String)]) -> String {
        let text = "{" + members.map { json($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
        return Base64.encodeString(Array(text.utf8), .urlSafeUnpadded)
    }

    /// A JSON string (RFC 8259 section 7), slashes as they are.
    static func json(_ s: String) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        // Encoding a String cannot fail; an empty string would only make the provider refuse.
        return (try? encoder.encode(s)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
    }
}
