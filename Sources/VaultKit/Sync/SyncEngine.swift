public import FoundationEssentials
internal import Glibc
public import VaultCrypto
public import VaultHTTP
internal import VaultStorage

/// What one `sync` did.
public struct SyncReport: Sendable, Equatable {
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
    public var bytesSent = 0
}

extension Vault {
    static let syncMetaKey = "sync"
    static let rootName = "vault-root"
    static let keysName = "vault-keys"
    static let syncAttempts = 5

    /// True when this vault syncs with a store.
    public var syncConfigured: Bool { (try? getMeta(Vault.syncMetaKey)) != nil }

    func syncKeys() throws(VaultError) -> SyncKeys { try SyncKeys(masterKey: try requireMasterKey()) }

    func loadSyncState(_ keys: SyncKeys) throws(VaultError) -> SyncState {
        guard let blob = try getMeta(Vault.syncMetaKey) else {
            throw VaultError(.notFound, "this vault has no sync store", hint: "set one with 'vault remote set URL'")
        }
        return try SyncState(decoding: blob, keys: keys, vaultID: header.vaultID)
    }

    func saveSyncState(_ state: SyncState, _ keys: SyncKeys) throws(VaultError) {
        try putMeta(Vault.syncMetaKey, try state.encoded(keys: keys, vaultID: header.vaultID))
    }

    /// Seconds allowed per request to the sync store (`VAULT_STORE_TIMEOUT`).
    nonisolated(unsafe) public static var storeTimeout: Double = 30

    static func store(for state: SyncState, transport: any HTTPTransport) throws(VaultError) -> ObjectStore {
        let password = try wrap { () throws(CryptoError) in try SecureBytes(copying: state.password) }
        do {
            let store = try ObjectStore(
                baseURL: state.url, user: state.user, password: state.user == nil ? nil : password,
                transport: transport, sleep: { usleep(UInt32($0 * 1_000_000)) })
            store.timeout = storeTimeout
            return store
        } catch {
            throw VaultError(.invalidInput, error.reason)
        }
    }

    /// Sets the store this vault syncs with and checks that it answers and
    /// whether it honours preconditions. Nothing is uploaded until `sync`.
    public func setRemote(url: String, user: String?, password: SecureBytes?, transport: any HTTPTransport)
        throws(VaultError)
    {
        let keys = try syncKeys()
        let device: [UInt8]
        if let known = try? loadSyncState(keys).device {
            device = known
        } else {
            device = try wrap { () throws(CryptoError) in try Random.bytes(16) }
        }
        var state = SyncState(url: url, user: user, password: password?.unsafeCopyToArray() ?? [], device: device)
        let store = try Vault.store(for: state, transport: transport)
        let probe = "probe-" + (try wrap { () throws(CryptoError) in try Random.bytes(8) }).hex
        state.preconditions =
            try storeCall { () throws(ObjectStore.Failure) in
                try store.honoursPreconditions(probe: probe)
            } ? 1 : 2
        // Another store: nothing known about it yet.
        try update { (_: inout StateManifest) throws(VaultError) in try saveSyncState(state, keys) }
    }

    /// Whether the configured store honours preconditions, and its URL.
    public func remoteDescription() throws(VaultError) -> (url: String, user: String?, preconditions: Bool) {
        let state = try loadSyncState(try syncKeys())
        return (state.url, state.user, state.honoursPreconditions)
    }

    // MARK: Sync

    /// Two-way sync with the store (docs/sync.md, "A sync").
    public func sync(transport: any HTTPTransport) throws(VaultError) -> SyncReport {
        let keys = try syncKeys()
        var report = SyncReport()
        let store = try Vault.store(for: try loadSyncState(keys), transport: transport)
        defer {
            report.requests = store.requestCount
            report.bytesSent = store.bytesSent
        }
        for attempt in 1...Vault.syncAttempts {
            if try syncOnce(store: store, keys: keys, report: &report) {
                try publishKeys(store: store, keys: keys)
                report.requests = store.requestCount
                report.bytesSent = store.bytesSent
                return report
            }
            usleep(UInt32(Double.random(in: 0.05...0.25) * Double(attempt) * 1_000_000))
        }
        throw VaultError(
            .transient, "the store kept changing during \(Vault.syncAttempts) attempts; nothing was lost",
            hint: "run 'vault sync' again")
    }

