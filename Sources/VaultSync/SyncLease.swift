internal import FoundationEssentials
internal import Glibc
internal import VaultCore
internal import VaultCrypto

extension SyncEngine {
    /// How long a lease lets its holder refresh: the token request's own
    /// timeout and the writes around it fit well inside.
    static let leaseSeconds: UInt32 = 45
    /// How long a machine waits for another machine's lease: longer than a
    /// lease, so a lease left by a machine that died is taken over.
    static let leaseWait: Double = 60
    /// Lease writes the store refuses, in a row, with no other writer
    /// moving its root, before the store is taken as unusable for now.
    static let leaseRefusals = 5
    /// Seconds between the two read-backs of a lease.
    static let leaseSettle = 0.4

    /// Before refreshing a synced grant: syncs, and returns the grant when
    /// it arrived fresh from another machine (nothing to spend); otherwise
    /// takes the store's refresh lease for it and returns nil. Waits while
    /// another machine's lease is active by this machine's observation.
    func leaseForRefresh(_ name: String, minimumValidity: Double?, timeout: Double)
        throws(VaultError) -> Grant?
    {
        let keys = try syncKeys()
        return try leaseForRefresh(
            name, minimumValidity: minimumValidity, through: try store(for: try loadSyncState(keys), timeout: timeout),
            keys: keys)
    }

    /// `leaseForRefresh` through `store`.
    func leaseForRefresh(_ name: String, minimumValidity: Double?, through store: any SyncStore, keys: SyncKeys)
        throws(VaultError) -> Grant?
    {
        let pacing = vault.pacing
        let deadline = pacing.monotonic() + SyncEngine.leaseWait
        var refusals = 0
        var changes = 0
        while true {
            // Other machines writing all the while (busy), or answers lost
            // while the store answers other requests (transient, with new
            // answers): the store works, and another machine may hold or
            // take the lease. Keep trying, after a pause; never refresh
            // beside it, not even when the wait runs out (then: busy).
            func goOn(after error: VaultError, since answered: Int) throws(VaultError) {
                let answering = error.code == .transient && store.answerCount > answered
                guard error.code == .busy || answering else { throw error }
                guard pacing.monotonic() < deadline else {
                    throw VaultError(
                        .busy, "the store answers, but kept this machine from taking the lease on '\(name)'",
                        remedy: .tryAgainInAMinute)
                }
                pacing.pause(upTo: 0.3)
            }
            var answered = store.answerCount
            do {
                _ = try sync(through: store, keys: keys)
            } catch {
                try goOn(after: error, since: answered)
                continue
            }
            let grant = try vault.load(name)
            if let minimumValidity, vault.usable(grant, minimumValidity) { return grant }
            let id = try vault.read { (_: StateManifest) throws(VaultError) in
                try vault.findRow(nameHash: try vault.keys.nameHash(name), deleted: false)?.id
            }
            guard let id else { throw VaultError(.notFound, "grant '\(name)' not found") }
            answered = store.answerCount
            let outcome: LeaseOutcome
            do {
                outcome = try takeLease(id, store: store, keys: keys)
            } catch {
                try goOn(after: error, since: answered)
                continue
            }
            if outcome == .taken { return nil }
            // A store that refuses every write while nobody else writes
            // cannot hold a lease: it is as good as away. One whose root
            // moves under our writes is busy, not away: another machine
            // may be taking the lease, so this one never refreshes beside it.
            refusals = outcome == .refused ? refusals + 1 : 0
            guard refusals < SyncEngine.leaseRefusals else {
                throw VaultError(.transient, "the store refused \(refusals) lease writes in a row")
            }
            guard pacing.monotonic() < deadline else {
                throw VaultError(
                    .busy, "another machine is refreshing '\(name)', or the store keeps changing",
                    remedy: .tryAgainInAMinute)
            }
            changes = outcome == .changed ? min(changes + 1, 8) : 0
            if outcome == .held {
                pacing.sleep(1)
            } else {
                pacing.pause(upTo: 0.25 * Double(changes + 1))
            }
        }
    }

