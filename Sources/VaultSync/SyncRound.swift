internal import VaultCore

/// One round of a sync (docs/sync.md, "A sync"): what its six steps share,
/// and one method per step, called in order by `SyncEngine.sync`. A step
/// that finds another writer got in between returns false, and the engine
/// starts a new round; the report carries over.
struct SyncRound {
    /// The engine of the vault that syncs.
    let engine: SyncEngine
    /// The store it syncs through.
    let store: any SyncStore
    /// The vault's sync keys.
    let keys: SyncKeys
    /// What the sync did so far, this round's work included.
    var report: SyncReport
    /// The sync settings as of the round's start, then as merged in step 3.
    private(set) var state: SyncState
    /// Step 1: the store's root (nil: it has none yet), its object and its
    /// hash (zeros without one).
    private(set) var root: SyncRoot?
    private(set) var rootObject: StoredObject?
    private(set) var rootHash = [UInt8](repeating: 0, count: 32)
    /// Step 1: this machine's clock and the store's in the store's answer
    /// (nil without a `Date`): what the records this round sends are
    /// labelled with, so that readers can take their times into their own
    /// clocks (docs/sync.md, "Times from another machine").
    private(set) var transit: TransitClock?
    /// Step 2: the records of each bucket that changed since it was last
    /// merged (none for a bucket that is gone). Their payloads are grants
    /// in the clear, so step 3 lets go of them once merged.
    private(set) var fetched: [Int: [SyncRecord]] = [:]
    /// Step 4: per bucket with a local change, all its records as sent
    /// (grants in the clear too: let go of after step 5).
    private(set) var outgoing: [Int: [SyncEngine.Outgoing]] = [:]
    /// Step 4: the root written (nil: nothing was written) and its hash.
    private(set) var written: SyncRoot?
    private var writtenHash: [UInt8] = []
    /// Step 4: the bucket objects uploaded, and those the written root no
    /// longer names.
    private var uploaded: [[UInt8]] = []
    private var replaced: [[UInt8]] = []
    /// Step 4: the base of each record sent, recorded once the root is ours.
    private var pushedBases: [[UInt8]: SyncState.Base] = [:]
    /// Step 4: this machine's standing leases that the root renews, as
    /// they are held once it is ours.
    private var renewed: [[UInt8]: HeldLeases.Held] = [:]
    /// The refresh locks of the standing leases step 4 renews, held until
    /// step 5 has noted the renewals (or the round ends).
    private var renewalLocks: [GrantLock] = []

    /// A round starting from the sync settings as they are now.
    init(engine: SyncEngine, store: any SyncStore, keys: SyncKeys, report: SyncReport = SyncReport())
        throws(VaultError)
    {
        self.engine = engine
        self.store = store
        self.keys = keys
        self.report = report
        state = try engine.loadSyncState(keys)
    }

    var vault: Vault { engine.vault }

    /// 1. Reads the root and checks it against what this machine accepted
    /// before: a rollback or a fork is refused, a lost update of ours is
    /// noted (`report.repaired`) and pushed again below.
    mutating func readRoot() throws(VaultError) {
        let fetched = try engine.fetchRoot(store, keys)
        // Read after the answer arrived: the store's date is no later than
        // this, so a lifetime measured from it is never overstated.
        let heard = vault.time.now().timeIntervalSince1970
        transit = store.lastDate.map { TransitClock(writer: Int64(heard.rounded(.down)), store: $0) }
        guard let fetchedRoot = fetched else {
            guard state.markEpoch == 0 else {
                throw VaultError(
                    .tampered,
                    "the store has no root, but this machine synced its epoch \(state.markEpoch): the store was emptied or rolled back",
                    remedy: .checkStore)
            }
            return
        }
        rootObject = fetchedRoot.object
        rootHash = try SyncRoot.hash(fetchedRoot.object.bytes)
        if try checkMark(fetchedRoot.root, hash: rootHash) { report.repaired = true }
        root = fetchedRoot.root
    }

