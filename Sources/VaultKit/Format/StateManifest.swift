internal import VaultCrypto

/// The authenticated list of records and their versions (see docs/format.md,
/// "State"). It is what detects a record rolled back to an older copy of
/// itself, dropped, or slipped in.
struct StateManifest: Equatable {
    static let magic = "vault-st"
    static let stateVersion: UInt16 = 1
    static let label = "vault.state.v1"
    static let macLength = 32

    struct Entry: Equatable {
        var version: UInt64
        var deleted: Bool
    }

    var generation: UInt64
    /// Entries by record id (16 bytes).
    var entries: [[UInt8]: Entry]

    /// Encodes the state and appends the MAC that `keys` compute.
    func encoded(keys: any VaultKeys) throws(VaultError) -> [UInt8] {
        var w = ByteWriter()
        w.append(StateManifest.magic)
        w.append(StateManifest.stateVersion)
        w.append(generation)
        w.append(UInt32(entries.count))
        for id in entries.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let e = entries[id]!
            w.append(id)
            w.append(e.version)
            w.append(UInt8(e.deleted ? 1 : 0))
        }
        let mac = try keys.stateMAC(w.bytes)
        return try Checksum.seal(w.bytes + mac)
    }

    static func mac(_ body: [UInt8], header: Header, key: SecureBytes) throws(VaultError) -> [UInt8] {
        var input = ByteWriter()
        input.append(label)
        input.append(header.body)
        input.append(body)
        let bytes = input.bytes
        return try wrap { () throws(CryptoError) in try GenericHash.hash(bytes, key: key, length: macLength) }
    }

    /// Parses strictly and verifies the MAC.
    init(decoding blob: [UInt8], keys: any VaultKeys) throws(VaultError) {
        let what = "vault state"
        let content = try Checksum.open(blob, what: what)
        guard content.count >= StateManifest.macLength else { throw VaultError(.damaged, "\(what) is truncated") }
        let body = Array(content[..<(content.count - StateManifest.macLength)])
        let mac = Array(content[(content.count - StateManifest.macLength)...])
        let expected = try keys.stateMAC(body)
        guard constantTimeEqual(mac, expected) else {
            throw VaultError(.tampered, "vault state failed authentication (changed outside vault)")
        }
        self = try StateManifest(parsing: body)
    }

    /// Parses the authenticated body (magic .. entries) strictly.
    init(parsing body: [UInt8]) throws(VaultError) {
        let what = "vault state"
        var r = ByteReader(body, what: what)
        try r.expect(StateManifest.magic)
        let version = try r.u16()
        guard version == StateManifest.stateVersion else {
            throw VaultError(.unsupported, "vault state version \(version) is not supported")
        }
        generation = try r.u64()
        let count = Int(try r.u32())
        guard count * 25 == r.remaining else { throw VaultError(.damaged, "\(what) has a wrong entry count") }
        var entries: [[UInt8]: Entry] = [:]
        entries.reserveCapacity(count)
        var previous: [UInt8]? = nil
        for _ in 0..<count {
            let id = try r.read(16)
            let version = try r.u64()
            let deleted = try r.u8()
            guard deleted <= 1, version >= 1 else { throw VaultError(.damaged, "\(what) has a malformed entry") }
            if let previous, !previous.lexicographicallyPrecedes(id) {
                throw VaultError(.damaged, "\(what) entries are out of order")
            }
            previous = id
            entries[id] = Entry(version: version, deleted: deleted == 1)
        }
        try r.finish()
        self.entries = entries
    }

    init(generation: UInt64, entries: [[UInt8]: Entry]) {
        self.generation = generation
        self.entries = entries
    }
}

/// Compares MACs without an early exit.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<a.count { diff |= a[i] ^ b[i] }
    return diff == 0
}
