internal import CSodium

/// Argon2id (version 1.3) key derivation from a passphrase.
public enum PasswordHash {
    /// Salt length in bytes.
    public static let saltLength = Int(crypto_pwhash_SALTBYTES)
    /// libsodium's INTERACTIVE setting: the lowest cost a stored slot may ask for.
    public static let minimumOpsLimit = UInt64(crypto_pwhash_OPSLIMIT_INTERACTIVE)
    /// libsodium's INTERACTIVE memory, 64 MiB.
    public static let minimumMemLimit = UInt64(crypto_pwhash_MEMLIMIT_INTERACTIVE)
    /// Upper bounds, so a hostile file cannot make an unlock take hours or
    /// exhaust memory: 20 passes, 4 GiB.
    public static let maximumOpsLimit: UInt64 = 20
    /// See `maximumOpsLimit`.
    public static let maximumMemLimit: UInt64 = 4 << 30

    /// Derives `length` bytes from the passphrase. Parameters outside the
    /// bounds are refused before any work is done.
    public static func deriveKey(
        passphrase: SecureBytes, salt: [UInt8], opsLimit: UInt64, memLimit: UInt64, length: Int = 32
    ) throws(CryptoError) -> SecureBytes {
        try Sodium.ready()
        try checkBounds(opsLimit: opsLimit, memLimit: memLimit)
        guard salt.count == saltLength else {
            throw CryptoError(.invalidParameter, "argon2id salt has the wrong length")
        }
        var rc: Int32 = -1
        let key = try SecureBytes(count: length) { k in
            rc = passphrase.withPointer { p, pCount in
                p.withMemoryRebound(to: CChar.self, capacity: max(pCount, 1)) { chars in
                    // The 1.0.18 signature: no separate output-length type.
                    crypto_pwhash(
                        k.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(length), chars, UInt64(pCount), salt,
                        opsLimit, Int(memLimit),
                        crypto_pwhash_ALG_ARGON2ID13)
                }
            }
        }
        guard rc == 0 else { throw CryptoError(.outOfMemory, "argon2id could not allocate its memory") }
        return key
    }

    /// Throws unless the cost parameters are within the accepted range.
    public static func checkBounds(opsLimit: UInt64, memLimit: UInt64) throws(CryptoError) {
        guard (minimumOpsLimit...maximumOpsLimit).contains(opsLimit),
            (minimumMemLimit...maximumMemLimit).contains(memLimit)
        else {
            throw CryptoError(
                .invalidParameter,
                "argon2id parameters out of range (passes \(opsLimit), memory \(memLimit) bytes)")
        }
    }
}
