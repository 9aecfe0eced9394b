internal import COpenSSL

/// The SHA-1 based signatures OAuth 1.0a servers require (RFC 5849 3.4),
/// through OpenSSL's libcrypto: libsodium deliberately has no SHA-1.
/// Nothing else in vault uses SHA-1.
public enum LegacySignature {
    /// HMAC-SHA1 of `data` under `key` (20 bytes).
    public static func hmacSHA1(key: SecureBytes, data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try loaded()
        var out = [UInt8](repeating: 0, count: 20)
        let rc = key.withPointer { k, n in vault_hmac_sha1(k, n, data, data.count, &out) }
        guard rc == 0 else { throw CryptoError(.invalidParameter, "hmac-sha1 failed") }
        return out
    }

    /// RSASSA-PKCS1-v1_5 with SHA-1 over `data`, with a PEM private key.
    public static func rsaSHA1(privateKeyPEM: SecureBytes, data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try loaded()
        var out = [UInt8](repeating: 0, count: 1024)
        var length = 0
        let rc = privateKeyPEM.withPointer { p, n in
            p.withMemoryRebound(to: CChar.self, capacity: max(n, 1)) { pem in
                vault_rsa_sha1_sign(pem, n, data, data.count, &out, out.count, &length)
            }
        }
        guard rc == 0 else {
            throw CryptoError(.invalidParameter, "rsa-sha1 signing failed (is it an RSA private key in PEM?)")
        }
        return Array(out.prefix(length))
    }

    private static func loaded() throws(CryptoError) {
        var message: UnsafePointer<CChar>?
        guard vault_openssl_load(&message) == 0 else {
            throw CryptoError(.unavailable, message.map { String(cString: $0) } ?? "cannot load libcrypto")
        }
    }
}