    enum LeaseOutcome { case taken, held, changed, refused }

    /// Writes a root that adds this machine's lease on `record`: `held` when
    /// another machine's lease is active, `changed` when the root moved on
    /// since the last sync (sync again first), `refused` when the store
    /// refused the write though no one else wrote.
    func takeLease(_ record: [UInt8], store: any SyncStore, keys: SyncKeys) throws(VaultError) -> LeaseOutcome {
        // The lease counts from before it is written: the holder's use of
        // it ends no later than any observer's judgement that it expired.
        let start = vault.pacing.monotonic()
        let state = try loadSyncState(keys)
        guard let (object, root) = try fetchRoot(store, keys) else { return .changed }
        let hash = try SyncRoot.hash(object.bytes)
        guard hash == state.markHash else { return .changed }
        let active = try activeLeases(root, keys: keys)
        // Processes of this machine refreshing one grant are serialized by
        // its lock, so a lease of this device on the record is replaced.
        if active.contains(where: { $0.record == record && $0.device != state.device }) { return .held }
        var next = root
        next.ancestry = Array(([(root.epoch, hash)] + root.ancestry).prefix(SyncRoot.maxAncestry))
        next.epoch += 1
        next.writer = state.device
        next.parent = hash
        next.devices = next.devices.filter { $0.id != state.device } + [(state.device, next.epoch)]
        let id = try Secure.randomBytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        next.leases =
            active.filter { $0.record != record }
            + [.init(record: record, device: state.device, id: id, seconds: SyncEngine.leaseSeconds)]
        let bytes = try next.encoded(with: keys)
        let newHash = try SyncRoot.hash(bytes)
        // A store that ignores If-Match would let this write replace a root
        // written since the one read above (its answer may have been slow),
        // new tokens and the end of another machine's lease included.
        var looked: Double?
        if !state.honoursPreconditions {
            looked = try lookAgain(at: object.bytes, in: store)
            if looked == nil { return .changed }
        }
        let precondition = object.etag.map(WritePrecondition.matches) ?? .none
        let written =
            state.honoursPreconditions
            ? try store.put(SyncEngine.rootName, bytes, precondition: precondition)
            : try store.putOnce(SyncEngine.rootName, bytes, precondition: precondition)
        // Our write landed some time before its answer: when that was late,
        // it may have replaced a root whose writer already read it back and
        // stopped looking. The lease is then not trusted: start again.
        if let looked, vault.pacing.monotonic() - looked >= SyncEngine.rootSettle { return .changed }
        if written != .stored {
            // A 412 may answer our own write sent again after its first
            // answer was lost: what the store holds decides.
            let now = try store.get(SyncEngine.rootName)
            let current = try now.map { (o: StoredObject) throws(VaultError) in try SyncRoot.hash(o.bytes) }
            if current == hash { return .refused }
            if current != newHash { return .changed }
        }
        // Read back now, and again a moment later: a store may evaluate
        // If-Match for two writers before either writes, and the second
        // write then lands after the first writer's check.
        for pause in [0, state.honoursPreconditions ? SyncEngine.leaseSettle : SyncEngine.rootSettle] {
            vault.pacing.sleep(pause)
            let check = try store.get(SyncEngine.rootName)
            guard let check, try SyncRoot.hash(check.bytes) == newHash else { return .changed }
        }
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.markEpoch = next.epoch
            s.markHash = newHash
            s.markParent = next.parent
            try saveSyncState(s, keys)
        }
        // Too much of the lease went on taking it: the refresh might outlast
        // it. Take a new one.
        let used = vault.pacing.monotonic() - start
        guard used + TokenRefresher.requestTimeout + 10 < Double(SyncEngine.leaseSeconds) else { return .changed }
        return .taken
    }
}
