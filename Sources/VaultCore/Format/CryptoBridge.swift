package import VaultCrypto

/// VaultCrypto as the core and the layers above it call it: secure memory,
/// random bytes, hashes, key derivation, padding and sealing, each throwing
/// `VaultError`. This is the one place a `CryptoError` becomes a
/// `VaultError` (`VaultError.init(_:)` below); code that needs context for
/// a failed authentication calls VaultCrypto itself and says which object
/// failed.
package enum Secure {
    /// Secure memory holding a copy of `bytes` (the concrete path, see
    /// `SecureBytes.init(copying:)`).
    package static func copy(_ bytes: [UInt8]) throws(VaultError) -> SecureBytes {
        do { return try SecureBytes(copying: bytes) } catch { throw VaultError(error) }
    }

    /// Secure memory holding a copy of `bytes`.
    package static func copy(_ bytes: some Collection<UInt8>) throws(VaultError) -> SecureBytes {
        do { return try SecureBytes(copying: bytes) } catch { throw VaultError(error) }
    }

    /// Zeroed secure memory of `count` bytes, to write into.
    package static func buffer(count: Int) throws(VaultError) -> SecureBuffer {
        do { return try SecureBuffer(count: count) } catch { throw VaultError(error) }
    }

    /// Secure memory of `count` bytes that `body` fills, fixed afterwards.
    package static func bytes(count: Int, initializingWith body: (UnsafeMutableRawBufferPointer) -> Void)
        throws(VaultError) -> SecureBytes
    {
        do { return try SecureBytes(count: count, initializingWith: body) } catch { throw VaultError(error) }
    }

    /// A new random key of `count` bytes, in secure memory.
    package static func randomKey(count: Int) throws(VaultError) -> SecureBytes {
        do { return try SecureBytes(randomCount: count) } catch { throw VaultError(error) }
    }

    /// The first `length` bytes of `bytes`, in secure memory of their own.
    package static func prefix(_ bytes: SecureBytes, _ length: Int) throws(VaultError) -> SecureBytes {
        do { return try bytes.prefix(length) } catch { throw VaultError(error) }
    }

    /// What the first `length` bytes of `buffer` hold, fixed, in secure
    /// memory of their own.
    package static func prefix(_ buffer: SecureBuffer, _ length: Int) throws(VaultError) -> SecureBytes {
        do { return try buffer.prefix(length) } catch { throw VaultError(error) }
    }

    /// `count` random bytes that are not secret (ids, nonces, salts).
    package static func randomBytes(_ count: Int) throws(VaultError) -> [UInt8] {
        do { return try Random.bytes(count) } catch { throw VaultError(error) }
    }

    /// BLAKE2b of `data`, keyed when `key` is given.
    package static func hash(_ data: [UInt8], key: SecureBytes? = nil, length: Int = 32) throws(VaultError) -> [UInt8] {
        do { return try GenericHash.hash(data, key: key, length: length) } catch { throw VaultError(error) }
    }

    /// BLAKE2b of a secret under a personalization, kept in secure memory.
    package static func hash(secret: SecureBytes, personalization: [UInt8], length: Int = 32) throws(VaultError)
        -> SecureBytes
    {
        do {
            return try GenericHash.hash(secret: secret, personalization: personalization, length: length)
        } catch { throw VaultError(error) }
    }

    /// SHA-256 of `data` (PKCE's S256).
    package static func sha256(_ data: [UInt8]) throws(VaultError) -> [UInt8] {
        do { return try SHA256.hash(data) } catch { throw VaultError(error) }
    }

    /// The subkey `id` of `masterKey` for an eight-byte `context`.
    package static func subkey(of masterKey: SecureBytes, id: UInt64, context: String) throws(VaultError)
        -> SecureBytes
    {
        do { return try KeyDerivation.subkey(from: masterKey, id: id, context: context) } catch {
            throw VaultError(error)
        }
    }

    /// `data` padded to a multiple of `blockSize`.
    package static func pad(_ data: SecureBytes, blockSize: Int) throws(VaultError) -> SecureBytes {
        do { return try Padding.pad(data, blockSize: blockSize) } catch { throw VaultError(error) }
    }

    /// `data` without its padding.
    package static func unpad(_ data: SecureBytes, blockSize: Int) throws(VaultError) -> SecureBytes {
        do { return try Padding.unpad(data, blockSize: blockSize) } catch { throw VaultError(error) }
    }

    /// Seals `plaintext` under `key` with a new random nonce; returns both.
    package static func seal(_ plaintext: SecureBytes, key: SecureBytes, associatedData: [UInt8]) throws(VaultError)
        -> (nonce: [UInt8], ciphertext: [UInt8])
    {
        do {
            let nonce = try Random.bytes(AEAD.nonceLength)
            return (nonce, try AEAD.seal(plaintext, key: key, nonce: nonce, associatedData: associatedData))
        } catch { throw VaultError(error) }
    }

    /// Seals `plaintext` under `key` with the given `nonce`.
    package static func seal(_ plaintext: SecureBytes, key: SecureBytes, nonce: [UInt8], associatedData: [UInt8])
        throws(VaultError) -> [UInt8]
    {
        do { return try AEAD.seal(plaintext, key: key, nonce: nonce, associatedData: associatedData) } catch {
            throw VaultError(error)
        }
    }

    /// The RS256 signature of `data` by a PKCS#8 RSA private key in PEM form.
    package static func signRS256(privateKeyPEM: SecureBytes, data: [UInt8]) throws(VaultError) -> [UInt8] {
        do { return try RSASignature.rs256(privateKeyPEM: privateKeyPEM, data: data) } catch {
            throw VaultError(error)
        }
    }

    /// Argon2id of a passphrase: the key that opens a passphrase keyslot.
    package static func deriveKey(passphrase: SecureBytes, salt: [UInt8], opsLimit: UInt64, memLimit: UInt64)
        throws(VaultError) -> SecureBytes
    {
        do {
            return try PasswordHash.deriveKey(
                passphrase: passphrase, salt: salt, opsLimit: opsLimit, memLimit: memLimit)
        } catch { throw VaultError(error) }
    }
}

extension VaultError {
    /// The vault error for a VaultCrypto failure. A failed authentication is
    /// `tampered`; callers that know which object failed say so themselves.
    package init(_ error: CryptoError) {
        switch error.code {
        case .authenticationFailed: self.init(.tampered, error.reason)
        case .invalidParameter, .invalidPadding: self.init(.damaged, error.reason)
        case .outOfMemory, .unavailable: self.init(.internalError, error.reason)
        }
    }
}
