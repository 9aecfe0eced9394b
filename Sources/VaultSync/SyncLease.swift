internal import FoundationEssentials
internal import Glibc
package import VaultCore
internal import VaultCrypto

extension SyncEngine {
    /// How long a lease lets its holder refresh: the token request's own
    /// timeout and the writes around it fit well inside.
    static let leaseSeconds: UInt32 = 45
    /// How long a machine waits for another machine's lease: longer than a
    /// lease, so a lease left by a machine that died is taken over.
    static let leaseWait: Double = 60
    /// How long a machine waits for the tokens of a refresh under another
    /// machine's standing lease before it leaves the grant to that machine:
    /// a refresh under way sends them within seconds.
    static let standingWait: Double = 15
    /// Lease writes the store refuses, in a row, with no other writer
    /// moving its root, before the store is taken as unusable for now.
    static let leaseRefusals = 5
    /// Seconds between the two read-backs of a lease.
    static let leaseSettle = 0.4
    /// How long a standing lease lasts (docs/sync.md, "Refresh rights while
    /// the store is away"): the lease on a grant whose refresh token rotates
    /// at a provider that may revoke on reuse, which its holder keeps after
    /// the refresh and renews. The longest a root may carry, so that older
    /// releases read it (as a lease to wait for).
    static let standingSeconds = SyncRoot.maxLeaseSeconds
    /// Seconds a holder's use of a lease ends before its duration: what a
    /// token request and the writes around it may take beyond its start.
    static let leaseMargin: Double = 10
    /// How long a machine's request for another's standing lease stays in
    /// the root; it is made again at each try.
    static let wantSeconds: UInt32 = 120
    /// Set in the id of a request for a standing lease (a "want"), clear in
    /// every lease's. Older releases take a want for a lease of two minutes.
    static let wantFlag: UInt32 = 0x8000_0000
    /// Set in the id of a quiet standing lease: its holder will not refresh
    /// the grant alone under it (the grant's access token, as the holder
    /// has it, stays valid until well after the lease ends by the holder's
    /// clock), so another machine may take the grant over as soon as the
    /// lease has lapsed by its own observation. Clear while the holder may
    /// refresh alone: then the lease lapses for the others only after
    /// `takeoverSeconds`, in case the holder spent the refresh token while
    /// the store was away and has not been able to send the new one yet.
    static let quietFlag: UInt32 = 0x4000_0000
    /// How long another machine must have seen a standing lease that is not
    /// quiet, unchanged, before it may take the grant over: the holder was
    /// refreshing it (or about to) when last heard of. Long enough for a
    /// machine cut off from the store to come back and send what it spent.
    static let takeoverSeconds: Double = 6 * 3600
    /// Slack beyond a standing lease's end that the access token must have
    /// left for the lease to be quiet: room for token requests that ask for
    /// more validity than the default.
    static let quietSlack: Double = 300

    /// A new lease id: random, with the want and quiet bits as given.
    static func leaseID(want: Bool = false, quiet: Bool = false) throws(VaultError) -> UInt32 {
        let random = try Secure.randomBytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return random & ~(wantFlag | quietFlag) | (want ? wantFlag : 0) | (quiet ? quietFlag : 0)
    }

    /// Before refreshing a synced grant: syncs, and returns the grant when
    /// it arrived fresh from another machine (nothing to spend); otherwise
    /// takes the store's refresh lease for it and returns nil. Waits while
    /// another machine's lease is active by this machine's observation.
    /// A standing lease (`standing`) stays with this machine after the
    /// refresh; another machine's standing lease is asked for, and the
    /// refresh waits for its holder (`busy`, naming it).
    func leaseForRefresh(_ name: String, minimumValidity: Double?, timeout: Double, standing: Bool = false)
        throws(VaultError) -> Grant?
    {
        let keys = try syncKeys()
        return try leaseForRefresh(
            name, minimumValidity: minimumValidity, through: try store(for: try loadSyncState(keys), timeout: timeout),
            keys: keys, standing: standing)
    }

