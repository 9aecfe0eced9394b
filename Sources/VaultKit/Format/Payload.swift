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

    /// Parses a record's plaintext; `label` names the record in errors.
    init(json plain: SecureBytes, label: String) throws(VaultError) {
        var data = plain.withUnsafeBytes { Data($0) }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: data)
        } catch {
            throw VaultError(.damaged, "\(label) holds a malformed grant")
        }
        name = wire.name
        grant = wire.grant
    }
}
