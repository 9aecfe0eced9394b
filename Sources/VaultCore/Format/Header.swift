/// The vault's public header: identity and format of the file.
package struct Header: Equatable {
    static let magic = "vault-db"
    static let formatVersion: UInt16 = 1

    package var vaultID: [UInt8]
    package var keyEpoch: UInt32
    var created: UInt64

    /// The 38 bytes covered by the checksum, the keyslot AD and the state MAC.
    var body: [UInt8] {
        var w = ByteWriter()
        w.append(Header.magic)
        w.append(Header.formatVersion)
        w.append(vaultID)
        w.append(keyEpoch)
        w.append(created)
        return w.bytes
    }

    package func encoded() throws(VaultError) -> [UInt8] { try Checksum.seal(body) }

    init(vaultID: [UInt8], keyEpoch: UInt32, created: UInt64) {
        self.vaultID = vaultID
        self.keyEpoch = keyEpoch
        self.created = created
    }

    package init(decoding blob: [UInt8]) throws(VaultError) {
        var r = ByteReader(try Checksum.open(blob, what: "vault header"), what: "vault header")
        try r.expect(Header.magic)
        let version = try r.u16()
        guard version == Header.formatVersion else {
            throw VaultError(.unsupported, "vault format version \(version) is not supported by this version of vault")
        }
        vaultID = try r.read(16)
        keyEpoch = try r.u32()
        created = try r.u64()
        try r.finish()
    }
}
