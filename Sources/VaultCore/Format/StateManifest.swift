internal import Glibc
import VaultCrypto

/// The authenticated list of records and their versions (see docs/format.md,
/// "State"). It is what detects a record rolled back to an older copy of
/// itself, dropped, or slipped in.
package struct StateManifest: Equatable {
    static let magic = "vault-st"
    static let stateVersion: UInt16 = 1
    static let label = "vault.state.v1"
    static let macLength = 32

    package struct Entry: Equatable {
        package var version: UInt64
        package var deleted: Bool

        package init(version: UInt64, deleted: Bool) {
            self.version = version
            self.deleted = deleted
        }
    }

    var generation: UInt64
    /// Entries by record id (16 bytes).
    package var entries: Entries

    /// The entries as read (sorted, 25 bytes each: id, version, deleted) and
    /// the changes made since, so that reading one entry of ten thousand
    /// allocates nothing: lookups binary-search the stored bytes.
    package struct Entries: Equatable, Sequence {
        private var stored: [UInt8] = []
        private var changed: [[UInt8]: Entry] = [:]
        static let width = 25

        init() {}

        init(_ dictionary: [[UInt8]: Entry]) { changed = dictionary }

        /// Entries already checked to be sorted, unique and well-formed.
        init(sorted bytes: [UInt8]) { stored = bytes }

        private var storedCount: Int { stored.count / Entries.width }

        private func storedIndex(_ id: [UInt8]) -> Int? {
            guard id.count == 16 else { return nil }
            return stored.withUnsafeBufferPointer { buf -> Int? in
                var low = 0
                var high = storedCount
                while low < high {
                    let mid = (low + high) / 2
                    let c = id.withUnsafeBufferPointer {
                        memcmp(buf.baseAddress! + mid * Entries.width, $0.baseAddress!, 16)
                    }
                    if c == 0 { return mid }
                    if c < 0 { low = mid + 1 } else { high = mid }
                }
                return nil
            }
        }

        private func storedEntry(_ i: Int) -> (id: [UInt8], entry: Entry) {
            let base = i * Entries.width
            let version = stored[(base + 16)..<(base + 24)].reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
            return (Array(stored[base..<(base + 16)]), Entry(version: version, deleted: stored[base + 24] == 1))
        }

        package subscript(id: [UInt8]) -> Entry? {
            get {
                if let e = changed[id] { return e }
                return storedIndex(id).map { storedEntry($0).entry }
            }
            set { changed[id] = newValue }
        }

        /// Every entry, sorted by id.
        var sorted: [(id: [UInt8], entry: Entry)] {
            var all: [[UInt8]: Entry] = [:]
            all.reserveCapacity(storedCount + changed.count)
            for i in 0..<storedCount {
                let (id, e) = storedEntry(i)
                all[id] = e
            }
            for (id, e) in changed { all[id] = e }
            return all.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { ($0, all[$0]!) }
        }

        var count: Int { sorted.count }

        /// How many entries are not tombstones, without building anything.
        var liveCount: Int {
            guard !changed.isEmpty else {
                var n = 0
                for i in 0..<storedCount where stored[i * Entries.width + 24] == 0 { n += 1 }
                return n
            }
            return sorted.filter { !$0.entry.deleted }.count
        }

        package func makeIterator() -> IndexingIterator<[(id: [UInt8], entry: Entry)]> { sorted.makeIterator() }

        package static func == (a: Entries, b: Entries) -> Bool {
            a.sorted.elementsEqual(b.sorted) { $0.id == $1.id && $0.entry == $1.entry }
        }
    }

    /// Encodes the state and appends the MAC that `keys` compute.
    func encoded(keys: any VaultKeys) throws(VaultError) -> [UInt8] {
        var w = ByteWriter()
        w.append(StateManifest.magic)
        w.append(StateManifest.stateVersion)
        w.append(generation)
        let all = entries.sorted
        w.append(UInt32(all.count))
        for (id, e) in all {
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
        return try Secure.hash(bytes, key: key, length: macLength)
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
    package init(parsing body: [UInt8]) throws(VaultError) {
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
        // Checked in place, a word at a time (every read of a vault does
        // this for every grant): ids strictly increasing, versions
        // positive, flags 0 or 1. The bytes are then kept and searched,
        // not copied into a dictionary.
        let raw = try r.read(count * Entries.width)
        try raw.withUnsafeBufferPointer { (buf: UnsafeBufferPointer<UInt8>) throws(VaultError) in
            var previous: (UInt64, UInt64)?
            for i in 0..<count {
                let e = UnsafeRawPointer(buf.baseAddress! + i * Entries.width)
                guard e.load(fromByteOffset: 24, as: UInt8.self) <= 1,
                    e.loadUnaligned(fromByteOffset: 16, as: UInt64.self) != 0
                else { throw VaultError(.damaged, "\(what) has a malformed entry") }
                // Big-endian words compare as the bytes do.
                let id = (
                    UInt64(bigEndian: e.loadUnaligned(as: UInt64.self)),
                    UInt64(bigEndian: e.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                )
                if let previous, !(previous < id) { throw VaultError(.damaged, "\(what) entries are out of order") }
                previous = id
            }
        }
        try r.finish()
        self.entries = Entries(sorted: raw)
    }

    init(generation: UInt64, entries: [[UInt8]: Entry]) {
        self.generation = generation
        self.entries = Entries(entries)
    }
}

/// Compares MACs without an early exit.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<a.count { diff |= a[i] ^ b[i] }
    return diff == 0
}