    /// 2. Reads the buckets that changed since they were last merged. False
    /// when one is gone because a newer root replaced the one read (read
    /// again); a bucket the current root names but the store lost is
    /// refused on a store that honours preconditions.
    mutating func fetchChangedBuckets() throws(VaultError) -> Bool {
        for i in 0..<256 {
            let ref = root?.buckets[i]
            guard (ref?.hash ?? Array(repeating: 0, count: 32)) != state.bucketHashes[i] else { continue }
            guard let ref else {
                fetched[i] = []
                continue
            }
            // Read before the request: the store answered after this.
            let sent = vault.time.now().timeIntervalSince1970
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
                        remedy: .checkStore)
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
            let arrival = store.lastDate.map { (sent: sent, store: $0) }
            fetched[i] = try SyncBucket(
                decoding: object.bytes, keys: keys, vaultID: vault.header.vaultID, keyEpoch: vault.header.keyEpoch,
                index: UInt8(i)
            ).records.map { (record: SyncRecord) throws(VaultError) -> SyncRecord in
                try SyncRound.local(record, arrival: arrival)
            }
        }
        return true
    }

    /// 3. Merges the fetched records into the local vault, with the new
    /// mark, in one transaction.
    mutating func mergeFetched() throws(VaultError) {
        try vault.update { (manifest: inout StateManifest) throws(VaultError) in
            state = try engine.loadSyncState(keys)
            try engine.merge(fetched, into: &manifest, state: &state, report: &report)
            for (i, _) in fetched { state.bucketHashes[i] = root?.buckets[i]?.hash ?? Array(repeating: 0, count: 32) }
            if let root {
                state.markEpoch = root.epoch
                state.markHash = rootHash
                state.markParent = root.parent
                _ = try engine.observeLeases(root, keys: keys)
            }
            try engine.saveSyncState(state, keys)
        }
        fetched.removeAll()
        if root != nil { vault.syncTrace?(.merged(rootHash: rootHash)) }
    }

    /// 4. Writes what this machine has that the store has not: a new object
    /// per changed bucket, then a root naming them in place of the one read
    /// in step 1 (a compare-and-swap where the store has validators). Writes
    /// nothing when there is nothing to send and the store has a root; an
    /// empty vault is published too, so that other machines can join.
    /// False when, on a store that ignores preconditions, the root moved
    /// since step 1: the root is not written (read again).
    mutating func writeOutgoing() throws(VaultError) -> Bool {
        let engine = engine
        let state = state
        // A root this machine writes ends its leases on records that no
        // process of the machine is refreshing (the refresh lock is free:
        // its holder stored its tokens, or died). Looked at before the
        // records are read, so a refresh finished by then is in them: every
        // record is then either in this push or already in the store. A
        // refresh under way keeps its lease until it has stored what it spent.
        //
        // A standing lease (docs/sync.md, "Refresh rights while the store is
        // away") is kept instead, renewed once half of it has gone, while
        // this machine holds it by its own clock; it ends when another
        // machine asked for it, or when this machine no longer holds it.
        // The refresh locks of the standing leases this round ends are held
        // until the write (`leasesToEnd` let go of them in this machine's
        // file first).
        let (ending, renewing, locks) = try leasesToEnd()
        defer { for lock in locks { lock.release() } }
        let transit = transit
        outgoing = try vault.read { (manifest: StateManifest) throws(VaultError) in
            try engine.pendingBuckets(state: state, manifest: manifest, transit: transit)
        }
        // Nothing to send, no lease to end or renew: no write.
        if outgoing.isEmpty, root != nil, ending.isEmpty, renewing.isEmpty { return true }
        var next = try nextRoot(ending: ending, renewing: renewing)
        try uploadOutgoing(into: &next)
        let rootBytes = try next.encoded(with: keys)
        guard try putRoot(rootBytes) else { return false }
        written = next
        writtenHash = try SyncRoot.hash(rootBytes)
        return true
    }

    /// Step 4's root before its buckets: the one read in step 1 (or a first
    /// one) one epoch on, written by this machine, with this machine's
    /// leases in `ending` gone and those in `renewing` renewed.
    private mutating func nextRoot(ending: Set<[UInt8]>, renewing: [[UInt8]: HeldLeases.Held]) throws(VaultError)
        -> SyncRoot
    {
        let device = state.device
        var next =
            root
            ?? SyncRoot(
                vaultID: vault.header.vaultID, keyEpoch: vault.header.keyEpoch, epoch: 0, writer: device,
                parent: Array(repeating: 0, count: 32))
        if let root {
            next.ancestry = Array(([(root.epoch, rootHash)] + root.ancestry).prefix(SyncRoot.maxAncestry))
        }
        next.epoch += 1
        next.writer = device
        next.parent = root == nil ? Array(repeating: 0, count: 32) : rootHash
        next.devices = next.devices.filter { $0.id != device } + [(device, next.epoch)]
        // This machine's leases end as above; other leases stay while they
        // are active by this machine's observation.
        next.leases = try engine.activeLeases(next, keys: keys).filter {
            !($0.device == device && !$0.isWant && ending.contains($0.record))
        }
        renewed = [:]
        for (i, lease) in next.leases.enumerated()
        where lease.device == device && !lease.isWant && renewing[lease.record] != nil {
            next.leases[i].id = renewing[lease.record]!.id
            renewed[lease.record] = renewing[lease.record]
        }
        return next
    }

    /// Step 4's bucket objects: one per bucket in `outgoing`, uploaded and
    /// named by `next` in place of the object it replaces.
    private mutating func uploadOutgoing(into next: inout SyncRoot) throws(VaultError) {
        // In bucket order: the same requests in the same order on every run.
        for (i, records) in outgoing.sorted(by: { $0.key < $1.key }) {
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
    }

    /// Step 4's root write, in place of the root read in step 1. False when
    /// it was not written (read again): on a store that ignores
    /// preconditions, the root moved since step 1 or the one try failed.
    private mutating func putRoot(_ rootBytes: [UInt8]) throws(VaultError) -> Bool {
        // A store that ignores If-Match lets this write replace a root that
        // another machine wrote since step 1, and that machine's update
        // would be lost without it knowing: look once more just before.
        if !state.honoursPreconditions, try engine.lookAgain(at: rootObject?.bytes, in: store) == nil {
            try letGo()
            return false
        }
        let precondition: WritePrecondition =
            rootObject.map { $0.etag.map(WritePrecondition.matches) ?? .none } ?? .absent
        // A refusal (412) is not the last word: when the store applied an
        // earlier try of this request and its answer was lost, the try
        // after it is refused by our own root. Either way, what the store
        // holds now decides, read back in step 5.
        if state.honoursPreconditions {
            _ = try store.put(SyncEngine.rootName, rootBytes, precondition: precondition)
            return true
        }
        // Sent once (docs/sync.md, "Stores that ignore preconditions"):
        // after a failure (rclone's 423 while another write of the root
        // runs, a 5xx, a broken connection), the next round looks again;
        // if this write landed after all, that round finds it.
        do {
            _ = try store.putOnce(SyncEngine.rootName, rootBytes, precondition: precondition)
        } catch {
            guard error.code == .transient else { throw error }
            try letGo()
            return false
        }
        return true
    }

    /// 5. Reads the root back, when step 4 wrote one: the store may have
    /// refused it, or (ignoring preconditions) let another writer win.
    /// False when it is not ours; otherwise it becomes the new mark.
    mutating func readBack() throws(VaultError) -> Bool {
        defer {
            outgoing.removeAll()
            for lock in renewalLocks { lock.release() }
            renewalLocks.removeAll()
        }
        guard let next = written else { return true }
        let check = try store.get(SyncEngine.rootName)
        guard let check, try SyncRoot.hash(check.bytes) == writtenHash else {
            try letGo()
            return false
        }
        let engine = engine
        let keys = keys
        let newHash = writtenHash
        let outgoing = outgoing
        let pushedBases = pushedBases
        let renewed = renewed
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try engine.loadSyncState(keys)
            s.markEpoch = next.epoch
            s.markHash = newHash
            s.markParent = next.parent
            for (i, _) in outgoing { s.bucketHashes[i] = next.buckets[i]!.hash }
            for (id, base) in pushedBases { s.bases[id] = base }
            try engine.saveSyncState(s, keys)
        }
        // A store that ignores If-Match can still take the write of a
        // machine that read the root before ours and looked again just
        // before ours landed: look once more a moment later. When ours was
        // replaced, the next round finds the lost update and sends it again.
        if !state.honoursPreconditions {
            vault.pacing.sleep(SyncEngine.rootSettle)
            guard try store.get(SyncEngine.rootName)?.bytes == check.bytes else {
                try letGo()
                return false
            }
        }
        // Renewed standing leases count from now on, once the root is ours.
        if !renewed.isEmpty {
            try vault.update { (_: inout StateManifest) throws(VaultError) in
                try engine.updateHeldLeases(keys) { held in
                    for (record, h) in renewed where held.held[record] != nil { held.set(record, h) }
                }
            }
        }
        return true
    }

    /// Step 4: the records whose lease of this machine the root written
    /// ends, and the standing leases it renews (with the new id, from now
    /// on the boot clock, before the write). A standing lease ends when
    /// another machine asked for it, when this machine no longer holds it
    /// by its own clock (`HeldLeases`), or when its grant no longer needs
    /// one (removed, dead, or its refresh token does not rotate); this
    /// machine lets go of it before the write, so it never refreshes alone
    /// under a lease that another machine may take. A lease of a refresh
    /// under way is kept.
    ///
    /// A standing lease is let go of or renewed only with its grant's
    /// refresh lock: a process of this machine deciding to refresh alone
    /// under it (the store away for that process a moment ago) has done
    /// so, or waits and then finds the lease gone, or renewed. A lease whose
    /// lock is taken stays as it is, for the next round. The locks of
    /// renewals are held until the read-back has noted the new leases
    /// (`renewalLocks`); a renewal that turns a lease quiet is noted as
    /// quiet before the write, so that however the write ends, no process
    /// refreshes alone under a lease the others may read as quiet.
    private mutating func leasesToEnd() throws(VaultError) -> (Set<[UInt8]>, [[UInt8]: HeldLeases.Held], [GrantLock]) {
        let leases = root?.leases ?? []
        let now = vault.pacing.boot().seconds
        let held = try engine.heldLeases(keys)
        var ending = Set<[UInt8]>()
        var renewing: [[UInt8]: HeldLeases.Held] = [:]
        for lease in leases
        where lease.device == state.device && !lease.isWant && !vault.refreshInProgress(record: lease.record) {
            let standing = lease.isStanding
            let asked = leases.contains { $0.record == lease.record && $0.device != state.device && $0.isWant }
            guard standing, let mine = held.held[lease.record], HeldLeases.same(mine.id, lease.id),
                held.lets(lease.record, now: now, request: 0), !asked,
                let quiet = try engine.quietRenewal(lease.record, seconds: lease.seconds)
            else {
                ending.insert(lease.record)
                continue
            }
            // Renewed once half of it has gone, or at once when it can turn
            // quiet (the new tokens of the refresh it was taken for are in).
            if now - mine.since > Double(lease.seconds) / 2 || (quiet && !lease.isQuiet) {
                renewing[lease.record] = .init(
                    id: try SyncEngine.leaseID(quiet: quiet), since: now, seconds: lease.seconds)
            }
        }
        var locks: [GrantLock] = []
        var letGo: [[UInt8]] = []
        for record in ending where held.held[record] != nil {
            guard let lock = GrantLock.take(directory: vault.location.directory, record: record) else {
                ending.remove(record)
                continue
            }
            locks.append(lock)
            letGo.append(record)
        }
        var promised: [[UInt8]] = []
        for (record, renewal) in renewing {
            guard let lock = GrantLock.take(directory: vault.location.directory, record: record) else {
                renewing[record] = nil
                continue
            }
            renewalLocks.append(lock)
            if renewal.id & SyncEngine.quietFlag != 0 { promised.append(record) }
        }
        if !letGo.isEmpty || !promised.isEmpty {
            try vault.update { (_: inout StateManifest) throws(VaultError) in
                try engine.updateHeldLeases(keys) { h in
                    for record in letGo { h.set(record, nil) }
                    for record in promised { h.promiseQuiet(record) }
                }
            }
        }
        return (ending, renewing, locks)
    }

    /// After a round whose write the root moved under, on a store that
    /// ignores preconditions: tells the user the other machines must sync
    /// (`report.rootMoved`), and remembers for collection what this round
    /// uploaded and what its root let go. Its root may have been stored for
    /// a while and read by a writer whose root names them, or replaced by
    /// one that names none: collected later, if no root names them then.
    private mutating func letGo() throws(VaultError) {
        if !state.honoursPreconditions { report.rootMoved = true }
        try retire(uploaded + replaced)
    }

    /// 6. Lets go of the buckets the written root no longer names, and
    /// deletes those let go long enough ago. A root written beside ours may
    /// still name them: on a store that ignores If-Match, and even on one
    /// that checks two writers' If-Match before either writes (Apache).
    /// They are deleted later (docs/sync.md, "Collecting old objects"), so
    /// that a root naming a missing bucket always means the store lost it.
    mutating func collectOldObjects() throws(VaultError) {
        try retire(replaced)
        guard let current = written ?? root else { return }
        try collect(current: current)
    }

    /// Remembers bucket objects that the root just written no longer names.
    private func retire(_ names: [[UInt8]]) throws(VaultError) {
        guard !names.isEmpty else { return }
        let now = vault.time.now().epochSeconds
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try engine.loadSyncState(keys)
            for name in names where !s.garbage.contains(where: { $0.name == name }) {
                s.garbage.append(.init(name: name, since: now))
            }
            s.garbage = Array(s.garbage.suffix(SyncEngine.maxGarbage))
            try engine.saveSyncState(s, keys)
        }
    }

    /// Deletes remembered objects that are safe to delete: the current root
    /// does not name them, and they were let go `garbageGrace` ago by this
    /// machine's clock, longer than any writer that read a root naming them
    /// takes to write its own. One the current root names again (a root
    /// that overwrote ours) is forgotten: whoever replaces it lets it go.
    private mutating func collect(current: SyncRoot) throws(VaultError) {
        let state = try engine.loadSyncState(keys)
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
            var s = try engine.loadSyncState(keys)
            s.garbage = s.garbage.filter { g in keep.contains(g) || !state.garbage.contains(g) }
            try engine.saveSyncState(s, keys)
        }
    }

    /// Seconds taken off a lifetime carried from another machine: the
    /// store's dates have whole seconds, and so does the writer's label.
    static let transitMargin: Double = 2

    /// `record` with its payloads' times in this machine's clock. A record
    /// labelled with its writer's clocks (`TransitClock`) keeps, of each
    /// time, the lifetime it had by the writer's clock, less the time that
    /// passed by the store's between the writer's last answer and ours,
    /// counted from when this machine sent its request: no two machines'
    /// clocks are compared, and a token never looks fresher than it is,
    /// whatever either clock says. A record without the label (written by
    /// an older release), or an answer without a date, keeps its times as
    /// written.
    static func local(_ record: SyncRecord, arrival: (sent: Double, store: Int64)?) throws(VaultError) -> SyncRecord {
        func moved(_ bytes: [UInt8]) throws(VaultError) -> [UInt8] {
            guard var payload = bytes.withUnsafeBytes({ Payload.read($0) }), let transit = payload.transit else {
                return bytes
            }
            if let arrival {
                let elapsed = Double(max(0, arrival.store - transit.store))
                payload = payload.shiftingTimes(
                    by: arrival.sent - Double(transit.writer) - elapsed - SyncRound.transitMargin)
            } else {
                payload.transit = nil
            }
            return try payload.sealedBytes().unsafeCopyToArray()
        }
        var out = record
        out.payload = try moved(record.payload)
        for i in out.siblings.indices { out.siblings[i].payload = try moved(out.siblings[i].payload) }
        return out
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
    func checkMark(_ root: SyncRoot, hash: [UInt8]) throws(VaultError) -> Bool {
        guard state.markEpoch > 0 else { return false }
        if root.epoch == state.markEpoch && hash == state.markHash { return false }
        if root.epoch < state.markEpoch {
            if !state.honoursPreconditions { return true }
            throw VaultError(
                .tampered,
                "the store's root is older (epoch \(root.epoch)) than one this machine accepted (epoch \(state.markEpoch)): a rollback",
                remedy: .checkStore)
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
            remedy: .checkStore)
    }
}