    /// `leaseForRefresh` through `store`.
    func leaseForRefresh(
        _ name: String, minimumValidity: Double?, through store: any SyncStore, keys: SyncKeys, standing: Bool = false
    ) throws(VaultError) -> Grant? {
        let pacing = vault.pacing
        let deadline = pacing.monotonic() + SyncEngine.leaseWait
        let standingDeadline = pacing.monotonic() + SyncEngine.standingWait
        var waitedForHolder = false
        var refusals = 0
        var changes = 0
        while true {
            func goOn(after error: VaultError, since answered: Int) throws(VaultError) {
                try keepTrying(name, after: error, from: store, since: answered, until: deadline)
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
            let id = try recordID(of: name)
            guard let id else { throw VaultError(.notFound, "grant '\(name)' not found") }
            answered = store.answerCount
            let outcome: LeaseOutcome
            do {
                outcome = try takeLease(id, store: store, keys: keys, standing: standing)
            } catch {
                try goOn(after: error, since: answered)
                continue
            }
            if outcome == .taken { return nil }
            if case .standing(let holder, let asked, let quiet) = outcome {
                // Its holder may be refreshing it right now: wait a little
                // for the tokens, as for a lease, then leave it to the
                // holder; at once when this machine asked already, a while
                // ago (its holder has not refreshed since).
                if asked { waitedForHolder = true }
                guard waitedForHolder, pacing.monotonic() < standingDeadline else {
                    throw SyncEngine.heldStanding(name, by: holder, quiet: quiet)
                }
                pacing.sleep(1)
                continue
            }
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

    /// Whether `leaseForRefresh` tries again after `error`, which came
    /// after the store's `answered`-th answer: yes, after a pause, when
    /// other machines write all the while (busy), or answers are lost while
    /// the store answers other requests (transient, with new answers). The
    /// store works then, and another machine may hold or take the lease:
    /// this one never refreshes beside it, not even when the wait runs out
    /// at `deadline` (then: busy). Throws otherwise.
    private func keepTrying(
        _ name: String, after error: VaultError, from store: any SyncStore, since answered: Int, until deadline: Double
    ) throws(VaultError) {
        let answering = error.code == .transient && store.answerCount > answered
        guard error.code == .busy || answering else { throw error }
        guard vault.pacing.monotonic() < deadline else {
            throw VaultError(
                .busy, "the store answers, but kept this machine from taking the lease on '\(name)'",
                remedy: .tryAgainInAMinute)
        }
        vault.pacing.pause(upTo: 0.3)
    }

    /// The error of a refresh of `name` left to `holder`, the machine that
    /// holds a standing lease on it (`quiet`: a quiet one) and has been
    /// asked to hand it over.
    private static func heldStanding(_ name: String, by holder: [UInt8], quiet: Bool) -> VaultError {
        let lapse =
            quiet
            ? "or the right lapses \(SyncEngine.standingSeconds / 60) minutes after that machine last renewed it"
            : "or, as it was refreshing the grant when last heard of, the right passes to another "
                + "machine \(Int(SyncEngine.takeoverSeconds / 3600)) hours after that"
        return VaultError(
            .busy,
            "machine \(Array(holder.prefix(4)).hex) holds the right to refresh '\(name)' and has been "
                + "asked to hand it over; it does at its next sync, \(lapse)",
            remedy: .tryAgainInAMinute)
    }

    /// The record id of live grant `name`, if there is one.
    func recordID(of name: String) throws(VaultError) -> [UInt8]? {
        try vault.read { (_: StateManifest) throws(VaultError) in
            try vault.findRow(nameHash: try vault.keys.nameHash(name), deleted: false)?.id
        }
    }

    /// Whether this machine holds the standing lease on grant `name` by its
    /// own clock, long enough for a token request of `request` seconds;
    /// with `alone`, a lease under which it may refresh while the store is
    /// away (not a quiet one).
    package func holdsStandingLease(on name: String, request: Double, alone: Bool = false) throws(VaultError)
        -> Bool
    {
        let keys = try syncKeys()
        let id = try recordID(of: name)
        guard let id else { return false }
        let held = try heldLeases(keys)
        let now = vault.pacing.boot().seconds
        return alone ? held.letsRefreshAlone(id, now: now, request: request) : held.lets(id, now: now, request: request)
    }

    /// This machine's standing lease on grant `name` as its own note says,
    /// while it holds it (as `refreshRight` judges: by its own clock, with
    /// the margin): whether it is quiet, and the seconds left of it. Nil
    /// when this machine does not hold it.
    package func heldStandingLease(on name: String) throws(VaultError) -> (quiet: Bool, secondsLeft: Double)? {
        let keys = try syncKeys()
        guard let id = try recordID(of: name) else { return nil }
        let held = try heldLeases(keys)
        let now = vault.pacing.boot().seconds
        guard held.lets(id, now: now, request: 0), let h = held.held[id] else { return nil }
        let left = Double(h.seconds) - (now - h.since) - SyncEngine.leaseMargin
        return (h.id & SyncEngine.quietFlag != 0, max(0, left))
    }

    /// Whether a standing lease on `record`, renewed now for `seconds`,
    /// would be quiet: the grant's access token, as this machine has it,
    /// stays valid until well after the lease ends, so this machine will
    /// not need to refresh it alone. Nil when the grant no longer needs a
    /// standing lease (removed, dead, without a refresh token, or with one
    /// that does not rotate): it is let go of.
    func quietRenewal(_ record: [UInt8], seconds: UInt32) throws(VaultError) -> Bool? {
        guard let row = try vault.findRow(id: record), !row.deleted, let grant = try vault.keys.open(row).grant,
            !grant.dead, grant.refreshToken != nil, grant.refreshTokenRotates != false
        else { return nil }
        guard let end = grant.expiresAt else { return true }
        let needed = Double(seconds) + SyncEngine.leaseMargin + Grant.freshnessMargin + SyncEngine.quietSlack
        return end.timeIntervalSince(vault.time.now()) > needed
    }

    enum LeaseOutcome: Equatable {
        case taken, held, changed, refused
        /// Another machine holds a standing lease on the record (its
        /// device); `asked`: this try wrote the request for it; `quiet`:
        /// the lease is quiet (`SyncEngine.quietFlag`).
        case standing([UInt8], asked: Bool, quiet: Bool)
    }

    /// Writes a root that adds this machine's lease on `record` (standing,
    /// or for one refresh): `held` when another machine's lease is active,
    /// `standing` when that lease is a standing one (this machine's request
    /// for it is written then), `changed` when the root moved on since the
    /// last sync (sync again first), `refused` when the store refused the
    /// write though no one else wrote.
    func takeLease(_ record: [UInt8], store: any SyncStore, keys: SyncKeys, standing: Bool = false)
        throws(VaultError) -> LeaseOutcome
    {
        // The lease counts from before it is written: the holder's use of
        // it ends no later than any observer's judgement that it expired.
        let start = vault.pacing.monotonic()
        let bootStart = vault.pacing.boot().seconds
        let state = try loadSyncState(keys)
        guard let (object, root) = try fetchRoot(store, keys) else { return .changed }
        let hash = try SyncRoot.hash(object.bytes)
        guard hash == state.markHash else { return .changed }
        let active = try activeLeases(root, keys: keys)
        // Processes of this machine refreshing one grant are serialized by
        // its lock, so a lease of this device on the record is replaced.
        if let other = active.first(where: { $0.record == record && $0.device != state.device && !$0.isWant }) {
            guard other.isStanding else { return .held }
            // Ask the holder, once while a request of ours is in the root.
            if active.contains(where: { $0.record == record && $0.device == state.device && $0.isWant }) {
                return .standing(other.device, asked: false, quiet: other.isQuiet)
            }
            let want = SyncRoot.Lease(
                record: record, device: state.device,
                id: try SyncEngine.leaseID(want: true),
                seconds: SyncEngine.wantSeconds)
            _ = try writeLeases(active + [want], over: object, root: root, hash: hash, store: store, keys: keys)
            return .standing(other.device, asked: true, quiet: other.isQuiet)
        }
        let seconds = standing ? SyncEngine.standingSeconds : SyncEngine.leaseSeconds
        // Taken to refresh: not quiet (`quietFlag`) until the new tokens are sent.
        let id = try SyncEngine.leaseID()
        let lease = SyncRoot.Lease(record: record, device: state.device, id: id, seconds: seconds)
        // Requests for the record end with it: one still needed is made
        // again at its machine's next try.
        let outcome = try writeLeases(
            active.filter { $0.record != record } + [lease], over: object, root: root, hash: hash, store: store,
            keys: keys)
        guard outcome == .taken else { return outcome }
        if standing {
            try vault.update { (_: inout StateManifest) throws(VaultError) in
                try updateHeldLeases(keys) { $0.set(record, .init(id: id, since: bootStart, seconds: seconds)) }
            }
        }
        // Too much of the lease went on taking it: the refresh might outlast
        // it. Take a new one.
        let used = vault.pacing.monotonic() - start
        guard used + TokenRefresher.requestTimeout + SyncEngine.leaseMargin < Double(seconds) else { return .changed }
        return .taken
    }

    /// Writes a root like `root` (read as `object`, hashing to `hash`) with
    /// `leases`, and confirms it: `taken` once it is the store's root and
    /// this machine's mark.
    private func writeLeases(
        _ leases: [SyncRoot.Lease], over object: StoredObject, root: SyncRoot, hash: [UInt8], store: any SyncStore,
        keys: SyncKeys
    ) throws(VaultError) -> LeaseOutcome {
        let state = try loadSyncState(keys)
        var next = root
        next.ancestry = Array(([(root.epoch, hash)] + root.ancestry).prefix(SyncRoot.maxAncestry))
        next.epoch += 1
        next.writer = state.device
        next.parent = hash
        next.devices = next.devices.filter { $0.id != state.device } + [(state.device, next.epoch)]
        next.leases = leases
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
        return .taken
    }
}

extension SyncRoot.Lease {
    /// A machine's request for another's standing lease, not a lease.
    var isWant: Bool { id & SyncEngine.wantFlag != 0 }
    /// A standing lease (docs/sync.md, "Refresh rights while the store is
    /// away"), not one for a single refresh: exactly `standingSeconds`
    /// long (older releases' refresh leases are shorter).
    var isStanding: Bool { !isWant && seconds == SyncEngine.standingSeconds }
    /// A standing lease under which its holder will not refresh alone.
    var isQuiet: Bool { id & SyncEngine.quietFlag != 0 }
    /// How long another machine must see this lease unchanged before it
    /// lapses: a standing lease that is not quiet much longer than it says.
    var observedSeconds: Double {
        isStanding && !isQuiet ? max(Double(seconds), SyncEngine.takeoverSeconds) : Double(seconds)
    }
}

/// Which machine may refresh a guarded grant (docs/sync.md, "Refresh rights
/// while the store is away"), as this machine knows it: from its own note
/// of the standing leases it holds, and the leases it saw at its last sync.
package enum RefreshRight: Equatable {
    /// This machine holds the grant's standing lease.
    case here
    /// Another machine held a lease on it at this machine's last sync: the
    /// first 8 hex digits of its device id.
    case elsewhere(String)
    /// No machine held one at the last sync.
    case nobody
}

extension SyncEngine {
    /// Who may refresh grant `name`, by what this machine knows without
    /// asking the store.
    package func refreshRight(of name: String) throws(VaultError) -> RefreshRight {
        if try holdsStandingLease(on: name, request: 0) { return .here }
        let keys = try syncKeys()
        let me = try loadSyncState(keys).device
        let id = try recordID(of: name)
        guard let id else { return .nobody }
        let seen = try LeaseObservations(
            unsealing: try vault.getMeta(LeaseObservations.metaKey), keys: keys, vaultID: vault.header.vaultID,
            bootID: vault.pacing.boot().bootID)
        let other = seen.firstSeen.keys.first {
            $0.record == id && $0.device != me && $0.id & SyncEngine.wantFlag == 0
        }
        return other.map { .elsewhere(Array($0.device.prefix(4)).hex) } ?? .nobody
    }
}
