import Synchronization
package import VaultCrypto

/// A record row as stored: public columns and ciphertext.
package struct StoredRecord {
    package var id: [UInt8]
    package var nameHash: [UInt8]
    package var version: UInt64
    package var deleted: Bool
    package var nonce: [UInt8]
    package var ciphertext: [UInt8]

    package init(
        id: [UInt8], nameHash: [UInt8], version: UInt64, deleted: Bool, nonce: [UInt8], ciphertext: [UInt8]
    ) {
        self.id = id
        self.nameHash = nameHash
        self.version = version
        self.deleted = deleted
        self.nonce = nonce
        self.ciphertext = ciphertext
    }

    /// A short public label for error messages: never the name.
    package var label: String { "record \(Array(id.prefix(4)).hex)" }
}

/// The keys and bindings needed to seal and open records of one vault.
package struct RecordCipher {
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
        return try Secure.hash(input, key: nameKey, length: 32)
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
    package func seal(payload: SecureBytes, id: [UInt8], version: UInt64, deleted: Bool, nameHash: [UInt8])
        throws(VaultError) -> StoredRecord
    {
        let nonce = try Secure.randomBytes(AEAD.nonceLength)
        let ad = associatedData(id: id, version: version, deleted: deleted, nameHash: nameHash)
        let padded = try Secure.pad(payload, blockSize: RecordCipher.blockSize)
        let ciphertext = try Secure.seal(padded, key: recordKey, nonce: nonce, associatedData: ad)
        return StoredRecord(
            id: id, nameHash: nameHash, version: version, deleted: deleted, nonce: nonce, ciphertext: ciphertext)
    }

    /// Authenticates and decrypts a row into the start of `scratch`, which
    /// must hold the ciphertext's length; returns the payload's length.
    func open(_ record: StoredRecord, into scratch: SecureBuffer) throws(VaultError) -> Int {
        guard record.id.count == 16, record.nameHash.count == 32, record.nonce.count == AEAD.nonceLength else {
            throw VaultError(.damaged, "\(record.label) has malformed columns")
        }
        let ad = associatedData(
            id: record.id, version: record.version, deleted: record.deleted, nameHash: record.nameHash)
        do {
            let n = try AEAD.open(
                record.ciphertext, key: recordKey, nonce: record.nonce, associatedData: ad, into: scratch)
            return try Padding.unpaddedLength(scratch, count: n, blockSize: RecordCipher.blockSize)
        } catch {
            throw VaultError(.tampered, "\(record.label) failed authentication (damaged or tampered)")
        }
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

/// What a `Vault` needs its keys for. `LocalKeys` holds them in this
/// process; `AgentKeys` asks the agent, which never hands them out.
package protocol VaultKeys: AnyObject {
    /// The keyed lookup hash of a grant name.
    func nameHash(_ name: String) throws(VaultError) -> [UInt8]
    /// Serializes and encrypts a payload into a row.
    func seal(_ payload: Payload, id: [UInt8], version: UInt64, deleted: Bool, nameHash: [UInt8])
        throws(VaultError) -> StoredRecord
    /// Authenticates, decrypts and parses rows, checking that each name
    /// hashes to its row's lookup hash. One result per row, in order. With
    /// `secrets` false, a listing's reading (`Payload.read`): no secret,
    /// and of the provider configuration only what a grant's state reads.
    func open(_ records: [StoredRecord], secrets: Bool) throws(VaultError) -> [Result<Payload, VaultError>]
    /// Opens one row, with its secrets.
    func open(_ record: StoredRecord) throws(VaultError) -> Payload
    /// The MAC of a state body, bound to the vault header.
    func stateMAC(_ body: [UInt8]) throws(VaultError) -> [UInt8]
    /// The master key, for keyslot changes; nil when the keys are elsewhere.
    var masterKey: SecureBytes? { get }
    /// True when `open` may be called from several threads at once.
    var opensConcurrently: Bool { get }
}

extension VaultKeys {
    /// One call at a time unless the keys say otherwise (an agent's keys
    /// share one connection).
    package var opensConcurrently: Bool { false }

    /// Opens one row, as a batch of one.
    package func open(_ record: StoredRecord) throws(VaultError) -> Payload {
        guard let result = try open([record], secrets: true).first else {
            throw VaultError(.internalError, "no answer for \(record.label)")
        }
        return try result.get()
    }
}

/// The vault's keys, derived from the master key and held in secure memory.
package final class LocalKeys: VaultKeys {
    let header: Header
    package let cipher: RecordCipher
    let stateKey: SecureBytes
    package let masterKey: SecureBytes?
    /// Scratch buffers kept between calls (`withScratch`).
    private let spareScratch = ScratchPool()

    package init(header: Header, masterKey: SecureBytes) throws(VaultError) {
        self.header = header
        self.masterKey = masterKey
        cipher = RecordCipher(
            header: header, recordKey: try Secure.subkey(of: masterKey, id: 1, context: "vaultrec"),
            nameKey: try Secure.subkey(of: masterKey, id: 1, context: "vaultnam"))
        stateKey = try Secure.subkey(of: masterKey, id: 1, context: "vaultsta")
    }

    package func nameHash(_ name: String) throws(VaultError) -> [UInt8] { try cipher.nameHash(name) }

    package func seal(_ payload: Payload, id: [UInt8], version: UInt64, deleted: Bool, nameHash: [UInt8])
        throws(VaultError) -> StoredRecord
    {
        try cipher.seal(
            payload: try payload.sealedBytes(), id: id, version: version, deleted: deleted, nameHash: nameHash)
    }

    package func open(_ records: [StoredRecord], secrets: Bool) throws(VaultError) -> [Result<Payload, VaultError>] {
        // A long list (`vault list`, a sync) is opened in parts at once,
        // one per processor: each row is decrypted and parsed alone, and the
        // keys are only read.
        let parts = inParts(records.count, minimumPart: LocalKeys.rowsPerPart) { range in
            Result { () throws(VaultError) in try open(records[range], secrets: secrets) }
        }
        guard parts.count > 1 else { return try parts[0].get() }
        var all: [Result<Payload, VaultError>] = []
        all.reserveCapacity(records.count)
        for part in parts { all += try part.get() }
        return all
    }

    /// Opens `records` one after another with one scratch buffer.
    private func open(_ records: ArraySlice<StoredRecord>, secrets: Bool) throws(VaultError)
        -> [Result<Payload, VaultError>]
    {
        try withScratch(for: records) { (scratch: SecureBuffer) -> [Result<Payload, VaultError>] in
            records.map { row in
                Result { () throws(VaultError) in try openPayload(row, scratch: scratch, secrets: secrets) }
            }
        }
    }

    /// A list is opened in parts only when each holds at least this many rows.
    static let rowsPerPart = 256

    /// Opens one row directly: the token path of every command that holds
    /// the keys itself, so no array of `Result` (instantiated at run time)
    /// is made for it.
    package func open(_ record: StoredRecord) throws(VaultError) -> Payload {
        try withScratch(for: [record]) { (scratch: SecureBuffer) throws(VaultError) -> Payload in
            try openPayload(record, scratch: scratch, secrets: true)
        }
    }

    /// Runs `body` with a secure buffer large enough for the largest of
    /// `records`, one for all of them: a secure allocation costs several
    /// system calls (guard pages, locking), far more than decrypting a
    /// record, so a few buffers are kept between calls (the agent's
    /// requests), each wiped after every use.
    package func withScratch<R>(
        for records: some Collection<StoredRecord>, _ body: (SecureBuffer) throws(VaultError) -> R
    ) throws(VaultError) -> R {
        let size = max(RecordCipher.blockSize, records.map { $0.ciphertext.count }.max() ?? 0)
        let kept = spareScratch.take(size)
        let scratch: SecureBuffer
        if let kept { scratch = kept } else { scratch = try Secure.buffer(count: size) }
        defer {
            scratch.wipe()
            if scratch.count <= LocalKeys.keptScratchBytes { spareScratch.give(scratch) }
        }
        return try body(scratch)
    }

    /// The largest scratch buffer kept for the next call.
    static let keptScratchBytes = 64 * 1024

    /// Decrypts `row` into `scratch`, parses it, checks that its name
    /// hashes to the row's lookup hash, then hands the plaintext to `body`;
    /// the scratch is zeroed afterwards.
    package func openChecked<R>(
        _ row: StoredRecord, scratch: SecureBuffer, secrets: Bool = true,
        _ body: (UnsafeRawBufferPointer, Payload) throws(VaultError) -> R
    ) throws(VaultError) -> R {
        defer { scratch.wipe() }
        let length = try cipher.open(row, into: scratch)
        return try scratch.withUnsafeBytes { (all: UnsafeRawBufferPointer) throws(VaultError) -> R in
            let plain = UnsafeRawBufferPointer(rebasing: all[..<length])
            return try body(plain, try checkedPayload(plain, of: row, secrets: secrets))
        }
    }

    /// `openChecked` for the payload alone, handed back rather than lent.
    private func openPayload(_ row: StoredRecord, scratch: SecureBuffer, secrets: Bool) throws(VaultError) -> Payload {
        defer { scratch.wipe() }
        let length = try cipher.open(row, into: scratch)
        return try scratch.withUnsafeBytes { (all: UnsafeRawBufferPointer) throws(VaultError) -> Payload in
            try checkedPayload(UnsafeRawBufferPointer(rebasing: all[..<length]), of: row, secrets: secrets)
        }
    }

    /// Parses `row`'s plaintext and checks that its name hashes to the
    /// row's lookup hash.
    private func checkedPayload(_ plain: UnsafeRawBufferPointer, of row: StoredRecord, secrets: Bool)
        throws(VaultError) -> Payload
    {
        let payload = try Payload(json: plain, label: row.label, secrets: secrets)
        guard try cipher.nameHash(payload.name) == row.nameHash else {
            throw VaultError(.tampered, "\(row.label) holds a grant of another name")
        }
        return payload
    }

    package func stateMAC(_ body: [UInt8]) throws(VaultError) -> [UInt8] {
        try StateManifest.mac(body, header: header, key: stateKey)
    }

    /// The keys are only read, and scratch buffers are taken under a lock.
    package var opensConcurrently: Bool { true }
}

/// Wiped scratch buffers for the next decryption, shared by the agent's
/// threads. Unchecked because `SecureBuffer` is not `Sendable`: a buffer
/// belongs to the thread that took it until it gives it back, and the
/// array is only touched under the lock.
private final class ScratchPool: @unchecked Sendable {
    private let lock = Mutex(())
    private var buffers: [SecureBuffer] = []

    /// A kept buffer of at least `size` bytes, if there is one.
    func take(_ size: Int) -> SecureBuffer? {
        lock.withLock { _ in buffers.firstIndex(where: { $0.count >= size }).map { buffers.remove(at: $0) } }
    }

    /// Keeps a wiped buffer (at most four are kept).
    func give(_ buffer: SecureBuffer) {
        lock.withLock { _ in if buffers.count < 4 { buffers.append(buffer) } }
    }
}
