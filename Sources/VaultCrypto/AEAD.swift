internal import CSodium

/// XChaCha20-Poly1305 (IETF construction): 32-byte key, 24-byte random
/// nonce, 16-byte tag. The long nonce makes random nonces safe for any
/// number of messages under one key.
public enum AEAD {
    /// Key length in bytes.
    public static let keyLength = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    /// Nonce length in bytes.
    public static let nonceLength = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    /// Tag length in bytes.
    public static let tagLength = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    /// Encrypts and authenticates `plaintext` together with `associatedData`.
    public static func seal(
        _ plaintext: SecureBytes, key: SecureBytes, nonce: [UInt8], associatedData: [UInt8]
    ) throws(CryptoError) -> [UInt8] {
        try Sodium.ready()
        guard key.count == keyLength, nonce.count == nonceLength else {
            throw CryptoError(.invalidParameter, "aead key or nonce has the wrong length")
        }
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var outLength: UInt64 = 0
        let rc = plaintext.withPointer { p, pCount in
            key.withPointer { k, _ in
                crypto_aead_xchacha20poly1305_ietf_encrypt(
                    &out, &outLength, p, UInt64(pCount),
                    associatedData, UInt64(associatedData.count), nil, nonce, k)
            }
        }
        guard rc == 0 else { throw CryptoError(.invalidParameter, "aead encryption failed") }
        return out
    }

    /// Verifies and decrypts; throws `authenticationFailed` on any change to
    /// the ciphertext, nonce, key or associated data.
    public static func open(
        _ ciphertext: [UInt8], key: SecureBytes, nonce: [UInt8], associatedData: [UInt8]
    ) throws(CryptoError) -> SecureBytes {
        guard ciphertext.count >= tagLength else {
            throw CryptoError(.authenticationFailed, "ciphertext is shorter than its tag")
        }
        let scratch = try SecureBuffer(count: ciphertext.count - tagLength)
        let length = try open(ciphertext, key: key, nonce: nonce, associatedData: associatedData, into: scratch)
        return try scratch.prefix(length)
    }

    /// Like `open`, into the start of `scratch` (at least the ciphertext's
    /// length less the tag), for opening many records without a secure
    /// allocation each. Returns the plaintext length; on failure `scratch`
    /// holds nothing of the plaintext.
    public static func open(
        _ ciphertext: [UInt8], key: SecureBytes, nonce: [UInt8], associatedData: [UInt8], into scratch: SecureBuffer
    ) throws(CryptoError) -> Int {
        try Sodium.ready()
        guard key.count == keyLength, nonce.count == nonceLength else {
            throw CryptoError(.invalidParameter, "aead key or nonce has the wrong length")
        }
        guard ciphertext.count >= tagLength else {
            throw CryptoError(.authenticationFailed, "ciphertext is shorter than its tag")
        }
        guard scratch.count >= ciphertext.count - tagLength else {
            throw CryptoError(.invalidParameter, "the scratch buffer is too small")
        }
        var outLength: UInt64 = 0
        let rc = scratch.withPointer { o, _ in
            key.withPointer { k, _ in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    o, &outLength, nil, ciphertext, UInt64(ciphertext.count),
                    associatedData, UInt64(associatedData.count), nonce, k)
            }
        }
        guard rc == 0 else { throw CryptoError(.authenticationFailed, "authentication failed") }
        return Int(outLength)
    }
}
