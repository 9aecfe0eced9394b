internal import FoundationEssentials
internal import Glibc
package import VaultCrypto
package import VaultStorage

/// An unlocked vault: the GTMAppAuth keychain store, on Linux.
///
/// Every operation is one SQLite transaction that first authenticates the
/// vault state, so concurrent processes see each other's committed writes
/// and never half of one. Not thread-safe; use one `Vault` per thread.
public final class Vault {
    /// Where this vault lives.
    public let location: VaultLocation
    package let database: Database
    package let header: Header
    package let keys: any VaultKeys
    /// How refreshes of this vault's grants are coordinated beyond this
    /// machine's per-grant lock; `TokenRefresher` uses it unless given one.
    public var refreshCoordinator: any RefreshCoordinator = LocalRefreshCoordinator()
    package let time: any TimeSource
    /// How this handle's operations wait and measure waits: the system's,
    /// or a simulation's.
    package var pacing = Pacing.system
    /// Told what a sync merged, for a simulation's bookkeeping; nil otherwise.
    package var syncTrace: (@Sendable (SyncTraceEvent) -> Void)?
    /// The keyslots (number to stored bytes) this handle last saw: those it
    /// was unlocked through, then those its own keyslot changes left. A
    /// keyslot change commits only while the file still holds exactly
    /// these, so of two concurrent changes the later one is refused. Kept
    /// as read (slot order); `Keyslots` makes the map when it needs one.
    var seenSlots: [StoredKeyslot]?
    /// The state this handle last authenticated, with the connection's
    /// change mark read before it: while the mark stays the same nothing was
    /// written, so a long-lived handle (the agent's) reads and checks the
    /// state, which grows with the grants, only after a change.
    private var authenticatedState: (mark: ChangeMark, state: StateManifest)?

    package init(location: VaultLocation, database: Database, header: Header, keys: any VaultKeys, time: any TimeSource)
    {
        self.location = location
        self.database = database
        self.header = header
        self.keys = keys
        self.time = time
    }

    private convenience init(
        location: VaultLocation, database: Database, header: Header, masterKey: SecureBytes, time: any TimeSource
    ) throws(VaultError) {
        self.init(
            location: location, database: database, header: header,
            keys: try LocalKeys(header: header, masterKey: masterKey), time: time)
    }

    /// The master key, for keyslot changes, which an agent cannot make.
    package func requireMasterKey() throws(VaultError) -> SecureBytes {
        guard let key = keys.masterKey else {
            throw VaultError(
                .locked, "the agent does not hand out the master key",
                remedy: .unlockDirectly)
        }
        return key
    }

    /// Another handle on this vault with its own SQLite connection and the
    /// same keys: for another thread (a `Vault` is used by one at a time).
    package func sibling() throws(VaultError) -> Vault {
        let other = Vault(
            location: location, database: try Vault.connect(location.databasePath), header: header, keys: keys,
            time: time)
        other.refreshCoordinator = refreshCoordinator
        other.pacing = pacing
        other.syncTrace = syncTrace
        return other
    }

    /// A number that changes whenever another connection commits a change to
    /// this vault file (SQLite's `data_version`): a cheap way to know that
    /// what was read through this handle before is still current.
    package func changeCounter() throws(VaultError) -> Int64 {
        try tables.dataVersion()
    }

    /// The tables of this handle's connection.
    var tables: Tables { Tables(database: database) }

    /// True when a vault file exists at `location`.
    public static func exists(at location: VaultLocation) -> Bool {
        FileSystem.exists(location.databasePath)
    }

    // MARK: Creating

    /// Creates a new, empty vault unlocked by `key`. The file appears
    /// complete or not at all; an existing vault is never replaced.
    public static func create(
        at location: VaultLocation, key: KeySource, kdf: KDFParameters = .default,
        time: any TimeSource = SystemTime()
    ) throws(VaultError) -> Vault {
        let masterKey = try Secure.randomKey(count: 32)
        let header = Header(
            vaultID: try Secure.randomBytes(16), keyEpoch: 1,
            created: UInt64(max(0, time.now().epochSeconds)))
        let slot = try Keyslot(wrapping: masterKey, for: key, kdf: kdf, vaultID: header.vaultID)
        return try create(at: location, header: header, masterKey: masterKey, slots: [slot.encoded()], time: time)
    }

