package import VaultCrypto

/// One wrapping of the master key under a passphrase or a key file.
package struct Keyslot {
    static let magic = "vault-ks"
    static let slotVersion: UInt16 = 1
    static let label = "vault.keyslot.v1"
    static let keyfilePersonalization = Array("vault.keyfile".utf8)
    static let secretServicePersonalization = Array("vault.secretsvc".utf8)

    enum Kind: UInt8 {
        case passphrase = 1
        case keyfile = 2
        case secretService = 3
    }

    var kind: Kind
    /// Passphrase slots only.
    var kdf: KDFParameters?
    var salt: [UInt8]
    var nonce: [UInt8]
    var wrappedKey: [UInt8]

    /// magic .. parameters: the part bound into the associated data.
    var prefix: [UInt8] {
        var w = ByteWriter()
        w.append(Keyslot.magic)
        w.append(Keyslot.slotVersion)
        w.append(kind.rawValue)
        if kind == .passphrase, let kdf {
            w.append(UInt8(1))
            w.append(kdf.passes)
            w.append(kdf.memoryBytes)
            w.append(salt)
        }
        return w.bytes
    }

    func encoded() throws(VaultError) -> [UInt8] { try Checksum.seal(prefix + nonce + wrappedKey) }

    static func associatedData(vaultID: [UInt8], prefix: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.append(label)
        w.append(vaultID)
        w.append(prefix)
        return w.bytes
    }

    package init(decoding blob: [UInt8], what: String) throws(VaultError) {
        var r = ByteReader(try Checksum.open(blob, what: what), what: what)
        try r.expect(Keyslot.magic)
        let version = try r.u16()
        guard version == Keyslot.slotVersion else {
            throw VaultError(.unsupported, "\(what) has unsupported version \(version)")
        }
        guard let kind = Kind(rawValue: try r.u8()) else { throw VaultError(.damaged, "\(what) has an unknown kind") }
        self.kind = kind
        if kind == .passphrase {
            guard try r.u8() == 1 else { throw VaultError(.unsupported, "\(what) uses an unknown key derivation") }
            let kdf = KDFParameters(passes: try r.u32(), memoryBytes: try r.u64())
            // Bounds are checked here, before anything is computed.
            do { try kdf.validate() } catch { throw VaultError(.damaged, "\(what): \(error.reason)") }
            self.kdf = kdf
            salt = try r.read(16)
        } else {
            kdf = nil
            salt = []
        }
        nonce = try r.read(24)
        wrappedKey = try r.read(48)
        try r.finish()
    }

    /// Wraps `masterKey` in a new slot for `source`.
    init(wrapping masterKey: SecureBytes, for source: KeySource, kdf: KDFParameters, vaultID: [UInt8])
        throws(VaultError)
    {
        switch source {
        case .passphrase:
            kind = .passphrase
            try kdf.validate()
            self.kdf = kdf
            salt = try Secure.randomBytes(PasswordHash.saltLength)
        case .keyfile:
            kind = .keyfile
            self.kdf = nil
            salt = []
        case .secretService:
            kind = .secretService
            self.kdf = nil
            salt = []
        }
        nonce = try Secure.randomBytes(AEAD.nonceLength)
        let kek = try Keyslot.keyEncryptionKey(for: source, kdf: self.kdf, salt: salt)
        wrappedKey = []
        let ad = Keyslot.associatedData(vaultID: vaultID, prefix: prefix)
        wrappedKey = try Secure.seal(masterKey, key: kek, nonce: nonce, associatedData: ad)
    }

    /// True for a passphrase or key-file slot, which opens the vault on any
    /// machine; a Secret Service slot's key lives in one machine's keyring.
    package var isPortable: Bool { kind != .secretService }

    /// A Secret Service slot's id, which names its own keyring item: its
    /// random nonce, public like the rest of the slot and unique to it.
    package var secretServiceID: [UInt8]? { kind == .secretService ? nonce : nil }

    /// True when this slot can be tried with `source` at all.
    package func accepts(_ source: KeySource) -> Bool {
        switch (kind, source) {
        case (.passphrase, .passphrase), (.keyfile, .keyfile), (.secretService, .secretService): true
        default: false
        }
    }

    /// The master key, or `nil` when `source` is not the one this slot wraps.
    package func unwrap(with source: KeySource, vaultID: [UInt8]) throws(VaultError) -> SecureBytes? {
        let kek = try Keyslot.keyEncryptionKey(for: source, kdf: kdf, salt: salt)
        let ad = Keyslot.associatedData(vaultID: vaultID, prefix: prefix)
        do {
            return try AEAD.open(wrappedKey, key: kek, nonce: nonce, associatedData: ad)
        } catch {
            if error.code == .authenticationFailed { return nil }
            throw VaultError(.internalError, error.reason)
        }
    }

    private static func keyEncryptionKey(for source: KeySource, kdf: KDFParameters?, salt s: [UInt8])
        throws(VaultError) -> SecureBytes
    {
        switch source {
        case .passphrase(let p):
            guard let kdf else { throw VaultError(.internalError, "passphrase used on a key file slot") }
            return try Secure.deriveKey(
                passphrase: p, salt: s, opsLimit: UInt64(kdf.passes), memLimit: kdf.memoryBytes)
        case .keyfile(let secret):
            return try Secure.hash(secret: secret, personalization: keyfilePersonalization)
        case .secretService(let secret):
            return try Secure.hash(secret: secret, personalization: secretServicePersonalization)
        }
    }
}
