internal import FoundationEssentials
internal import Glibc
public import VaultCore
public import VaultCrypto
public import VaultHTTP

/// What one `sync` did.
public struct SyncReport: Sendable, Equatable {
    /// An empty report.
    public init() {}
    /// Records taken from the store.
    public var pulled = 0
    /// Records sent to the store.
    public var pushed = 0
    /// Names of grants with a new conflict (both sides kept).
    public var conflicts: [String] = []
    /// Names given to records that arrived under a name already taken here.
    public var renamed: [String] = []
    /// True when an update this machine had written was lost by the store
    /// (one that ignores preconditions) and was written again: the other
    /// machines receive it at their next sync.
    public var repaired = false
    /// True when, on a store that ignores preconditions, another machine
    /// wrote to the store while this sync was writing (the root moved under
    /// it): this machine took that write in, but the other machine has not
    /// seen this one's until it syncs (docs/sync.md, "Stores that ignore
    /// preconditions").
    public var rootMoved = false
    /// Requests sent to the store, and body bytes uploaded.
    public var requests = 0
    /// Body bytes uploaded to the store.
    public var bytesSent = 0
    /// Bucket objects let go by earlier syncs and deleted by this one
    /// (docs/sync.md, "Collecting old objects"); not those a sync replaces
    /// and deletes at once on a store that honours preconditions.
    public var collected = 0
    /// True when this sync took a new passphrase set on another machine:
    /// the vault here opens with that one, no longer with the one before.
    public var passphraseTaken = false
    /// How many passphrases open the vault after this sync: more than one
    /// when two machines each set a new one before either synced (both
    /// are kept, on every machine, until `vault passwd` sets one again).
    public var passphrases = 0
    /// The grants whose right to refresh this machine handed over to the
    /// machine that asked for it (docs/sync.md, "Refresh rights while the
    /// store is away").
    package var handedOver: [HandedOverRight] = []
}

/// A right to refresh a grant that a sync handed over.
package struct HandedOverRight: Sendable, Equatable {
    /// The grant's name.
    package let grant: String
    /// The first 8 hex digits of the device id of the machine that asked,
    /// when known (an agent's report of its sync does not carry it).
    package let machine: String?

    /// A right handed over to `machine`.
    package init(grant: String, machine: String?) {
        self.grant = grant
        self.machine = machine
    }
}

/// Two-way sync of one open vault with its store (docs/sync.md): setting
/// the store, syncing, conflicts, and the refresh leases. An app that syncs
/// makes one over its vault; `join` creates a vault from a store.
public struct SyncEngine {
    /// The vault this syncs.
    public let vault: Vault
    /// How requests reach the store.
    public let transport: any HTTPTransport
    /// Seconds allowed per request to the store.
    public let storeTimeout: Double
    /// Tries per request when the store fails (5xx, network).
    public let storeAttempts: Int
    /// Told when a request to the store ran out of time and is tried
    /// again: the command line says so while it waits.
    package var onStoreTimeout: ((ObjectStoreWait) -> Void)?
    /// When the tries of every request to the store end, on the monotonic
    /// clock (`ObjectStoreSession.now`); nil: each request has all its tries.
    package var storeDeadline: Double?

    /// The default time allowed per request to the store.
    public static let defaultStoreTimeout: Double = 30

    /// Creates the sync engine of `vault`.
    public init(
        vault: Vault, transport: any HTTPTransport, storeTimeout: Double = SyncEngine.defaultStoreTimeout,
        storeAttempts: Int = 5
    ) {
        self.vault = vault
        self.transport = transport
        self.storeTimeout = storeTimeout
        self.storeAttempts = max(1, storeAttempts)
    }
}

extension SyncEngine {
    static let syncMetaKey = "sync"
    static let rootName = "vault-root"
    static let keysName = "vault-keys"
    static let syncAttempts = 5
    /// How long a bucket object no root names is kept before it is deleted
    /// on a store that ignores preconditions (docs/sync.md).
    static let garbageGrace: Int64 = 900
    /// Most objects remembered for collection; older ones are forgotten
    /// (left in the store) rather than deleted early.
    static let maxGarbage = 4096
    /// On a store that ignores preconditions: seconds between the two reads
    /// of a root just written, and the most a writer lets pass between its
    /// last look at the root and the answer to its write over it (`lookAgain`).
    /// A root written over ours by a machine that looked before ours landed
    /// then lands before our second read, which finds it.
    static let rootSettle = 1.0

