internal import COpenSSL

/// RS256 (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 section 3.3) for the
/// signed assertions of RFC 7523: service accounts and `private_key_jwt`
/// client authentication. Through OpenSSL's libcrypto, loaded on first
/// use like the OAuth 1.0a signatures: libsodium has no RSA.
///
/// Most callers want `JWTAssertion` in VaultCore, which checks the key's
/// format first and builds the whole token.
package enum RSASignature {
    /// What a PEM private key holds, read without ever asking for a password.
    package enum KeyKind: Equatable {
        /// An RSA key of this many bits.
        case rsa(bits: Int)
        /// A key of another algorithm (EC, Ed25519, ...).
        case other
    }

    /// The kind of the private key in `pem`; an error when it cannot be read.
    package static func inspect(privateKeyPEM pem: SecureBytes) throws(CryptoError) -> KeyKind {
        try loaded()
        var bits: Int32 = 0
        let rc = pem.withPointer { p, n in
            p.withMemoryRebound(to: CChar.self, capacity: max(n, 1)) { vault_private_key_info($0, n, &bits) }
        }
        switch rc {
        case 1: return .rsa(bits: Int(bits))
        case 0: return .other
        default: throw CryptoError(.invalidParameter, "the private key cannot be read")
        }
    }

    /// The RS256 signature of `data` with the RSA private key in `pem`.
    package static func rs256(privateKeyPEM pem: SecureBytes, data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try sign(vault_rsa_sha256_sign, pem: pem, data: data, name: "rs256")
    }

    /// A PKCS#1 v1.5 signature by one of COpenSSL's signing functions.
    static func sign(
        _ function: (
            UnsafePointer<CChar>?, Int, UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<UInt8>?, Int,
            UnsafeMutablePointer<Int>?
        ) -> Int32,
        pem: SecureBytes, data: [UInt8], name: String
    ) throws(CryptoError) -> [UInt8] {
        try loaded()
        // Enough for a 8192-bit key; a bigger one fails cleanly.
        var out = [UInt8](repeating: 0, count: 1024)
        var length = 0
        let rc = pem.withPointer { p, n in
            p.withMemoryRebound(to: CChar.self, capacity: max(n, 1)) { key in
                function(key, n, data, data.count, &out, out.count, &length)
            }
        }
        guard rc == 0 else {
            throw CryptoError(.invalidParameter, "\(name) signing failed (is it an RSA private key in PEM?)")
        }
        return Array(out.prefix(length))
    }

    static func loaded() throws(CryptoError) {
        var message: UnsafePointer<CChar>?
        guard vault_openssl_load(&message) == 0 else {
            throw CryptoError(.unavailable, message.map { String(cString: $0) } ?? "cannot load libcrypto")
        }
    }
}
