internal import VaultCrypto

/// A record row as stored: public columns and ciphertext.
struct StoredRecord {
    var id: [UInt8]
    var nameHash: [UInt8]
    var version: UInt64
    var deleted: Bool
    var nonce: [UInt8]
    var ciphertext: [UInt8]

    /// A short public label for error messages: never the name.
    var label: String { "record \(Array(id.prefix(4)).hex)" }
}

/// The keys and bindings needed to seal and open records of one vault.
struct RecordCipher {
    static let label = "vault.record.v1"
    static let nameLabel = "vault.name.v1"
    static let blockSize = 256

    let header: Header
    let recordKey: SecureBytes
    let nameKey: SecureBytes

    /// The keyed lookup hash of a grant name (NFC).
    func nameHash(_ name: String) throws(VaultError) -> [UInt8] {
        var input = Array(RecordCipher.nameLabel.utf8)
        name._withNFCCodeUnits { input.append($0) }
        let key = nameKey
        let bytes = input
        return try wrap { () throws(CryptoError) in try GenericHash.hash(bytes, key: key, length: 32) }
    }

    func associatedData(id: [UInt8], version: UInt64, deleted: Bool, nameHash: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.append(RecordCipher.label)
        w.append(header.vaultID)
        w.append(header.keyEpoch)
        w.append(id)
        w.append(version)
        w.append(UInt8(deleted ? 1 : 0))
        w.append(nameHash)
        return w.bytes
    }

    /// Encrypts a payload into a row.
    func seal(payload: SecureBytes, id: [UInt8], version: UInt64, deleted: Bool, nameHash: [UInt8])
        throws(VaultError) -> StoredRecord
    {
        let nonce = try wrap { () throws(CryptoError) in try Random.bytes(AEAD.nonceLength) }
        let ad = associatedData(id: id, version: version, deleted: deleted, nameHash: nameHash)
        let key = recordKey
        let ciphertext = try wrap { () throws(CryptoError) in
            let padded = try Padding.pad(payload, blockSize: RecordCipher.blockSize)
            return try AEAD.seal(padded, key: key, nonce: nonce, associatedData: ad)
        }
        return StoredRecord(
            id: id, nameHash: nameHash, version: version, deleted: deleted, nonce: nonce, ciphertext: ciphertext)
    }

    /// Authenticates and decrypts a row into its payload.
    func open(_ record: StoredRecord) throws(VaultError) -> SecureBytes {
        guard record.id.count == 16, record.nameHash.count == 32, record.nonce.count == AEAD.nonceLength else {
            throw VaultError(.damaged, "\(record.label) has malformed columns")
        }
        let ad = associatedData(
            id: record.id, version: record.version, deleted: record.deleted, nameHash: record.nameHash)
        do {
            let padded = try AEAD.open(record.ciphertext, key: recordKey, nonce: record.nonce, associatedData: ad)
            return try Padding.unpad(padded, blockSize: RecordCipher.blockSize)
        } catch {
            throw VaultError(.tampered, "\(record.label) failed authentication (damaged or tampered)")
        }
    }
}