    /// One round; false when another writer got in between (try again).
    private func syncOnce(store: ObjectStore, keys: SyncKeys, report: inout SyncReport) throws(VaultError) -> Bool {
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
            guard let object = try storeCall({ () throws(ObjectStore.Failure) in try store.get(ref.objectName) })
            else {
                // Gone: deleted after a newer root replaced this one (read
                // again), or named by a root that overwrote the one that
                // replaced it on a store ignoring If-Match. Then the
                // records are sent again from the machines that have them.
                if try storeCall({ () throws(ObjectStore.Failure) in try store.get(Vault.rootName) })?.bytes
                    != rootObject?.bytes
                {
                    return false
                }
                fetched[i] = []
                continue
            }
            guard try SyncRoot.hash(object.bytes) == ref.hash else {
                throw VaultError(.tampered, "bucket \(i) of the store does not match its root (changed or replaced)")
            }
            fetched[i] = try SyncBucket(
                decoding: object.bytes, keys: keys, vaultID: header.vaultID, keyEpoch: header.keyEpoch,
                index: UInt8(i)
            ).records
        }
        // 3. Merge into the local vault, with the new mark, in one transaction.
        try update { (manifest: inout StateManifest) throws(VaultError) in
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
        let outgoing = try read { (manifest: StateManifest) throws(VaultError) in
            try pendingBuckets(state: state, manifest: manifest)
        }
        // An empty vault is published too, so that other machines can join.
        if outgoing.isEmpty && root != nil { return true }
        var next =
            root
            ?? SyncRoot(
                vaultID: header.vaultID, keyEpoch: header.keyEpoch, epoch: 0, writer: state.device,
                parent: Array(repeating: 0, count: 32))
        if root != nil {
            next.ancestry = Array(([(root!.epoch, rootHash)] + root!.ancestry).prefix(SyncRoot.maxAncestry))
        }
        next.epoch += 1
        next.writer = state.device
        next.parent = root == nil ? Array(repeating: 0, count: 32) : rootHash
        next.devices = next.devices.filter { $0.id != state.device } + [(state.device, next.epoch)]
        let now = UInt64(max(0, time.now().epochSeconds))
        next.leases = next.leases.filter { $0.device != state.device && $0.expires > now }
        var replaced: [String] = []
        var pushedBases: [[UInt8]: SyncState.Base] = [:]
        for (i, records) in outgoing {
            let bucket = SyncBucket(
                vaultID: header.vaultID, keyEpoch: header.keyEpoch, index: UInt8(i), records: records.map(\.record))
            let (name, bytes) = try bucket.encoded(with: keys)
            _ = try storeCall { () throws(ObjectStore.Failure) in
                try store.put("b-" + name.hex, bytes, precondition: .absent)
            }
            if let old = next.buckets[i] { replaced.append(old.objectName) }
            next.buckets[i] = .init(name: name, hash: try SyncRoot.hash(bytes))
            for r in records {
                pushedBases[r.record.id] = .init(localVersion: r.localVersion, versions: r.record.versions)
            }
            report.pushed += records.filter(\.changed).count
        }
        let rootBytes = try next.encoded(with: keys)
        let precondition: ObjectStore.Precondition =
            rootObject.map { $0.etag.map(ObjectStore.Precondition.matches) ?? .none } ?? .absent
        let written = try storeCall { () throws(ObjectStore.Failure) in
            try store.put(Vault.rootName, rootBytes, precondition: precondition)
        }
        guard written == .stored else { return false }
        // 5. Read it back: a store that ignores preconditions may have let
        // another writer win.
        let check = try storeCall { () throws(ObjectStore.Failure) in try store.get(Vault.rootName) }
        let newHash = try SyncRoot.hash(rootBytes)
        guard let check, try SyncRoot.hash(check.bytes) == newHash else { return false }
        try update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.markEpoch = next.epoch
            s.markHash = newHash
            s.markParent = next.parent
            for (i, _) in outgoing { s.bucketHashes[i] = next.buckets[i]!.hash }
            for (id, base) in pushedBases { s.bases[id] = base }
            try saveSyncState(s, keys)
        }
        // 6. The buckets no root names any more. Not on a store that ignores
        // If-Match: a root that overwrote ours may still name them.
        if state.honoursPreconditions { for name in replaced { try? store.delete(name) } }
        return true
    }

    /// Uploads `vault-keys` again when the keyslots changed since it was last
    /// uploaded (a new passphrase, an added key file), so that machines
    /// joining later use the vault's current ones. No request otherwise.
    private func publishKeys(store: ObjectStore, keys: SyncKeys) throws(VaultError) {
        let bytes = try keysObject()
        let hash = try SyncRoot.hash(bytes)
        guard try loadSyncState(keys).keysHash != hash else { return }
        _ = try storeCall { () throws(ObjectStore.Failure) in try store.put(Vault.keysName, bytes) }
        try update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.keysHash = hash
            try saveSyncState(s, keys)
        }
    }

    /// The store's root, read and authenticated. A read that fails its
    /// checks is tried again twice after a pause: a store may serve a file
    /// while another machine's write replaces it. What still fails is
    /// refused.
    func fetchRoot(_ store: ObjectStore, _ keys: SyncKeys) throws(VaultError) -> (
        object: ObjectStore.Object, root: SyncRoot
    )? {
        var attempt = 0
        while true {
            attempt += 1
            guard let object = try storeCall({ () throws(ObjectStore.Failure) in try store.get(Vault.rootName) }) else {
                return nil
            }
            do {
                let root = try SyncRoot(
                    decoding: object.bytes, keys: keys, vaultID: header.vaultID, keyEpoch: header.keyEpoch)
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
    private func checkMark(_ root: SyncRoot, hash: [UInt8], state: SyncState) throws(VaultError) -> Bool {
        guard state.markEpoch > 0 else { return false }
        if root.epoch < state.markEpoch {
            throw VaultError(
                .tampered,
                "the store's root is older (epoch \(root.epoch)) than one this machine accepted (epoch \(state.markEpoch)): a rollback",
                hint: "check the store; local data is untouched")
        }
        if root.epoch == state.markEpoch && hash == state.markHash { return false }
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
        if sibling || throughSibling { return true }
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
        for row in try allRows() where fetched[Int(row.id[0])] != nil { rows[row.id] = row }
        for (index, records) in fetched.sorted(by: { $0.key < $1.key }) {
            // A record synced before but missing from its bucket now: the
            // store lost it (a write it let another overwrite). Send it again.
            let present = Set(records.map(\.id))
            for (id, _) in rows where Int(id[0]) == index && !present.contains(id) && state.bases[id] != nil {
                state.bases[id]?.localVersion = SyncState.Base.resend
            }
            for remote in records {
                let local = rows[remote.id]
                let base = state.bases[remote.id]
                guard let local else {
                    try applyRemote(remote, manifest: &manifest, state: &state, report: &report)
                    report.pulled += 1
                    continue
                }
                let changed = base == nil || local.version != base!.localVersion
                let mine = changed ? VersionVector.bumped(base?.versions ?? [], by: state.device) : base!.versions
                switch VersionVector.compare(mine, remote.versions) {
                case .equal:
                    if !changed { state.bases[remote.id] = .init(localVersion: local.version, versions: mine) }
                case .newer:
                    // Ours is newer: pushed below (a lost update comes back this way).
                    if !changed { state.bases[remote.id]?.localVersion = SyncState.Base.resend }
                case .older:
                    try applyRemote(remote, manifest: &manifest, state: &state, report: &report)
                    report.pulled += 1
                case .concurrent:
                    let ours = SyncRecord(
                        id: local.id, versions: mine, deleted: local.deleted,
                        payload: try keys.open(local).sealedBytes().unsafeCopyToArray())
                    guard case .conflict(let winner, let loser) = SyncRecord.merge(local: ours, remote: remote) else {
                        continue
                    }
                    if winner == remote { try applyRemote(remote, manifest: &manifest, state: &state, report: &report) }
                    state.conflicts.removeAll { $0.id == loser.id }
                    state.conflicts.append(.init(id: loser.id, versions: loser.versions, payload: loser.payload))
                    // Both sides seen: the merged vector, raised here so the
                    // value dominates both when pushed.
                    state.bases[remote.id] = .init(
                        localVersion: 0, versions: VersionVector.merged(mine, remote.versions))
                    let name = winner.payload.withUnsafeBytes { Payload.read($0) }?.name ?? "a grant"
                    report.conflicts.append(name)
                }
            }
        }
    }

    /// Writes a record as it came from the store.
    private func applyRemote(
        _ remote: SyncRecord, manifest: inout StateManifest, state: inout SyncState, report: inout SyncReport
    ) throws(VaultError) {
        guard var payload = try? remote.payload.withUnsafeBytes({ try Payload(json: $0, label: "a synced record") }),
            payload.grant != nil || remote.deleted
        else {
            throw VaultError(.damaged, "a record from the store holds a malformed grant")
        }
        var hash = try keys.nameHash(payload.name)
        if !remote.deleted, let other = try findRow(nameHash: hash, deleted: false), other.id != remote.id {
            // Two machines added a grant of the same name: keep both.
            payload.name = String(payload.name.prefix(58)) + "+" + Array(remote.id.prefix(2)).hex
            hash = try keys.nameHash(payload.name)
            report.renamed.append(payload.name)
        }
        let version = (manifest.entries[remote.id]?.version ?? 0) + 1
        try putRow(try keys.seal(payload, id: remote.id, version: version, deleted: remote.deleted, nameHash: hash))
        manifest.entries[remote.id] = .init(version: version, deleted: remote.deleted)
        // A renamed arrival is a local change: pushed with a raised vector.
        let renamed = payload.name != remote.payload.withUnsafeBytes({ Payload.read($0) })?.name
        state.bases[remote.id] = .init(localVersion: renamed ? 0 : version, versions: remote.versions)
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
        for row in try allRows() {
            try check(row, against: manifest)
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
                var payload = try keys.open(row)
                if row.deleted { payload.grant = nil }
                records.append(
                    Outgoing(
                        record: SyncRecord(
                            id: row.id, versions: versions, deleted: row.deleted,
                            payload: try payload.sealedBytes().unsafeCopyToArray()),
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
        let headerBlob = try header.encoded()
        w.append(UInt32(headerBlob.count))
        w.append(headerBlob)
        let slots = try storage { () throws(StorageError) in
            let s = try database.prepare("SELECT value FROM keyslots ORDER BY slot")
            var out: [[UInt8]] = []
            while try s.step() { out.append(s.blob(at: 0)) }
            return out
        }
        w.append(UInt16(slots.count))
        for slot in slots {
            w.append(UInt32(slot.count))
            w.append(slot)
        }
        return w.bytes
    }
}

extension Vault {
    static let leaseSeconds: UInt64 = 60
    static let leaseWait: Double = 30
    /// Microseconds between the two read-backs of a lease.
    static let leaseSettle: UInt32 = 400_000

    /// Before refreshing a synced grant: syncs, and returns the grant when
    /// it arrived fresh from another machine (nothing to spend); otherwise
    /// takes the store's refresh lease for it and returns nil. Waits while
    /// another machine holds the lease.
    func leaseForRefresh(_ name: String, minimumValidity: Double?, transport: any HTTPTransport) throws(VaultError)
        -> Grant?
    {
        let keys = try syncKeys()
        let store = try Vault.store(for: try loadSyncState(keys), transport: transport)
        let deadline = time.now().addingTimeInterval(Vault.leaseWait)
        while true {
            _ = try sync(transport: transport)
            let grant = try load(name)
            if let minimumValidity, usable(grant, minimumValidity) { return grant }
            let id = try read { (_: StateManifest) throws(VaultError) in
                try findRow(nameHash: try self.keys.nameHash(name), deleted: false)?.id
            }
            guard let id else { throw VaultError(.notFound, "grant '\(name)' not found") }
            let outcome = try takeLease(id, store: store, keys: keys)
            if outcome == .taken { return nil }
            guard time.now() < deadline else {
                throw VaultError(
                    .transient, "another machine is refreshing '\(name)', or the store keeps changing",
                    hint: "try again in a minute")
            }
            usleep(outcome == .held ? 1_000_000 : UInt32.random(in: 100_000...500_000))
        }
    }

    enum LeaseOutcome { case taken, held, changed }

    /// Writes a root that adds this machine's lease on `record`: `held` when
    /// another machine's lease is current, `changed` when the root moved on
    /// since the last sync (sync again first).
    func takeLease(_ record: [UInt8], store: ObjectStore, keys: SyncKeys) throws(VaultError) -> LeaseOutcome {
        let state = try loadSyncState(keys)
        guard let (object, root) = try fetchRoot(store, keys) else { return .changed }
        let hash = try SyncRoot.hash(object.bytes)
        guard hash == state.markHash else { return .changed }
        let now = UInt64(max(0, time.now().epochSeconds))
        if root.leases.contains(where: { $0.record == record && $0.device != state.device && $0.expires > now }) {
            return .held
        }
        var next = root
        next.ancestry = Array(([(root.epoch, hash)] + root.ancestry).prefix(SyncRoot.maxAncestry))
        next.epoch += 1
        next.writer = state.device
        next.parent = hash
        next.devices = next.devices.filter { $0.id != state.device } + [(state.device, next.epoch)]
        next.leases =
            next.leases.filter { $0.expires > now && $0.record != record }
            + [.init(record: record, device: state.device, expires: now + Vault.leaseSeconds)]
        let bytes = try next.encoded(with: keys)
        let precondition = object.etag.map(ObjectStore.Precondition.matches) ?? .none
        guard
            try storeCall({ () throws(ObjectStore.Failure) in
                try store.put(Vault.rootName, bytes, precondition: precondition)
            })
                == .stored
        else { return .changed }
        let newHash = try SyncRoot.hash(bytes)
        // Read back now, and again a moment later: a store may evaluate
        // If-Match for two writers before either writes, and the second
        // write then lands after the first writer's check.
        for pause in [0, Vault.leaseSettle] {
            usleep(pause)
            let check = try storeCall { () throws(ObjectStore.Failure) in try store.get(Vault.rootName) }
            guard let check, try SyncRoot.hash(check.bytes) == newHash else { return .changed }
        }
        try update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.markEpoch = next.epoch
            s.markHash = newHash
            s.markParent = next.parent
            try saveSyncState(s, keys)
        }
        return .taken
    }
}

/// Runs a store call, mapping its failures to vault errors.
func storeCall<R>(_ body: () throws(ObjectStore.Failure) -> R) throws(VaultError) -> R {
    do {
        return try body()
    } catch {
        switch error.code {
        case .transient: throw VaultError(.transient, error.reason)
        case .unauthorized:
            throw VaultError(.refused, error.reason, hint: "set the store's credentials with 'vault remote set'")
        case .badResponse: throw VaultError(.badResponse, error.reason)
        case .invalid: throw VaultError(.invalidInput, error.reason)
        }
    }
}

extension Vault {
    /// Creates this machine's vault from a store another machine syncs to:
    /// reads `vault-keys`, unlocks one of its keyslots with `key` (the
    /// vault's passphrase or key file), creates the local file with the same
    /// identity and key, and syncs.
    public static func join(
        at location: VaultLocation, url: String, user: String?, password: SecureBytes?, key: KeySource,
        transport: any HTTPTransport, time: any TimeSource = SystemTime()
    ) throws(VaultError) -> (Vault, SyncReport) {
        if Vault.exists(at: location) {
            throw VaultError(.alreadyExists, "a vault already exists at \(location.databasePath)")
        }
        let probe = SyncState(url: url, user: user, password: password?.unsafeCopyToArray() ?? [], device: [])
        let store = try Vault.store(for: probe, transport: transport)
        guard let object = try storeCall({ () throws(ObjectStore.Failure) in try store.get(Vault.keysName) }) else {
            throw VaultError(
                .notFound, "the store has no vault yet",
                hint: "run 'vault remote set' and 'vault sync' on a machine that has it")
        }
        let (header, slots) = try parseKeysObject(object.bytes)
        var masterKey: SecureBytes?
        var tried = 0
        for blob in slots {
            guard let slot = try? Keyslot(decoding: blob, what: "a keyslot of the store"), slot.accepts(key) else {
                continue
            }
            tried += 1
            if let mk = try slot.unwrap(with: key, vaultID: header.vaultID) {
                masterKey = mk
                break
            }
        }
        guard let masterKey else {
            throw VaultError(
                .wrongKey,
                tried == 0 ? "the store's vault has no keyslot of that kind" : "the key does not open the store's vault"
            )
        }
        let vault = try create(at: location, header: header, masterKey: masterKey, slots: slots, time: time)
        do {
            try vault.setRemote(url: url, user: user, password: password, transport: transport)
            return (vault, try vault.sync(transport: transport))
        } catch {
            // Leave no half-joined vault behind: the store still has it all.
            for suffix in ["", "-wal", "-shm"] { FileSystem.remove(location.databasePath + suffix) }
            throw error
        }
    }

    static func parseKeysObject(_ bytes: [UInt8]) throws(VaultError) -> (Header, [[UInt8]]) {
        var r = ByteReader(bytes, what: "the store's keys")
        do { try r.expect("vault-sk") } catch {
            throw VaultError(.damaged, "the store's keys object is not a vault's (wrong magic number)")
        }
        guard try r.u16() == 1 else { throw VaultError(.unsupported, "the store's keys object has an unknown version") }
        let header = try Header(decoding: try r.read(Int(try r.u32())))
        let count = Int(try r.u16())
        guard count <= 64 else { throw VaultError(.damaged, "the store's keys object lists too many keyslots") }
        var slots: [[UInt8]] = []
        for _ in 0..<count { slots.append(try r.read(Int(try r.u32()))) }
        try r.finish()
        return (header, slots)
    }
}

/// Two sides of concurrent changes to one synced grant.
public struct SyncConflict: Sendable {
    /// The grant's name here.
    public let name: String
    /// The side that became the value (on every machine), nil if removed.
    public let current: Grant?
    /// The other side, kept until someone picks; nil if it was a removal.
    public let other: Grant?
}

extension Vault {
    /// The conflicts this machine keeps (docs/sync.md, "Versions and merge").
    public func syncConflicts() throws(VaultError) -> [SyncConflict] {
        let keys = try syncKeys()
        let state = try loadSyncState(keys)
        return try read { (_: StateManifest) throws(VaultError) -> [SyncConflict] in
            let rows = Dictionary(try allRows().map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            return try state.conflicts.map { (c: SyncState.Conflict) throws(VaultError) -> SyncConflict in
                let other = c.payload.withUnsafeBytes { Payload.read($0) }
                let current = try rows[c.id].map { (row: StoredRecord) throws(VaultError) -> Payload in
                    try self.keys.open(row)
                }
                let live = rows[c.id].map { !$0.deleted } ?? false
                return SyncConflict(
                    name: current?.name ?? other?.name ?? "?", current: live ? current?.grant : nil, other: other?.grant
                )
            }.sorted { $0.name < $1.name }
        }
    }

    /// Ends the conflict on `name`: keeps the current value, or makes the
    /// other side the value. Either way the choice is a new change that the
    /// next sync sends, and it dominates both sides everywhere.
    public func resolveConflict(_ name: String, keepOther: Bool) throws(VaultError) {
        let keys = try syncKeys()
        try update { (manifest: inout StateManifest) throws(VaultError) in
            var state = try loadSyncState(keys)
            let hash = try self.keys.nameHash(name)
            var found = try findRow(nameHash: hash, deleted: false)
            if found == nil { found = try findRow(nameHash: hash, deleted: true) }
            guard let row = found, let index = state.conflicts.firstIndex(where: { $0.id == row.id }) else {
                throw VaultError(.notFound, "no conflict on '\(name)'", hint: "'vault conflicts' lists them")
            }
            let conflict = state.conflicts.remove(at: index)
            let version = row.version + 1
            var payload = try self.keys.open(row)
            var deleted = row.deleted
            if keepOther {
                guard let other = conflict.payload.withUnsafeBytes({ Payload.read($0) }) else {
                    throw VaultError(.damaged, "the kept side of '\(name)' is malformed")
                }
                payload.grant = other.grant
                deleted = other.grant == nil
            }
            // Rewritten with a new local version: a change here, which the
            // next sync sends with a raised vector.
            try putRow(
                try self.keys.seal(payload, id: row.id, version: version, deleted: deleted, nameHash: row.nameHash))
            manifest.entries[row.id] = .init(version: version, deleted: deleted)
            state.bases[row.id] = .init(
                localVersion: 0,
                versions: VersionVector.merged(state.bases[row.id]?.versions ?? [], conflict.versions))
            try saveSyncState(state, keys)
        }
    }
}

extension Vault {
    static let pairingLifetime: UInt64 = 600

    /// The store object name and sealing key of a pairing code.
    static func pairingKeys(_ code: SecureBytes) throws(VaultError) -> (name: String, key: SecureBytes) {
        try wrap { () throws(CryptoError) in
            let name = try GenericHash.hash(secret: code, personalization: Array("vault.pairname".utf8), length: 16)
            let key = try GenericHash.hash(secret: code, personalization: Array("vault.pair".utf8), length: 32)
            return ("p-" + name.unsafeCopyToArray().hex, key)
        }
    }

    /// Puts a one-time pairing offer in the store and returns its code: the
    /// master key, the vault header and this machine's high-water mark,
    /// sealed under a key derived from a random 128-bit code, expiring after
    /// ten minutes (docs/sync.md, "Joining").
    public func createPairingOffer(transport: any HTTPTransport) throws(VaultError) -> String {
        let keys = try syncKeys()
        let state = try loadSyncState(keys)
        guard state.markEpoch > 0 else {
            throw VaultError(.invalidInput, "this vault has not synced yet", hint: "run 'vault sync' first")
        }
        let raw = try wrap { () throws(CryptoError) in try Random.bytes(16) }
        let code = try wrap { () throws(CryptoError) in try SecureBytes(copying: raw) }
        let (name, key) = try Vault.pairingKeys(code)
        var w = ByteWriter()
        w.append(UInt64(max(0, time.now().epochSeconds)) + Vault.pairingLifetime)
        let headerBlob = try header.encoded()
        w.append(UInt32(headerBlob.count))
        w.append(headerBlob)
        var mk = try requireMasterKey().unsafeCopyToArray()
        w.append(mk)
        secureZero(&mk)
        w.append(state.markEpoch)
        w.append(state.markHash)
        w.append(state.markParent)
        var plain = w.bytes
        defer { secureZero(&plain) }
        let sealed = try wrap { () throws(CryptoError) in
            let nonce = try Random.bytes(AEAD.nonceLength)
            return nonce
                + (try AEAD.seal(
                    try SecureBytes(copying: plain), key: key, nonce: nonce, associatedData: Array("vault.pair.v1".utf8)
                ))
        }
        let store = try Vault.store(for: state, transport: transport)
        _ = try storeCall { () throws(ObjectStore.Failure) in try store.put(name, sealed, precondition: .absent) }
        return Base64.encodeString(raw, .urlSafeUnpadded)
    }

    /// Joins with a pairing code from `createPairingOffer`: the new vault has
    /// the store's keyslots (it opens with the vault's passphrase or key
    /// files) and starts from the offering machine's high-water mark. The
    /// offer is deleted.
    public static func join(
        at location: VaultLocation, url: String, user: String?, password: SecureBytes?, pairingCode text: String,
        transport: any HTTPTransport, time: any TimeSource = SystemTime()
    ) throws(VaultError) -> (Vault, SyncReport) {
        if Vault.exists(at: location) {
            throw VaultError(.alreadyExists, "a vault already exists at \(location.databasePath)")
        }
        let trimmed = String(text.filter { !$0.isWhitespace })
        guard var raw = Base64.decode(Array(trimmed.utf8), .urlSafeUnpadded), raw.count == 16 else {
            throw VaultError(
                .invalidInput, "that is not a pairing code", hint: "'vault pair' on the other machine prints one")
        }
        defer { secureZero(&raw) }
        let code = try wrap { () throws(CryptoError) in try SecureBytes(copying: raw) }
        let (name, key) = try pairingKeys(code)
        let probe = SyncState(url: url, user: user, password: password?.unsafeCopyToArray() ?? [], device: [])
        let store = try Vault.store(for: probe, transport: transport)
        guard let offer = try storeCall({ () throws(ObjectStore.Failure) in try store.get(name) }),
            offer.bytes.count > AEAD.nonceLength
        else {
            throw VaultError(.notFound, "no pairing offer for that code in the store (used, expired or mistyped)")
        }
        let plain: SecureBytes
        do {
            plain = try AEAD.open(
                Array(offer.bytes[AEAD.nonceLength...]), key: key, nonce: Array(offer.bytes[..<AEAD.nonceLength]),
                associatedData: Array("vault.pair.v1".utf8))
        } catch {
            throw VaultError(.tampered, "the pairing offer failed authentication (changed in the store)")
        }
        var bytes = plain.unsafeCopyToArray()
        defer { secureZero(&bytes) }
        var r = ByteReader(bytes, what: "the pairing offer")
        let expires = try r.u64()
        guard UInt64(max(0, time.now().epochSeconds)) <= expires else {
            try? store.delete(name)
            throw VaultError(.invalidInput, "the pairing code has expired", hint: "run 'vault pair' again")
        }
        let header = try Header(decoding: try r.read(Int(try r.u32())))
        var keyBytes = try r.read(32)
        defer { secureZero(&keyBytes) }
        let masterKey = try wrap { () throws(CryptoError) in try SecureBytes(copying: keyBytes) }
        let mark = (epoch: try r.u64(), hash: try r.read(32), parent: try r.read(32))
        try r.finish()
        guard let keysObject = try storeCall({ () throws(ObjectStore.Failure) in try store.get(Vault.keysName) })
        else { throw VaultError(.notFound, "the store has no vault keys object") }
        let (storedHeader, slots) = try parseKeysObject(keysObject.bytes)
        guard storedHeader.vaultID == header.vaultID else {
            throw VaultError(.tampered, "the store's keys belong to another vault than the pairing offer")
        }
        let vault = try create(at: location, header: header, masterKey: masterKey, slots: slots, time: time)
        do {
            try vault.setRemote(url: url, user: user, password: password, transport: transport)
            let syncKeys = try vault.syncKeys()
            try vault.update { (_: inout StateManifest) throws(VaultError) in
                var state = try vault.loadSyncState(syncKeys)
                (state.markEpoch, state.markHash, state.markParent) = mark
                try vault.saveSyncState(state, syncKeys)
            }
            let report = try vault.sync(transport: transport)
            try? store.delete(name)
            return (vault, report)
        } catch {
            for suffix in ["", "-wal", "-shm"] { FileSystem.remove(location.databasePath + suffix) }
            throw error
        }
    }
}
