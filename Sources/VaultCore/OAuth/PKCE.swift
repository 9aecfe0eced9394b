import VaultCrypto

/// Proof Key for Code Exchange (RFC 7636) with the S256 method, always.
public struct PKCE: Sendable {
    /// The secret kept by the client: 43 characters of base64url.
    public let verifier: String
    /// BASE64URL(SHA256(verifier)), sent with the authorization request.
    public let challenge: String
    /// Always "S256"; "plain" is never used.
    public let method = "S256"

    /// A fresh verifier from 32 random bytes.
    public init() throws(VaultError) {
        try self.init(verifierBytes: Secure.randomBytes(32))
    }

    /// A verifier from given octets (RFC 7636 Appendix B uses fixed ones).
    public init(verifierBytes: [UInt8]) throws(VaultError) {
        let v = Base64.encodeString(verifierBytes, .urlSafeUnpadded)
        try self.init(verifier: v)
    }

    /// The challenge for an existing verifier string.
    public init(verifier: String) throws(VaultError) {
        guard (43...128).contains(verifier.utf8.count) else {
            throw VaultError(.invalidInput, "a pkce verifier has 43 to 128 characters")
        }
        self.verifier = verifier
        let digest = try Secure.sha256(Array(verifier.utf8))
        challenge = Base64.encodeString(digest, .urlSafeUnpadded)
    }
}

/// Random, URL-safe values for `state` and `nonce`.
enum RandomToken {
    static func make() throws(VaultError) -> String {
        Base64.encodeString(try Secure.randomBytes(24), .urlSafeUnpadded)
    }
}
