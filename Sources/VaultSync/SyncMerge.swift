internal import VaultCore

// Merging what the store sent into the local records, and what is sent
// back (docs/sync.md, "Versions and merge").
extension SyncEngine {
    /// Merges fetched buckets into the local records (inside a write).
    func merge(
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
                let mine =
                    changed
                    ? VersionVector.bumped(base?.versions ?? [], by: state.device, at: local.version) : base!.versions
                switch VersionVector.compare(mine, remote.versions) {
                case .equal:
                    if changed && VersionVector.counter(mine, state.device) != local.version {
                        // A vector counted before counters were local
                        // versions: the store has it (sent, then interrupted
                        // before it was noted), but the record may have
                        // changed again since: send it again, raised.
                        state.bases[remote.id] = .init(localVersion: 0, versions: mine)
                    } else {
                        // The store has this very version (sent, then
                        // interrupted before it was noted, or as it was).
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
                    if let write = try mergeConcurrent(
                        local, remote, mine: mine, manifest: &manifest, state: &state, report: &report)
                    {
                        deferred.append(write)
                    }
                }
            }
        }
        try writeDeferred(deferred, manifest: &manifest, state: &state, report: &report)
    }

    /// Merges two racing versions of one record (their vectors concurrent):
    /// metadata and tokens apart, the vectors deciding only which edit is
    /// the value; the merged vector is raised here so that the value
    /// dominates both when pushed. The write, when the name it takes is
    /// not free yet.
    private func mergeConcurrent(
        _ local: StoredRecord, _ remote: SyncRecord, mine: VersionVector.Vector, manifest: inout StateManifest,
        state: inout SyncState, report: inout SyncReport
    ) throws(VaultError) -> DeferredWrite? {
        let localPayload = try vault.keys.open(local)
        let ours = SyncRecord(
            id: local.id, versions: mine, deleted: local.deleted,
            payload: try localPayload.sealedBytes().unsafeCopyToArray(),
            siblings: state.conflicts.filter { $0.id == local.id }.map(\.sibling))
        guard let remotePayload = remote.payload.withUnsafeBytes({ Payload.read($0) }) else {
            throw VaultError(.damaged, "a record from the store holds a malformed grant")
        }
        // Metadata and tokens merge apart; the vectors decide only
        // which of two racing edits is the value (docs/sync.md,
        // "Versions and merge").
        let merge = GrantMerge(
            .init(payload: localPayload, deleted: local.deleted),
            .init(payload: remotePayload, deleted: remote.deleted),
            aWins: SyncRecord.firstWins(ours, over: remote))
        let merged = MergedRecord(merge, siblings: SyncRecord.siblings(merging: ours, remote, losers: merge.losers))
        let written = try applyMerged(
            merged, id: remote.id, manifest: &manifest, state: &state, report: &report, renameOnClash: false)
        if merged.conflict { report.noteConflict(merged.value.name) }
        // Both sides seen: the merged vector, raised here so the
        // value dominates both when pushed.
        state.bases[remote.id] = .init(localVersion: 0, versions: VersionVector.merged(mine, remote.versions))
        return written ? nil : .merged(merged, id: remote.id)
    }

    /// Writes what was put off: each pass writes what no longer clashes;
    /// what still does (two machines added grants of one name, or names
    /// swapped) is kept under a new name.
    private func writeDeferred(
        _ writes: [DeferredWrite], manifest: inout StateManifest, state: inout SyncState, report: inout SyncReport
    ) throws(VaultError) {
        var deferred = writes
        var progress = true
        while !deferred.isEmpty {
            var left: [DeferredWrite] = []
            for write in deferred {
                let written: Bool
                switch write {
                case .remote(let remote):
                    written = try applyRemote(
                        remote, manifest: &manifest, state: &state, report: &report, renameOnClash: !progress)
                case .merged(let merged, let id):
                    written = try applyMerged(
                        merged, id: id, manifest: &manifest, state: &state, report: &report,
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
        case merged(MergedRecord, id: [UInt8])
    }

    /// Writes the merge of a local and a remote version of record `id`,
    /// with the other sides it keeps.
    @discardableResult
    private func applyMerged(
        _ merged: MergedRecord, id: [UInt8], manifest: inout StateManifest, state: inout SyncState,
        report: inout SyncReport, renameOnClash: Bool = true
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
        state.conflicts.removeAll { $0.id == id }
        state.conflicts += merged.siblings.map { SyncState.Conflict(id: id, $0) }
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
        let known = state.conflicts.filter { $0.id == remote.id }.count
        state.conflicts.removeAll { $0.id == remote.id }
        state.conflicts += remote.siblings.map { SyncState.Conflict(id: remote.id, $0) }
        if remote.siblings.count > known { report.noteConflict(payload.name) }
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
    /// be in the store, their payloads labelled with `transit` (this
    /// machine's clock and the store's, docs/sync.md "Times from another
    /// machine").
    func pendingBuckets(state: SyncState, manifest: StateManifest, transit: TransitClock? = nil) throws(VaultError)
        -> [Int: [Outgoing]]
    {
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
                // Changed here, or to be sent again because the store lost
                // it. A record marked to be sent again may have changed
                // since (a refresh while the store was away), which the mark
                // cannot tell: its vector is raised at its local version,
                // which leaves a vector unchanged whose count for this
                // machine is that version already. Sent under the old
                // vector, a change would pass for the version the other
                // machines have.
                let changed = base.map { $0.localVersion != row.version } ?? true
                let versions =
                    changed
                    ? VersionVector.bumped(base?.versions ?? [], by: state.device, at: row.version) : base!.versions
                var payload = try vault.keys.open(row)
                if row.deleted { payload.grant = nil }
                payload.transit = transit
                // A conflict travels with its record until someone picks.
                let siblings = try state.conflicts.filter { $0.id == row.id }.map {
                    (conflict: SyncState.Conflict) throws(VaultError) -> SyncSibling in
                    var sibling = conflict.sibling
                    if let transit, var side = sibling.payload.withUnsafeBytes({ Payload.read($0) }) {
                        side.transit = transit
                        sibling.payload = try side.sealedBytes().unsafeCopyToArray()
                    }
                    return sibling
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
}

/// A record after a merge of two concurrent versions: its value, and the
/// other sides it keeps.
struct MergedRecord {
    var value: Payload
    var deleted: Bool
    var siblings: [SyncSibling]
    /// True when the merge itself found two edits racing.
    var conflict: Bool

    /// `merge`'s value, with the other sides `candidates` (those of each
    /// version not settled by the other, and the merge's losers). Each
    /// candidate that races nothing in the value is folded into it: a side
    /// kept from an earlier race that the value's side has since gone past
    /// in one group (a pick) may still be newer in the other (tokens put in
    /// meanwhile), and then it is merged like any version, not kept as a
    /// conflict that no longer is one. In a fixed order, so that every
    /// machine merging the same two versions gets the same record.
    init(_ merge: GrantMerge, siblings candidates: [SyncSibling]) {
        value = merge.value
        deleted = merge.deleted
        conflict = merge.conflict
        var kept: [SyncSibling] = []
        let ordered = candidates.sorted {
            $0.versions.lexicographicallyPrecedes($1.versions) { a, b in
                a.device == b.device ? a.counter < b.counter : a.device.lexicographicallyPrecedes(b.device)
            }
        }
        for sibling in ordered {
            guard let side = sibling.payload.withUnsafeBytes({ Payload.read($0) }) else {
                kept.append(sibling)
                continue
            }
            let folded = GrantMerge(
                .init(payload: value, deleted: deleted),
                .init(payload: side, deleted: sibling.deleted || side.grant == nil),
                aWins: true)
            if folded.losers.isEmpty {
                value = folded.value
                deleted = folded.deleted
            } else {
                kept.append(sibling)
            }
        }
        siblings = kept
    }
}

extension SyncReport {
    /// Notes a grant with a new conflict, once: the report carries over
    /// the rounds of a sync, and a later round can bring the same
    /// record again with one more side.
    mutating func noteConflict(_ name: String) {
        if !conflicts.contains(name) { conflicts.append(name) }
    }
}
