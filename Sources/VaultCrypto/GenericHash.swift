internal import CSodium

/// BLAKE2b, plain (checksums) or keyed (MACs and name lookup hashes).
public enum GenericHash {
    /// Hashes `data` to `length` bytes (16...64), keyed when `key` is given.
    public static func hash(_ data: [UInt8], key: SecureBytes? = nil, length: Int = 32) throws(CryptoError)
        -> [UInt8]
    {
        try Sodium.ready()
        guard (Int(crypto_generichash_BYTES_MIN)...Int(crypto_generichash_BYTES_MAX)).contains(length) else {
            throw CryptoError(.invalidParameter, "blake2b output length out of range")
        }
        var out = [UInt8](repeating: 0, count: length)
        let rc: Int32
        if let key {
            rc = key.withPointer { k, kCount in
                crypto_generichash(&out, length, data, UInt64(data.count), k, kCount)
            }
        } else {
            rc = crypto_generichash(&out, length, data, UInt64(data.count), nil, 0)
        }
        guard rc == 0 else { throw CryptoError(.invalidParameter, "blake2b failed") }
        return out
    }

    /// Hashes secret input into secure memory (used to turn a key file into a key).
    public static func hash(secret: SecureBytes, personalization: [UInt8], length: Int = 32) throws(CryptoError)
        -> SecureBytes
    {
        try Sodium.ready()
        var salt = [UInt8](repeating: 0, count: Int(crypto_generichash_blake2b_SALTBYTES))
        var personal = [UInt8](repeating: 0, count: Int(crypto_generichash_blake2b_PERSONALBYTES))
        guard personalization.count <= personal.count else {
            throw CryptoError(.invalidParameter, "blake2b personalization too long")
        }
        personal.replaceSubrange(0..<personalization.count, with: personalization)
        var rc: Int32 = -1
        let out = try SecureBytes(count: length) { o in
            rc = secret.withPointer { s, sCount in
                crypto_generichash_blake2b_salt_personal(
                    o.baseAddress!.assumingMemoryBound(to: UInt8.self), length, s, UInt64(sCount), nil, 0, &salt,
                    &personal)
            }
        }
        guard rc == 0 else { throw CryptoError(.invalidParameter, "blake2b failed") }
        return out
    }
}

/// Subkeys from a master key with `crypto_kdf_derive_from_key` (BLAKE2b with
/// the subkey id as salt and an 8-byte context as personalization).
public enum KeyDerivation {
    /// Derives a 32-byte subkey for `context` (exactly 8 ASCII bytes) and `id`.
    public static func subkey(from masterKey: SecureBytes, id: UInt64, context: String) throws(CryptoError)
        -> SecureBytes
    {
        try Sodium.ready()
        let ctx = Array(context.utf8)
        guard ctx.count == Int(crypto_kdf_CONTEXTBYTES), masterKey.count == Int(crypto_kdf_KEYBYTES) else {
            throw CryptoError(.invalidParameter, "kdf context must be 8 bytes and the key 32")
        }
        let cContext = ctx.map { CChar(bitPattern: $0) }
        var rc: Int32 = -1
        let out = try SecureBytes(count: 32) { o in
            rc = masterKey.withPointer { k, _ in
                crypto_kdf_derive_from_key(o.baseAddress!.assumingMemoryBound(to: UInt8.self), 32, id, cContext, k)
            }
        }
        guard rc == 0 else { throw CryptoError(.invalidParameter, "kdf derivation failed") }
        return out
    }
}

/// SHA-256, for protocols that require it (PKCE's S256 challenge).
public enum SHA256 {
    /// The 32-byte digest of `data`.
    public static func hash(_ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try Sodium.ready()
        var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        guard crypto_hash_sha256(&out, data, UInt64(data.count)) == 0 else {
            throw CryptoError(.invalidParameter, "sha-256 failed")
        }
        return out
    }
}
