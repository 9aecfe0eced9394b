public import VaultCore
internal import VaultCrypto

/// Two sides of concurrent changes to one synced grant.
public struct SyncConflict: Sendable {
    /// The grant's name here.
    public let name: String
    /// The side that became the value (on every machine), nil if removed.
    public let current: Grant?
    /// The other side, kept until someone picks; nil if it was a removal.
    public let other: Grant?
    /// The machine that made each side: the first 8 hex digits of its
    /// sync device id (`vault remote` shows this machine's), nil when not
    /// known (a conflict kept by an older release).
    public let currentDevice: String?
    /// The machine that made the other side.
    public let otherDevice: String?
    /// This machine's device id, as above.
    public let thisDevice: String
    /// A short keyed fingerprint of each side's tokens (docs/sync.md):
    /// equal tokens give equal fingerprints on every machine of the vault;
    /// without the vault's key it tells nothing about the tokens.
    public let currentFingerprint: String?
    /// The other side's fingerprint.
    public let otherFingerprint: String?
}

extension SyncKeys {
    /// 8 hex digits (the first 4 bytes) of BLAKE2b-16 keyed with the object-name key over the
    /// grant's access and refresh tokens; nil for a removal.
    func fingerprint(_ grant: Grant?) -> String? {
        guard let grant else { return nil }
        var input =
            Array("vault.fingerprint.v1".utf8) + [0] + Array((grant.accessToken ?? "").utf8) + [0]
            + Array((grant.refreshToken ?? "").utf8) + [0] + Array((grant.tokenSecret ?? "").utf8)
        defer { secureZero(&input) }
        guard let hash = try? Secure.hash(input, key: nameKey, length: 16) else { return nil }
        return Array(hash.prefix(4)).hex
    }
}

extension SyncEngine {
    /// The conflicts this machine keeps (docs/sync.md, "Versions and merge").
    public func syncConflicts() throws(VaultError) -> [SyncConflict] {
        let keys = try syncKeys()
        let state = try loadSyncState(keys)
        return try vault.read { (_: StateManifest) throws(VaultError) -> [SyncConflict] in
            let rows = Dictionary(try vault.allRows().map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            return try state.conflicts.map { (c: SyncState.Conflict) throws(VaultError) -> SyncConflict in
                let other = c.payload.withUnsafeBytes { Payload.read($0) }
                let current = try rows[c.id].map { (row: StoredRecord) throws(VaultError) -> Payload in
                    try vault.keys.open(row)
                }
                let live = rows[c.id].map { !$0.deleted } ?? false
                let zero = [UInt8](repeating: 0, count: 16)
                let currentGrant = live ? current?.grant : nil
                return SyncConflict(
                    name: current?.name ?? other?.name ?? "?", current: currentGrant, other: other?.grant,
                    currentDevice: c.valueDevice == zero ? nil : Array(c.valueDevice.prefix(4)).hex,
                    otherDevice: c.device == zero ? nil : Array(c.device.prefix(4)).hex,
                    thisDevice: Array(state.device.prefix(4)).hex,
                    currentFingerprint: keys.fingerprint(currentGrant), otherFingerprint: keys.fingerprint(other?.grant)
                )
            }.sorted { $0.name < $1.name }
        }
    }

    /// The names of the grants in conflict, read without their tokens
    /// (`vault list` marks them and promises not to read tokens).
    public func conflictNames() throws(VaultError) -> [String] {
        let state = try loadSyncState(try syncKeys())
        guard !state.conflicts.isEmpty else { return [] }
        let ids = Set(state.conflicts.map(\.id))
        return try vault.read { (_: StateManifest) throws(VaultError) -> [String] in
            let rows = try vault.allRows().filter { ids.contains($0.id) }
            var names = Set(try vault.keys.open(rows, secrets: false).compactMap { try? $0.get().name })
            // As in `syncConflicts`: a conflict without a row is named by its other side.
            for c in state.conflicts where !rows.contains(where: { $0.id == c.id }) {
                if let name = c.payload.withUnsafeBytes({ Payload.read($0, secrets: false) })?.name {
                    names.insert(name)
                }
            }
            return names.sorted()
        }
    }

    /// Ends the conflict on `name`: keeps the current value, or makes the
    /// other side the value. Either way the choice is a new change that the
    /// next sync sends, and it dominates both sides everywhere.
    public func resolveConflict(_ name: String, keepOther: Bool) throws(VaultError) {
        let keys = try syncKeys()
        try vault.update { (manifest: inout StateManifest) throws(VaultError) in
            var state = try loadSyncState(keys)
            let hash = try vault.keys.nameHash(name)
            var found = try vault.findRow(nameHash: hash, deleted: false)
            if found == nil { found = try vault.findRow(nameHash: hash, deleted: true) }
            guard let row = found, let index = state.conflicts.firstIndex(where: { $0.id == row.id }) else {
                throw VaultError(.notFound, "no conflict on '\(name)'", remedy: .listConflicts)
            }
            let conflict = state.conflicts.remove(at: index)
            state.conflicts.removeAll { $0.id == row.id }
            let version = row.version + 1
            var payload = try vault.keys.open(row)
            var deleted = row.deleted
            if keepOther {
                guard let other = conflict.payload.withUnsafeBytes({ Payload.read($0) }) else {
                    throw VaultError(.damaged, "the kept side of '\(name)' is malformed")
                }
                (payload, deleted) = GrantMerge.choosing(
                    .init(payload: other, deleted: other.grant == nil), over: .init(payload: payload, deleted: deleted))
            }
            // Rewritten with a new local version: a change here, which the
            // next sync sends with a raised vector.
            try vault.putRow(
                try vault.keys.seal(payload, id: row.id, version: version, deleted: deleted, nameHash: row.nameHash))
            manifest.entries[row.id] = .init(version: version, deleted: deleted)
            state.bases[row.id] = .init(
                localVersion: 0,
                versions: VersionVector.merged(state.bases[row.id]?.versions ?? [], conflict.versions))
            try saveSyncState(state, keys)
        }
    }
}
