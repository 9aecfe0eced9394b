internal import CSecret
public import VaultCrypto

/// The Linux Secret Service (gnome-keyring, KeePassXC, ...) as a place for
/// a keyslot's secret, through libsecret loaded on first use. A vault with
/// a Secret Service slot opens without a prompt in a desktop session where
/// the keyring is unlocked; elsewhere it falls back to its other slots.
public enum SecretService {
    /// True when a session bus is announced and libsecret can be loaded.
    /// Nothing is contacted.
    public static func usable(environment: [String: String]) -> Bool {
        guard let bus = environment["DBUS_SESSION_BUS_ADDRESS"], !bus.isEmpty else { return false }
        var err = [CChar](repeating: 0, count: 200)
        return vault_secret_load(&err, err.count) == 0
    }

    /// Stores `secret` as the item of one Secret Service slot (`slotID`) of
    /// the vault with `vaultID`. Each slot has an item of its own, so two
    /// slots never share, replace or delete each other's key.
    public static func store(_ secret: SecureBytes, vaultID: [UInt8], slotID: [UInt8]) throws(VaultError) {
        var text = Base64.encode(secret.unsafeCopyToArray(), .urlSafeUnpadded) + [0]
        defer { secureZero(&text) }
        var err = [CChar](repeating: 0, count: 300)
        let label = "vault key \(Array(vaultID.prefix(4)).hex)"
        let rc = text.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) {
                vault_secret_store(vaultID.hex, slotID.hex, label, $0.baseAddress, &err, err.count)
            }
        }
        guard rc == 0 else { throw VaultError(.io, message(err)) }
    }

    /// The secret stored for slot `slotID` of the vault, or nil when there
    /// is none. A nil `slotID` takes any item of the vault, which is how
    /// items stored before slots had their own are found.
    public static func lookup(vaultID: [UInt8], slotID: [UInt8]?) throws(VaultError) -> SecureBytes? {
        let buffer = try Secure.buffer(count: 128)
        var err = [CChar](repeating: 0, count: 300)
        let n = buffer.withUnsafeMutableBytes { out in
            vault_secret_lookup(
                vaultID.hex, slotID?.hex, out.baseAddress!.assumingMemoryBound(to: CChar.self), out.count, &err,
                err.count)
        }
        guard n >= 0 else { throw VaultError(.io, message(err)) }
        guard n > 0 else { return nil }
        var text = buffer.withUnsafeBytes { Array($0.prefix(Int(n))) }
        defer { secureZero(&text) }
        guard var raw = Base64.decode(text, .urlSafeUnpadded), raw.count == 32 else {
            throw VaultError(.damaged, "the Secret Service item for this vault is not a vault key")
        }
        defer { secureZero(&raw) }
        return try Secure.copy(raw)
    }

    /// Removes the item of slot `slotID` (with nil: every item of the
    /// vault); false when there was none.
    @discardableResult
    public static func clear(vaultID: [UInt8], slotID: [UInt8]?) throws(VaultError) -> Bool {
        var err = [CChar](repeating: 0, count: 300)
        let rc = vault_secret_clear(vaultID.hex, slotID?.hex, &err, err.count)
        guard rc >= 0 else { throw VaultError(.io, message(err)) }
        return rc == 1
    }

    private static func message(_ err: [CChar]) -> String {
        String(decoding: err.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
