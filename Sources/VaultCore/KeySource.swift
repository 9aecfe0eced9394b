public import VaultCrypto

/// What unlocks a vault: a passphrase or the secret of a key file. Both
/// live in secure memory.
public enum KeySource {
    /// A passphrase as UTF-8 bytes; normalized to NFC before hashing.
    case passphrase(SecureBytes)
    /// The 32-byte secret read from a key file.
    case keyfile(SecureBytes)
    /// The 32-byte secret kept in the Secret Service (see `SecretService`).
    case secretService(SecureBytes)

    /// A passphrase from a Swift string, normalized to NFC as it is copied
    /// into secure memory so that no normalized copy lingers elsewhere.
    public static func passphrase(normalizing text: String) throws(VaultError) -> KeySource {
        var count = 0
        text._withNFCCodeUnits { _ in count += 1 }
        let bytes = try Secure.bytes(count: count) { out in
            var i = 0
            text._withNFCCodeUnits { b in
                out[i] = b
                i += 1
            }
        }
        guard count > 0 else { throw VaultError(.invalidInput, "the passphrase is empty") }
        return .passphrase(bytes)
    }

    /// A passphrase from raw bytes (a file, a command's output, a terminal),
    /// which must be UTF-8; normalized to NFC.
    public static func passphrase(utf8 raw: SecureBytes) throws(VaultError) -> KeySource {
        let valid = raw.withUnsafeBytes { buf in
            String(validating: buf.bindMemory(to: UInt8.self), as: UTF8.self)
        }
        guard let text = valid else { throw VaultError(.invalidInput, "the passphrase is not valid UTF-8") }
        // Fast path: ASCII is already NFC; avoid a Swift copy entirely.
        if text.utf8.allSatisfy({ $0 < 0x80 }) {
            guard raw.count > 0 else { throw VaultError(.invalidInput, "the passphrase is empty") }
            return .passphrase(raw)
        }
        return try passphrase(normalizing: text)
    }
}

/// Key files: 32 random bytes written as one line of text, mode 0600.
public enum Keyfile {
    static let prefix = "vault-keyfile-v1:"

    /// Makes a new random key file secret.
    public static func generate() throws(VaultError) -> SecureBytes {
        try Secure.randomKey(count: 32)
    }

    /// The file's text for `secret`, ending in a newline.
    public static func encode(_ secret: SecureBytes) throws(VaultError) -> SecureBytes {
        var raw = secret.unsafeCopyToArray()
        defer { secureZero(&raw) }
        var text = Array(prefix.utf8) + Base64.encode(raw, .urlSafeUnpadded) + [0x0a]
        defer { secureZero(&text) }
        return try Secure.copy(text)
    }

    /// Parses a key file's contents strictly (one trailing newline allowed).
    public static func decode(_ contents: SecureBytes) throws(VaultError) -> SecureBytes {
        var raw = contents.unsafeCopyToArray()
        defer { secureZero(&raw) }
        if raw.last == 0x0a { raw.removeLast() }
        let p = Array(prefix.utf8)
        guard raw.count == p.count + 43, Array(raw[..<p.count]) == p,
            var secret = Base64.decode(Array(raw[p.count...]), .urlSafeUnpadded), secret.count == 32
        else {
            throw VaultError(.invalidInput, "the key file is not a vault key file")
        }
        defer { secureZero(&secret) }
        return try Secure.copy(secret)
    }
}

extension Keyfile {
    /// Deletes a key file that was written for a vault that then failed to
    /// be created, so no orphan key is left behind.
    public static func discard(path: String) { FileSystem.remove(path) }
}
