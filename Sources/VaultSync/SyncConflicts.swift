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
        try vault.update { (manifest: inout StateManifest) throws(VaultError) in
            var state = try loadSyncState(keys)
            let hash = try vault.keys.nameHash(name)
            var found = try vault.findRow(nameHash: hash, deleted: false)
            if found == nil { found = try vault.findRow(nameHash: hash, deleted: true) }
            guard let row = found, let index = state.conflicts.firstIndex(where: { $0.id == row.id }) else {
                throw VaultError(.notFound, "no conflict on '\(name)'", remedy: .listConflicts)
            }
            let conflict = state.conflicts.remove(at: index)
            let version = row.version + 1
            var payload = try vault.keys.open(row)
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