    /// True when this vault syncs with a store.
    public var isConfigured: Bool { (try? vault.getMeta(SyncEngine.syncMetaKey)) != nil }

    func syncKeys() throws(VaultError) -> SyncKeys { try SyncKeys(masterKey: try vault.requireMasterKey()) }

    func loadSyncState(_ keys: SyncKeys) throws(VaultError) -> SyncState {
        guard let blob = try vault.getMeta(SyncEngine.syncMetaKey) else {
            throw VaultError(.notFound, "this vault has no sync store", remedy: .setRemote)
        }
        return try SyncState(decoding: blob, keys: keys, vaultID: vault.header.vaultID)
    }

    func saveSyncState(_ state: SyncState, _ keys: SyncKeys) throws(VaultError) {
        try vault.putMeta(SyncEngine.syncMetaKey, try state.encoded(keys: keys, vaultID: vault.header.vaultID))
    }

    /// The store this vault syncs through; `timeout` bounds each request
    /// (default: `storeTimeout`).
    func store(for state: SyncState, timeout: Double? = nil) throws(VaultError) -> any SyncStore {
        let store = try SyncEngine.store(
            for: state, transport: transport, timeout: timeout ?? storeTimeout, attempts: storeAttempts,
            pacing: vault.pacing)
        (store as? ObjectSyncStore)?.watch(onTimeout: onStoreTimeout, deadline: storeDeadline)
        return store
    }

    /// The store that the settings `state` name: the one place that picks
    /// an implementation of `SyncStore`. `attempts` defaults to the store's own.
    static func store(
        for state: SyncState, transport: any HTTPTransport, timeout: Double, attempts: Int? = nil,
        pacing: Pacing = .system
    ) throws(VaultError) -> any SyncStore {
        try ObjectSyncStore(
            url: state.url, user: state.user, password: state.password, transport: transport, timeout: timeout,
            attempts: attempts, sleep: pacing.sleep)
    }

    /// Sets the store this vault syncs with and checks that it answers and
    /// whether it honours preconditions. A folder missing at `url` is
    /// created (WebDAV MKCOL, parents too; an S3 bucket); returns the places
    /// created, as the user is told ("the folder URL"). Nothing of the vault is uploaded until `sync`.
    @discardableResult
    public func setRemote(url: String, user: String?, password: SecureBytes?) throws(VaultError) -> [String] {
        let keys = try syncKeys()
        let device: [UInt8]
        if let known = try? loadSyncState(keys).device {
            device = known
        } else {
            device = try Secure.randomBytes(16)
        }
        var state = SyncState(url: url, user: user, password: password?.unsafeCopyToArray() ?? [], device: device)
        let store = try store(for: state)
        let created = try store.createFolder()
        // Before the probe writes there, and before anything is kept.
        try refuseAnotherVault(in: store, url: url)
        let probe = "probe-" + (try Secure.randomBytes(8)).hex
        state.preconditions = try store.honoursPreconditions(probe: probe) ? 1 : 2
        // Another store: nothing known about it yet.
        try vault.update { (_: inout StateManifest) throws(VaultError) in try saveSyncState(state, keys) }
        return created
    }

    /// Refuses a store whose root or keys (docs/sync.md, "Objects") are
    /// another vault's: every sync there would be refused, and this
    /// vault's objects would sit beside that vault's.
    private func refuseAnotherVault(in store: any SyncStore, url: String) throws(VaultError) {
        let owner: [UInt8]?
        if let root = try store.get(SyncEngine.rootName) {
            owner = SyncRoot.vaultID(ofRoot: root.bytes)
        } else if let keys = try store.get(SyncEngine.keysName) {
            owner = (try? SyncEngine.parseKeysObject(keys.bytes))?.0.vaultID
        } else {
            owner = nil
        }
        guard let owner, owner != vault.header.vaultID else { return }
        throw VaultError(
            .alreadyExists,
            "\(SyncEngine.displayName(url)) holds another vault (id \(Array(owner.prefix(4)).hex)), "
                + "not this one (id \(Array(vault.header.vaultID.prefix(4)).hex)): a store folder holds one vault",
            remedy: .joinStoreVaultOrChooseAnother)
    }

