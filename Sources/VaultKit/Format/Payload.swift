import FoundationEssentials
internal import VaultCrypto

/// The plaintext inside a record: its name and grant (no grant for a tombstone).
struct Payload {
    var name: String
    var grant: Grant?

    private struct Wire: Codable {
        var name: String
        var grant: Grant?
    }

    /// Serializes into secure memory, wiping the intermediate buffer.
    func sealedBytes() throws(VaultError) -> SecureBytes {
        var data: Data
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            data = try encoder.encode(Wire(name: name, grant: grant))
        } catch {
            throw VaultError(.internalError, "cannot serialize the grant")
        }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        return try wrap { () throws(CryptoError) in try SecureBytes(copying: data) }
    }

    init(name: String, grant: Grant?) {
        self.name = name
        self.grant = grant
    }

    /// Decrypts and parses a row, checking that the name inside hashes to
    /// the row's lookup hash.
    init(opening row: StoredRecord, with cipher: RecordCipher) throws(VaultError) {
        let plain = try cipher.open(row)
        var data = plain.withUnsafeBytes { Data($0) }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: data)
        } catch {
            throw VaultError(.damaged, "\(row.label) holds a malformed grant")
        }
        guard try cipher.nameHash(wire.name) == row.nameHash else {
            throw VaultError(.tampered, "\(row.label) holds a grant of another name")
        }
        name = wire.name
        grant = wire.grant
    }
}
