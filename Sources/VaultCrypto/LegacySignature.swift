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
        try RSASignature.sign(vault_rsa_sha1_sign, pem: privateKeyPEM, data: data, name: "rsa-sha1")
    }

    private static func loaded() throws(CryptoError) { try RSASignature.loaded() }
}