    /// Whether the configured store honours preconditions, and its URL.
    public func remoteDescription() throws(VaultError) -> (url: String, user: String?, preconditions: Bool) {
        let state = try loadSyncState(try syncKeys())
        return (SyncEngine.displayName(state.url), state.user, state.honoursPreconditions)
    }

    /// The configured store's URL as the settings keep it (an S3 store's
    /// canonical URL, with its endpoint, region and addressing; never a
    /// credential) and its user, for another machine to join with.
    public func storeAddress() throws(VaultError) -> (url: String, user: String?) {
        let state = try loadSyncState(try syncKeys())
        return (state.url, state.user)
    }

    /// The URL of the store this vault is set to sync with, when it has
    /// synced there (it holds a mark of that store's root); nil before the
    /// first sync, or with no store set.
    package func syncedStore() -> String? {
        guard let keys = try? syncKeys(), let state = try? loadSyncState(keys), state.markEpoch > 0 else {
            return nil
        }
        return state.url
    }

    /// A store URL as the user is shown it: an S3 store's bucket, folder,
    /// endpoint and region; other URLs as they are (`StoreKind`).
    public static func displayName(_ url: String) -> String { StoreKind.displayName(of: url) }

    /// This machine's sync device id as `vault conflicts` shows it: the
    /// first 8 hex digits.
    public func deviceLabel() throws(VaultError) -> String {
        Array(try loadSyncState(try syncKeys()).device.prefix(4)).hex
    }

    /// Reads the store's root once, with one try of at most `timeout`
    /// seconds, and changes nothing anywhere: whether the store answers and
    /// takes this vault's credentials (`vault doctor`). True when the store
    /// holds a root, false when it answers without one (nothing synced yet).
    package func probeStore(timeout: Double) throws(VaultError) -> Bool {
        let state = try loadSyncState(try syncKeys())
        let store = try SyncEngine.store(
            for: state, transport: transport, timeout: timeout, attempts: 1, pacing: vault.pacing)
        return try store.get(SyncEngine.rootName) != nil
    }

    // MARK: Sync

    /// Two-way sync with the store (docs/sync.md, "A sync").
    /// `timeout` bounds each request (default: `storeTimeout`).
    public func sync(timeout: Double? = nil) throws(VaultError) -> SyncReport {
        let keys = try syncKeys()
        return try sync(through: try store(for: try loadSyncState(keys), timeout: timeout), keys: keys)
    }

    /// `sync` through `store`: rounds until one is not overtaken by another
    /// writer, then `vault-keys` when the keyslots changed.
    func sync(through store: any SyncStore, keys: SyncKeys) throws(VaultError) -> SyncReport {
        var report = SyncReport()
        var roots: Set<[UInt8]> = []
        for attempt in 1...SyncEngine.syncAttempts {
            if let root = try syncOnce(store: store, keys: keys, report: &report) {
                try reconcileKeys(store: store, keys: keys, root: root, report: &report)
                report.requests = store.requestCount
                report.bytesSent = store.bytesSent
                return report
            }
            roots.insert(try loadSyncState(keys).markHash)
            vault.pacing.sleep((0.05 + 0.2 * Random.fraction()) * Double(attempt))
        }
        // Other machines' writes moved the root between our tries: the
        // store works and is busy. Otherwise it refused our writes.
        throw VaultError(
            roots.count > 1 ? .busy : .transient,
            "the store kept changing during \(SyncEngine.syncAttempts) attempts; nothing was lost",
            remedy: .syncAgain)
    }

