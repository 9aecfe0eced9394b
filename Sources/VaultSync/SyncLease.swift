internal import FoundationEssentials
internal import Glibc
public import VaultCore
package import VaultCrypto
internal import VaultHTTP

extension Vault {
    static let leaseSeconds: UInt64 = 60
    static let leaseWait: Double = 30
    /// Microseconds between the two read-backs of a lease.
    static let leaseSettle: UInt32 = 400_000

    /// Before refreshing a synced grant: syncs, and returns the grant when
    /// it arrived fresh from another machine (nothing to spend); otherwise
    /// takes the store's refresh lease for it and returns nil. Waits while
    /// another machine holds the lease.
    func leaseForRefresh(_ name: String, minimumValidity: Double?, transport: any HTTPTransport, timeout: Double)
        throws(VaultError) -> Grant?
    {
        let keys = try syncKeys()
        let store = try Vault.store(for: try loadSyncState(keys), transport: transport, timeout: timeout)
        let deadline = time.now().addingTimeInterval(Vault.leaseWait)
        while true {
            _ = try sync(transport: transport, timeout: timeout)
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
                    .busy, "another machine is refreshing '\(name)', or the store keeps changing",
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