    /// Creates the vault file with a given identity, key and keyslots (a new
    /// vault, or one joined from a sync store). Appears whole or not at all.
    package static func create(
        at location: VaultLocation, header: Header, masterKey: SecureBytes, slots: [[UInt8]], time: any TimeSource
    ) throws(VaultError) -> Vault {
        try FileSystem.makePrivateDirectory(location.directory)
        let path = location.databasePath
        if FileSystem.exists(path) {
            throw VaultError(.alreadyExists, "a vault already exists at \(path)")
        }
        let suffix = try Secure.randomBytes(8).hex
        let temporary = location.directory + "/.vault.db.\(suffix).tmp"
        try FileSystem.createExclusive(temporary)
        do {
            // Scope the connection so it is closed (and the WAL folded back)
            // before the file is published.
            try {
                () throws(VaultError) in
                let db = try Tables.create(at: temporary)
                let vault = try Vault(
                    location: location, database: db, header: header, masterKey: masterKey, time: time)
                try vault.write { () throws(VaultError) in
                    try vault.putMeta("header", try header.encoded())
                    for slot in slots { try vault.tables.putKeyslot(nil, slot) }
                    return StateManifest(generation: 0, entries: [:])
                }
            }()
            try FileSystem.publishNew(temporary, as: path, directory: location.directory)
        } catch {
            for p in [temporary, temporary + "-wal", temporary + "-shm"] { FileSystem.remove(p) }
            throw error
        }
        let db = try connect(path)
        return try Vault(location: location, database: db, header: header, masterKey: masterKey, time: time)
    }

    // MARK: Opening

    /// Opens the vault at `location` with `key`. Nothing is written.
    public static func open(at location: VaultLocation, key: KeySource, time: any TimeSource = SystemTime())
        throws(VaultError) -> Vault
    {
        let locked = try LockedVault(location: location)
        let masterKey = try locked.unlock(with: key)
        let vault = try Vault(
            location: location, database: locked.database, header: locked.header, masterKey: masterKey, time: time)
        vault.seenSlots = locked.rawSlots
        return vault
    }

    /// Opens an SQLite connection to the vault file, refusing an empty or
    /// foreign file rather than silently turning it into a new database.
    ///
    /// The file is never opened outside SQLite (docs/format.md, "How the
    /// file is opened"): closing any descriptor of it would drop every
    /// POSIX lock this process holds on it, SQLite's own included, and
    /// another process could then checkpoint and reset the WAL under a
    /// long-lived connection of this one. Checks use `lstat` on the path,
    /// and the header is read by SQLite.
    package static func connect(_ path: String) throws(VaultError) -> Database {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        guard let size = FileSystem.size(path) else {
            throw VaultError(.noVault, "no vault at \(path)", remedy: .createVault)
        }
        try FileSystem.checkPrivate(directory, directory: true)
        try FileSystem.checkPrivate(path, directory: false)
        try FileSystem.checkAncestors(of: directory)
        if size == 0 { throw VaultError(.damaged, "the vault file \(path) is empty") }
        // SQLite's header is 100 bytes; a shorter file was cut off.
        let notAVault = VaultError(.damaged, "the vault file \(path) is not a vault (truncated or overwritten)")
        guard size >= 100 else { throw notAVault }
        return try Tables.open(at: path, notAVault: notAVault)
    }

    // MARK: Transactions

    /// Runs `body` in a read transaction with the authenticated state.
    package func read<R>(_ body: (StateManifest) throws(VaultError) -> R) throws(VaultError) -> R {
        try transaction(.deferred) { () throws(VaultError) in try body(try loadState()) }
    }

    /// Runs `body` holding the write lock; it returns the new state, which
    /// is stored with a raised generation in the same transaction.
    @discardableResult
    func write(_ body: () throws(VaultError) -> StateManifest) throws(VaultError) -> StateManifest {
        try transaction(.immediate) { () throws(VaultError) in
            var state = try body()
            state.generation += 1
            try putMeta("state", try state.encoded(keys: keys))
            return state
        }
    }

