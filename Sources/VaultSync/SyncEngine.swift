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
    /// (one that ignores preconditions) and was written again.
    public var repaired = false
    /// Requests sent to the store, and body bytes uploaded.
    public var requests = 0
    /// Body bytes uploaded to the store.
    public var bytesSent = 0
    /// Bucket objects let go by earlier syncs and deleted by this one
    /// (docs/sync.md, "Collecting old objects"); not those a sync replaces
    /// and deletes at once on a store that honours preconditions.
    public var collected = 0
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
        try SyncEngine.store(
            for: state, transport: transport, timeout: timeout ?? storeTimeout, attempts: storeAttempts)
    }

    /// The store that the settings `state` name: the one place that picks
    /// an implementation of `SyncStore`. `attempts` defaults to the store's own.
    static func store(for state: SyncState, transport: any HTTPTransport, timeout: Double, attempts: Int? = nil)
        throws(VaultError) -> any SyncStore
    {
        try HTTPSyncStore(
            url: state.url, user: state.user, password: state.password, transport: transport, timeout: timeout,
            attempts: attempts)
    }

    /// Sets the store this vault syncs with and checks that it answers and
    /// whether it honours preconditions. A folder missing at `url` is
    /// created (WebDAV MKCOL, parents too); returns the URLs of the folders
    /// created. Nothing of the vault is uploaded until `sync`.
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
        let probe = "probe-" + (try Secure.randomBytes(8)).hex
        state.preconditions = try store.honoursPreconditions(probe: probe) ? 1 : 2
        // Another store: nothing known about it yet.
        try vault.update { (_: inout StateManifest) throws(VaultError) in try saveSyncState(state, keys) }
        return created
    }

    /// Whether the configured store honours preconditions, and its URL.
    public func remoteDescription() throws(VaultError) -> (url: String, user: String?, preconditions: Bool) {
        let state = try loadSyncState(try syncKeys())
        return (state.url, state.user, state.honoursPreconditions)
    }

    /// This machine's sync device id as `vault conflicts` shows it: the
    /// first 8 hex digits.
    public func deviceLabel() throws(VaultError) -> String {
        Array(try loadSyncState(try syncKeys()).device.prefix(4)).hex
    }

    // MARK: Sync

    /// Two-way sync with the store (docs/sync.md, "A sync").
    /// `timeout` bounds each request (default: `storeTimeout`).
    public func sync(timeout: Double? = nil) throws(VaultError) -> SyncReport {
        let keys = try syncKeys()
        var report = SyncReport()
        let store = try store(for: try loadSyncState(keys), timeout: timeout)
        defer {
            report.requests = store.requestCount
            report.bytesSent = store.bytesSent
        }
        var roots: Set<[UInt8]> = []
        for attempt in 1...SyncEngine.syncAttempts {
            if try syncOnce(store: store, keys: keys, report: &report) {
                try publishKeys(store: store, keys: keys)
                report.requests = store.requestCount
                report.bytesSent = store.bytesSent
                return report
            }
            roots.insert(try loadSyncState(keys).markHash)
            usleep(UInt32(Double.random(in: 0.05...0.25) * Double(attempt) * 1_000_000))
        }
        // Other machines' writes moved the root between our tries: the
        // store works and is busy. Otherwise it refused our writes.
        throw VaultError(
            roots.count > 1 ? .busy : .transient,
            "the store kept changing during \(SyncEngine.syncAttempts) attempts; nothing was lost",
            remedy: .syncAgain)
    }

    /// One round; false when another writer got in between (try again).
    private func syncOnce(store: any SyncStore, keys: SyncKeys, report: inout SyncReport) throws(VaultError) -> Bool {
        var state = try loadSyncState(keys)
        // 1. The root, checked against what this machine accepted before.
        let fetchedRoot = try fetchRoot(store, keys)
        let rootObject = fetchedRoot?.object
        var root: SyncRoot?
        var rootHash = [UInt8](repeating: 0, count: 32)
        if let fetchedRoot, let rootObject {
            let decoded = fetchedRoot.root
            rootHash = try SyncRoot.hash(rootObject.bytes)
            if try checkMark(decoded, hash: rootHash, state: state) { report.repaired = true }
            root = decoded
        } else if state.markEpoch > 0 {
            throw VaultError(
                .tampered,
                "the store has no root, but this machine synced its epoch \(state.markEpoch): the store was emptied or rolled back",
                hint: "check the store; local data is untouched")
        }
        // 2. The buckets that changed since they were last merged.
        var fetched: [Int: [SyncRecord]] = [:]
        for i in 0..<256 {
            let ref = root?.buckets[i]
            guard (ref?.hash ?? Array(repeating: 0, count: 32)) != state.bucketHashes[i] else { continue }
            guard let ref else {
                fetched[i] = []
                continue
            }
            guard let object = try store.get(ref.objectName) else {
                // Gone while a newer root replaced this one: read again.
                if try store.get(SyncEngine.rootName)?.bytes != rootObject?.bytes { return false }
                // No machine deletes a bucket until long after the last
                // root naming it was replaced ("Collecting old objects"),
                // so the current root naming a missing one means the store
                // lost or dropped it: merging around it would take what
                // it held for nothing.
                guard !state.honoursPreconditions else {
                    throw VaultError(
                        .tampered,
                        "the store's root names bucket \(i), which the store does not have (deleted or lost)",
                        hint: "check the store; local data is untouched")
                }
                // On a store that ignores If-Match, a writer slower than the
                // collection's grace can put back a root naming a collected
                // bucket: its records are sent again by the machines that
                // have them.
                fetched[i] = []
                continue
            }
            guard try SyncRoot.hash(object.bytes) == ref.hash else {
                throw VaultError(.tampered, "bucket \(i) of the store does not match its root (changed or replaced)")
            }
            fetched[i] = try SyncBucket(
                decoding: object.bytes, keys: keys, vaultID: vault.header.vaultID, keyEpoch: vault.header.keyEpoch,
                index: UInt8(i)
            ).records
        }
        // 3. Merge into the local vault, with the new mark, in one transaction.
        try vault.update { (manifest: inout StateManifest) throws(VaultError) in
            state = try loadSyncState(keys)
            try merge(fetched, into: &manifest, state: &state, report: &report)
            for (i, _) in fetched { state.bucketHashes[i] = root?.buckets[i]?.hash ?? Array(repeating: 0, count: 32) }
            if let root {
                state.markEpoch = root.epoch
                state.markHash = rootHash
                state.markParent = root.parent
            }
            try saveSyncState(state, keys)
        }
        // 4. What this machine has that the store has not.
        let outgoing = try vault.read { (manifest: StateManifest) throws(VaultError) in
            try pendingBuckets(state: state, manifest: manifest)
        }
        // An empty vault is published too, so that other machines can join.
        if outgoing.isEmpty, let root {
            try collect(store: store, keys: keys, current: root, report: &report)
            return true
        }
        var next =
            root
            ?? SyncRoot(
                vaultID: vault.header.vaultID, keyEpoch: vault.header.keyEpoch, epoch: 0, writer: state.device,
                parent: Array(repeating: 0, count: 32))
        if root != nil {
            next.ancestry = Array(([(root!.epoch, rootHash)] + root!.ancestry).prefix(SyncRoot.maxAncestry))
        }
        next.epoch += 1
        next.writer = state.device
        next.parent = root == nil ? Array(repeating: 0, count: 32) : rootHash
        next.devices = next.devices.filter { $0.id != state.device } + [(state.device, next.epoch)]
        // Pushing a record ends this machine's lease on it; other leases
        // stay while they are active by this machine's observation.
        let pushed = Set(outgoing.values.flatMap { $0.map(\.record.id) })
        next.leases = try activeLeases(next, keys: keys).filter {
            !($0.device == state.device && pushed.contains($0.record))
        }
        var replaced: [[UInt8]] = []
        var uploaded: [[UInt8]] = []
        var pushedBases: [[UInt8]: SyncState.Base] = [:]
        for (i, records) in outgoing {
            let bucket = SyncBucket(
                vaultID: vault.header.vaultID, keyEpoch: vault.header.keyEpoch, index: UInt8(i),
                records: records.map(\.record))
            let (name, bytes) = try bucket.encoded(with: keys)
            _ = try store.put("b-" + name.hex, bytes, precondition: .absent)
            uploaded.append(name)
            if let old = next.buckets[i] { replaced.append(old.name) }
            next.buckets[i] = .init(name: name, hash: try SyncRoot.hash(bytes))
            for r in records {
                pushedBases[r.record.id] = .init(localVersion: r.localVersion, versions: r.record.versions)
            }
            report.pushed += records.filter(\.changed).count
        }
        let rootBytes = try next.encoded(with: keys)
        let precondition: WritePrecondition =
            rootObject.map { $0.etag.map(WritePrecondition.matches) ?? .none } ?? .absent
        // A refusal (412) is not the last word: when the store applied an
        // earlier try of this request and its answer was lost, the try
        // after it is refused by our own root. Either way, what the store
        // holds now decides, read back below.
        _ = try store.put(SyncEngine.rootName, rootBytes, precondition: precondition)
        // 5. Read it back: the store may have refused it, or (ignoring
        // preconditions) let another writer win.
        let check = try store.get(SyncEngine.rootName)
        let newHash = try SyncRoot.hash(rootBytes)
        guard let check, try SyncRoot.hash(check.bytes) == newHash else {
            // Not ours now; but ours may have been stored for a while and
            // read by a writer whose root names what we uploaded. Collected
            // later, if no root names it then.
            try retire(uploaded, keys: keys)
            return false
        }
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.markEpoch = next.epoch
            s.markHash = newHash
            s.markParent = next.parent
            for (i, _) in outgoing { s.bucketHashes[i] = next.buckets[i]!.hash }
            for (id, base) in pushedBases { s.bases[id] = base }
            try saveSyncState(s, keys)
        }
        // 6. The buckets our root no longer names. A root written beside
        // ours may still name them: on a store that ignores If-Match, and
        // even on one that checks two writers' If-Match before either
        // writes (Apache). They are deleted later (docs/sync.md,
        // "Collecting old objects"), so that a root naming a missing
        // bucket always means the store lost it.
        try retire(replaced, keys: keys)
        try collect(store: store, keys: keys, current: next, report: &report)
        return true
    }

    /// Remembers bucket objects that the root just written no longer names.
    private func retire(_ names: [[UInt8]], keys: SyncKeys) throws(VaultError) {
        guard !names.isEmpty else { return }
        let now = vault.time.now().epochSeconds
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            for name in names where !s.garbage.contains(where: { $0.name == name }) {
                s.garbage.append(.init(name: name, since: now))
            }
            s.garbage = Array(s.garbage.suffix(SyncEngine.maxGarbage))
            try saveSyncState(s, keys)
        }
    }

    /// Deletes remembered objects that are safe to delete: the current root
    /// does not name them, and they were let go `garbageGrace` ago by this
    /// machine's clock, longer than any writer that read a root naming them
    /// takes to write its own. One the current root names again (a root
    /// that overwrote ours) is forgotten: whoever replaces it lets it go.
    private func collect(store: any SyncStore, keys: SyncKeys, current: SyncRoot, report: inout SyncReport)
        throws(VaultError)
    {
        let state = try loadSyncState(keys)
        guard !state.garbage.isEmpty else { return }
        let named = Set(current.buckets.compactMap { $0?.name })
        let now = vault.time.now().epochSeconds
        var keep: [SyncState.Garbage] = []
        var changed = false
        for g in state.garbage {
            if named.contains(g.name) {
                changed = true
                continue
            }
            guard now - g.since >= SyncEngine.garbageGrace else {
                keep.append(g)
                continue
            }
            do {
                try store.delete(SyncRoot.BucketRef(name: g.name, hash: []).objectName)
                report.collected += 1
                changed = true
            } catch {
                keep.append(g)  // tried again at the next sync
            }
        }
        guard changed else { return }
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.garbage = s.garbage.filter { g in keep.contains(g) || !state.garbage.contains(g) }
            try saveSyncState(s, keys)
        }
    }

    /// Uploads `vault-keys` again when the keyslots changed since it was last
    /// uploaded (a new passphrase, an added key file), so that machines
    /// joining later use the vault's current ones. No request otherwise.
    private func publishKeys(store: any SyncStore, keys: SyncKeys) throws(VaultError) {
        let bytes = try keysObject()
        let hash = try SyncRoot.hash(bytes)
        guard try loadSyncState(keys).keysHash != hash else { return }
        _ = try store.put(SyncEngine.keysName, bytes)
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.keysHash = hash
            try saveSyncState(s, keys)
        }
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
                usleep(UInt32.random(in: 150_000...400_000))
            }
        }
    }

    /// Checks a root against the high-water mark. Returns true when it
    /// replaced this machine's write on a store that ignores preconditions
    /// (the update is pushed again); throws on a rollback or a fork.
    ///
    /// On a store known to ignore preconditions, writers overwrite each
    /// other at any depth (a slow writer can even put back a lower epoch),
    /// so a root that neither descends from the mark nor is its sibling is
    /// still a lost update there, not proof of a fork: the version vectors
    /// keep every local change, which is sent again (docs/sync.md).
    private func checkMark(_ root: SyncRoot, hash: [UInt8], state: SyncState) throws(VaultError) -> Bool {
        guard state.markEpoch > 0 else { return false }
        if root.epoch == state.markEpoch && hash == state.markHash { return false }
        if root.epoch < state.markEpoch {
            if !state.honoursPreconditions { return true }
            throw VaultError(
                .tampered,
                "the store's root is older (epoch \(root.epoch)) than one this machine accepted (epoch \(state.markEpoch)): a rollback",
                hint: "check the store; local data is untouched")
        }
        // A sibling of the mark, written on the same parent: the store let
        // another writer overwrite it.
        let sibling = root.epoch == state.markEpoch && root.parent == state.markParent
        // Or a history that left the mark's parent through another root:
        // it diverged exactly at the mark.
        let throughSibling =
            state.markEpoch > 1
            && root.ancestry.contains { $0.epoch == state.markEpoch - 1 && $0.hash == state.markParent }
            && !root.ancestry.contains { $0.epoch == state.markEpoch && $0.hash == state.markHash }
        let descends =
            root.parent == state.markHash
            || root.ancestry.contains { $0.epoch == state.markEpoch && $0.hash == state.markHash }
            || root.epoch - state.markEpoch > UInt64(SyncRoot.maxAncestry)
        if descends { return false }
        // Even a store that honours If-Match can let two writers through
        // when it checks both before either writes (Apache does): a sibling
        // is a lost update, sent again, never a reason to stop.
        if sibling || throughSibling || !state.honoursPreconditions { return true }
        throw VaultError(
            .tampered,
            "the store's root (epoch \(root.epoch)) does not descend from the one this machine accepted (epoch \(state.markEpoch)): a fork",
            hint: "check the store; local data is untouched")
    }

    /// Merges fetched buckets into the local records (inside a write).
    private func merge(
        _ fetched: [Int: [SyncRecord]], into manifest: inout StateManifest, state: inout SyncState,
        report: inout SyncReport
    ) throws(VaultError) {
        guard !fetched.isEmpty else { return }
        var rows: [[UInt8]: StoredRecord] = [:]
        for row in try vault.allRows() where fetched[Int(row.id[0])] != nil { rows[row.id] = row }
        // Records whose name is still held here by another record: written
        // once the records of this round that free it are (a grant renamed
        // and a new one under its old name may sit in different buckets).
        var deferred: [DeferredWrite] = []
        for (index, records) in fetched.sorted(by: { $0.key < $1.key }) {
            // A record synced before but missing from its bucket now: the
            // store lost it (a write it let another overwrite). Send it again.
            // A record changed here since is pushed as a change anyway: its
            // vector is raised then. Marking it "send again as it was"
            // would push the change under the old vector, which the other
            // machines take as the version they already have.
            let present = Set(records.map(\.id))
            for (id, row) in rows where Int(id[0]) == index && !present.contains(id) {
                guard let base = state.bases[id], base.localVersion == row.version else { continue }
                state.bases[id]?.localVersion = SyncState.Base.resend
            }
            for remote in records {
                let local = rows[remote.id]
                let base = state.bases[remote.id]
                guard let local else {
                    if try !applyRemote(
                        remote, manifest: &manifest, state: &state, report: &report, renameOnClash: false)
                    {
                        deferred.append(.remote(remote))
                    }
                    report.pulled += 1
                    continue
                }
                let changed = base == nil || local.version != base!.localVersion
                let mine = changed ? VersionVector.bumped(base?.versions ?? [], by: state.device) : base!.versions
                switch VersionVector.compare(mine, remote.versions) {
                case .equal:
                    if changed {
                        // The store has this machine's vector already (sent,
                        // then interrupted before it was recorded); the local
                        // record may have changed again since: raise the
                        // vector once more, so it is never taken as equal.
                        state.bases[remote.id] = .init(localVersion: 0, versions: mine)
                    } else {
                        state.bases[remote.id] = .init(localVersion: local.version, versions: mine)
                    }
                case .newer:
                    // Ours is newer: pushed below (a lost update comes back this way).
                    if !changed { state.bases[remote.id]?.localVersion = SyncState.Base.resend }
                case .older:
                    if try !applyRemote(
                        remote, manifest: &manifest, state: &state, report: &report, renameOnClash: false)
                    {
                        deferred.append(.remote(remote))
                    }
                    report.pulled += 1
                case .concurrent:
                    let localPayload = try vault.keys.open(local)
                    let ours = SyncRecord(
                        id: local.id, versions: mine, deleted: local.deleted,
                        payload: try localPayload.sealedBytes().unsafeCopyToArray())
                    guard case .conflict(let winner, _) = SyncRecord.merge(local: ours, remote: remote),
                        let remotePayload = remote.payload.withUnsafeBytes({ Payload.read($0) })
                    else {
                        throw VaultError(.damaged, "a record from the store holds a malformed grant")
                    }
                    // Metadata and tokens merge apart; the vector decides only
                    // the ties (docs/sync.md, "Versions and merge").
                    let merged = GrantMerge(
                        .init(payload: localPayload, deleted: local.deleted),
                        .init(payload: remotePayload, deleted: remote.deleted), aWins: winner == ours)
                    let carried = winner == remote ? remote.siblings : []
                    if try !applyMerged(
                        merged, id: remote.id, carrying: carried, manifest: &manifest, state: &state, report: &report,
                        renameOnClash: false)
                    {
                        deferred.append(.merged(merged, id: remote.id, siblings: carried))
                    }
                    if merged.conflict {
                        // The side whose metadata lost is kept until someone picks.
                        let loser = merged.metadataFromA ? remote : ours
                        let value = merged.metadataFromA ? ours : remote
                        state.conflicts.removeAll { $0.id == loser.id }
                        state.conflicts.append(
                            .init(
                                id: loser.id, versions: loser.versions, payload: loser.payload,
                                device: VersionVector.author(loser.versions, over: value.versions),
                                valueDevice: VersionVector.author(value.versions, over: loser.versions)))
                        if !report.conflicts.contains(merged.value.name) { report.conflicts.append(merged.value.name) }
                    }
                    // Both sides seen: the merged vector, raised here so the
                    // value dominates both when pushed.
                    state.bases[remote.id] = .init(
                        localVersion: 0, versions: VersionVector.merged(mine, remote.versions))
                }
            }
        }
        // Each pass writes what no longer clashes; what still does (two
        // machines added grants of one name, or names swapped) is kept
        // under a new name.
        var progress = true
        while !deferred.isEmpty {
            var left: [DeferredWrite] = []
            for write in deferred {
                let written: Bool
                switch write {
                case .remote(let remote):
                    written = try applyRemote(
                        remote, manifest: &manifest, state: &state, report: &report, renameOnClash: !progress)
                case .merged(let merged, let id, let siblings):
                    written = try applyMerged(
                        merged, id: id, carrying: siblings, manifest: &manifest, state: &state, report: &report,
                        renameOnClash: !progress)
                }
                if !written { left.append(write) }
            }
            progress = left.count < deferred.count
            deferred = left
        }
    }

    /// A write of `merge` put off until the name it takes is free.
    enum DeferredWrite {
        case remote(SyncRecord)
        case merged(GrantMerge, id: [UInt8], siblings: [SyncSibling])
    }

    /// Writes the merge of a local and a remote version of record `id`,
    /// keeping the conflict the remote one carried when it was the value.
    @discardableResult
    private func applyMerged(
        _ merged: GrantMerge, id: [UInt8], carrying siblings: [SyncSibling], manifest: inout StateManifest,
        state: inout SyncState, report: inout SyncReport, renameOnClash: Bool = true
    ) throws(VaultError) -> Bool {
        var payload = merged.value
        var hash = try vault.keys.nameHash(payload.name)
        if !merged.deleted, let other = try vault.findRow(nameHash: hash, deleted: false), other.id != id {
            guard renameOnClash else { return false }
            payload.name = String(payload.name.prefix(58)) + "+" + Array(id.prefix(2)).hex
            hash = try vault.keys.nameHash(payload.name)
            report.renamed.append(payload.name)
        }
        let version = (manifest.entries[id]?.version ?? 0) + 1
        try vault.putRow(
            try vault.keys.seal(payload, id: id, version: version, deleted: merged.deleted, nameHash: hash))
        manifest.entries[id] = .init(version: version, deleted: merged.deleted)
        if let sibling = siblings.first, !merged.conflict {
            state.conflicts.removeAll { $0.id == id }
            state.conflicts.append(
                .init(
                    id: id, versions: sibling.versions, payload: sibling.payload, device: sibling.device,
                    valueDevice: sibling.valueDevice))
        }
        return true
    }

    /// Writes a record as it came from the store.
    @discardableResult
    private func applyRemote(
        _ remote: SyncRecord, manifest: inout StateManifest, state: inout SyncState, report: inout SyncReport,
        renameOnClash: Bool = true
    ) throws(VaultError) -> Bool {
        guard var payload = try? remote.payload.withUnsafeBytes({ try Payload(json: $0, label: "a synced record") }),
            payload.grant != nil || remote.deleted
        else {
            throw VaultError(.damaged, "a record from the store holds a malformed grant")
        }
        var hash = try vault.keys.nameHash(payload.name)
        if !remote.deleted, let other = try vault.findRow(nameHash: hash, deleted: false), other.id != remote.id {
            // The name may be freed by another record of this round (a
            // rename or removal in another bucket): written after it.
            guard renameOnClash else { return false }
            // Two machines added a grant of the same name: keep both.
            payload.name = String(payload.name.prefix(58)) + "+" + Array(remote.id.prefix(2)).hex
            hash = try vault.keys.nameHash(payload.name)
            report.renamed.append(payload.name)
        }
        let version = (manifest.entries[remote.id]?.version ?? 0) + 1
        try vault.putRow(
            try vault.keys.seal(payload, id: remote.id, version: version, deleted: remote.deleted, nameHash: hash))
        manifest.entries[remote.id] = .init(version: version, deleted: remote.deleted)
        // The record's conflict comes with it: it dominates what was known
        // here, so its siblings (none once someone picked) are the truth.
        let known = state.conflicts.contains { $0.id == remote.id }
        state.conflicts.removeAll { $0.id == remote.id }
        for sibling in remote.siblings.prefix(1) {
            state.conflicts.append(
                .init(
                    id: remote.id, versions: sibling.versions, payload: sibling.payload, device: sibling.device,
                    valueDevice: sibling.valueDevice))
        }
        if !known && !remote.siblings.isEmpty { report.conflicts.append(payload.name) }
        // A renamed arrival is a local change: pushed with a raised vector.
        let renamed = payload.name != remote.payload.withUnsafeBytes({ Payload.read($0) })?.name
        state.bases[remote.id] = .init(localVersion: renamed ? 0 : version, versions: remote.versions)
        return true
    }

    struct Outgoing {
        var record: SyncRecord
        var localVersion: UInt64
        var changed: Bool
    }

    /// For each bucket with a local change, all its records as they should
    /// be in the store.
    private func pendingBuckets(state: SyncState, manifest: StateManifest) throws(VaultError) -> [Int: [Outgoing]] {
        var byBucket: [Int: [StoredRecord]] = [:]
        for row in try vault.allRows() {
            try vault.check(row, against: manifest)
            byBucket[Int(row.id[0]), default: []].append(row)
        }
        var out: [Int: [Outgoing]] = [:]
        for (i, rows) in byBucket {
            let dirty = rows.contains { row in state.bases[row.id].map { $0.localVersion != row.version } ?? true }
            guard dirty else { continue }
            var records: [Outgoing] = []
            for row in rows.sorted(by: { $0.id.lexicographicallyPrecedes($1.id) }) {
                let base = state.bases[row.id]
                // Sent again as it was (the store lost it), or changed here.
                let changed =
                    base.map { $0.localVersion != row.version && $0.localVersion != SyncState.Base.resend } ?? true
                let versions = changed ? VersionVector.bumped(base?.versions ?? [], by: state.device) : base!.versions
                var payload = try vault.keys.open(row)
                if row.deleted { payload.grant = nil }
                // A conflict travels with its record until someone picks.
                let siblings = state.conflicts.filter { $0.id == row.id }.map {
                    SyncSibling(
                        versions: $0.versions, deleted: $0.payload.withUnsafeBytes { Payload.read($0) }?.grant == nil,
                        payload: $0.payload, device: $0.device, valueDevice: $0.valueDevice)
                }
                records.append(
                    Outgoing(
                        record: SyncRecord(
                            id: row.id, versions: versions, deleted: row.deleted,
                            payload: try payload.sealedBytes().unsafeCopyToArray(), siblings: siblings),
                        localVersion: row.version, changed: changed))
            }
            out[i] = records
        }
        return out
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