    /// One round (docs/sync.md, "A sync"), its six steps in order; the
    /// root the store holds at its end (a root of nothing when the store
    /// has none), or nil when another writer got in between (try again).
    private func syncOnce(store: any SyncStore, keys: SyncKeys, report: inout SyncReport) throws(VaultError)
        -> SyncRoot??
    {
        var round = try SyncRound(engine: self, store: store, keys: keys, report: report)
        defer { report = round.report }
        try round.readRoot()
        let leases = round.root?.leases ?? []
        guard try round.fetchChangedBuckets() else { return nil }
        try round.mergeFetched()
        guard try round.writeOutgoing() else { return nil }
        guard try round.readBack() else { return nil }
        try round.collectOldObjects()
        round.report.handedOver += try handedOver(before: leases, after: round.written, device: round.state.device)
        return .some(round.written ?? round.root)
    }

    /// The grants whose standing lease this machine held in the root it
    /// read (`before`), which another machine asked for there, and which
    /// the root it wrote (`after`) no longer holds: handed over.
    private func handedOver(before: [SyncRoot.Lease], after: SyncRoot?, device: [UInt8]) throws(VaultError)
        -> [HandedOverRight]
    {
        guard let after else { return [] }
        var askers: [[UInt8]: [UInt8]] = [:]
        for lease in before where lease.device == device && lease.isStanding {
            guard
                let want = before.first(where: { $0.record == lease.record && $0.device != device && $0.isWant }),
                !after.leases.contains(where: { $0.record == lease.record && $0.device == device && !$0.isWant })
            else { continue }
            askers[lease.record] = want.device
        }
        guard !askers.isEmpty else { return [] }
        var handed: [HandedOverRight] = []
        for name in try vault.list(secrets: false, each: { $0.name }).items {
            guard let id = try recordID(of: name), let asker = askers[id] else { continue }
            handed.append(HandedOverRight(grant: name, machine: Array(asker.prefix(4)).hex))
        }
        return handed
    }

    /// The store's root, read and authenticated. A read that fails its
    /// checks is tried again twice after a pause: a store may serve a file
    /// while another machine's write replaces it. What still fails is
    /// refused.
    func fetchRoot(_ store: any SyncStore, _ keys: SyncKeys) throws(VaultError) -> (
        object: StoredObject, root: SyncRoot
    )? {
        var attempt = 0
        while true {
            attempt += 1
            guard let object = try store.get(SyncEngine.rootName) else { return nil }
            do {
                let root = try SyncRoot(
                    decoding: object.bytes, keys: keys, vaultID: vault.header.vaultID, keyEpoch: vault.header.keyEpoch)
                return (object, root)
            } catch {
                if attempt >= 3 || error.code == .unsupported { throw error }
                vault.pacing.sleep(0.15 + 0.25 * Random.fraction())
            }
        }
    }

    /// On a store that ignores preconditions, just before writing over the
    /// root `expected`: looks at it once more. Returns when that look was
    /// asked for (this machine's monotonic clock), or nil when the root
    /// moved, or when the answer took so long that a root written since may
    /// already have been read back by its writer (`rootSettle`): an answer
    /// reflects the store as of some moment after it was asked for, and a
    /// write over it must land before the other writer's second read.
    func lookAgain(at expected: [UInt8]?, in store: any SyncStore) throws(VaultError) -> Double? {
        let asked = vault.pacing.monotonic()
        guard try store.get(SyncEngine.rootName)?.bytes == expected,
            vault.pacing.monotonic() - asked < SyncEngine.rootSettle / 2
        else { return nil }
        return asked
    }

    /// `vault-keys`: the header and keyslots, which 'vault join' opens with
    /// a passphrase or key file like the local file's.
    func keysObject() throws(VaultError) -> [UInt8] {
        var w = ByteWriter()
        w.append("vault-sk")
        w.append(UInt16(1))
        let headerBlob = try vault.header.encoded()
        w.append(UInt32(headerBlob.count))
        w.append(headerBlob)
        let slots = try vault.storedKeyslots()
        w.append(UInt16(slots.count))
        for slot in slots {
            w.append(UInt32(slot.count))
            w.append(slot)
        }
        return w.bytes
    }
}