    /// Like `write`, with the current state passed in.
    @discardableResult
    package func update(_ body: (inout StateManifest) throws(VaultError) -> Void) throws(VaultError) -> StateManifest {
        try write { () throws(VaultError) in
            var state = try loadState()
            try body(&state)
            return state
        }
    }

    func transaction<R>(_ kind: TransactionKind, _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try tables.transaction(kind, body)
    }

    /// The authenticated state. The mark is read before the state, so a
    /// commit between them makes the next mark differ.
    func loadState() throws(VaultError) -> StateManifest {
        let mark = try tables.changeMark()
        if let known = authenticatedState, known.mark == mark { return known.state }
        guard let blob = try getMeta("state") else { throw VaultError(.damaged, "the vault state is missing") }
        let state = try StateManifest(decoding: blob, keys: keys)
        authenticatedState = (mark, state)
        return state
    }

    package func getMeta(_ key: String) throws(VaultError) -> [UInt8]? {
        try tables.meta(key)
    }

    package func putMeta(_ key: String, _ value: [UInt8]) throws(VaultError) {
        try tables.setMeta(key, value)
    }

    /// Stores `slot` as keyslot `number` (a new number when nil); returns its number.
    @discardableResult
    func putSlot(_ number: Int64?, _ slot: Keyslot) throws(VaultError) -> Int64 {
        try tables.putKeyslot(number, try slot.encoded())
    }

    /// The keyslots' stored bytes in slot order: what opens this vault on
    /// another machine.
    package func storedKeyslots() throws(VaultError) -> [[UInt8]] {
        try tables.keyslots().map { $0.value }
    }
}

/// A vault file opened but not yet unlocked: header and keyslots parsed.
package struct LockedVault {
    package let database: Database
    package let header: Header
    /// Each slot as decoded, or why it could not be. (Plain structs, not
    /// tuples of `Result`: opening a vault then instantiates no generic
    /// type at run time, a conformance scan every command would pay.)
    let slots: [Slot]
    /// The keyslots' stored bytes, as read with `slots`.
    let rawSlots: [StoredKeyslot]

    struct Slot {
        let number: Int64
        let keyslot: Keyslot?
        let damage: VaultError?
    }

    package init(location: VaultLocation) throws(VaultError) {
        database = try Vault.connect(location.databasePath)
        let tables = Tables(database: database)
        let version = try tables.schemaVersion()
        guard version > 0 else { throw VaultError(.damaged, "the vault file is not a vault (no vault schema)") }
        guard version <= Schema.migrations.latest else {
            throw StorageError(.sqlite, "schema \(version) is newer than this version of vault").vaultError
        }
        let headerBlob = try tables.meta("header")
        let stored = try tables.keyslots()
        guard let headerBlob else { throw VaultError(.damaged, "the vault header is missing") }
        header = try Header(decoding: headerBlob)
        rawSlots = stored
        slots = stored.map { stored in
            do throws(VaultError) {
                let slot = try Keyslot(decoding: stored.value, what: "keyslot \(stored.number)")
                return Slot(number: stored.number, keyslot: slot, damage: nil)
            } catch {
                return Slot(number: stored.number, keyslot: nil, damage: error)
            }
        }
    }

    /// Tries each slot of the key's kind; damaged slots are reported only
    /// when no other slot opens the vault.
    func unlock(with key: KeySource) throws(VaultError) -> SecureBytes {
        var damage: VaultError?
        var tried = 0
        for entry in slots {
            guard let slot = entry.keyslot else {
                damage = damage ?? entry.damage
                continue
            }
            guard slot.accepts(key) else { continue }
            tried += 1
            if let mk = try slot.unwrap(with: key, vaultID: header.vaultID) { return mk }
        }
        if let damage { throw damage }
        switch key {
        case .passphrase:
            guard tried > 0 else {
                throw VaultError(.wrongKey, "this vault has no passphrase; it opens with a key file")
            }
            throw VaultError(.wrongKey, "wrong passphrase")
        case .keyfile:
            guard tried > 0 else {
                throw VaultError(.wrongKey, "this vault has no key file slot; it opens with a passphrase")
            }
            throw VaultError(.wrongKey, "the key file does not open this vault")
        case .secretService:
            throw VaultError(
                .wrongKey,
                tried > 0
                    ? "the Secret Service key does not open this vault" : "this vault has no Secret Service slot")
        }
    }
}
