public import FoundationEssentials
public import VaultCore
internal import VaultCrypto

/// Two sides of concurrent changes to one synced grant.
public struct SyncConflict: Sendable {
    /// The grant's name here.
    public let name: String
    /// The name the other side gives it (another one when the sides are
    /// two renames); the other side of a removal keeps the name it removed.
    public let otherName: String
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
    /// When each side was last edited, by the clock of the machine that
    /// edited it (taken into this machine's clock as it travelled); nil for
    /// a side written before edit times were kept.
    public let currentChanged: Date?
    /// When the other side was last edited.
    public let otherChanged: Date?
    /// The other side's number among the grant's other sides (1 and up),
    /// for `resolveConflict(_:keepingSide:)`.
    public let side: Int
    /// How many other sides the grant has.
    public let sides: Int
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
            var numbers: [[UInt8]: Int] = [:]
            let totals = Dictionary(grouping: state.conflicts, by: \.id).mapValues(\.count)
            return try state.conflicts.map { (c: SyncState.Conflict) throws(VaultError) -> SyncConflict in
                numbers[c.id, default: 0] += 1
                let other = c.payload.withUnsafeBytes { Payload.read($0) }
                let current = try rows[c.id].map { (row: StoredRecord) throws(VaultError) -> Payload in
                    try vault.keys.open(row)
                }
                let live = rows[c.id].map { !$0.deleted } ?? false
                let zero = [UInt8](repeating: 0, count: 16)
                let currentGrant = live ? current?.grant : nil
                return SyncConflict(
                    name: current?.name ?? other?.name ?? "?", otherName: other?.name ?? current?.name ?? "?",
                    current: currentGrant, other: other?.grant,
                    currentDevice: c.valueDevice == zero ? nil : Array(c.valueDevice.prefix(4)).hex,
                    otherDevice: c.device == zero ? nil : Array(c.device.prefix(4)).hex,
                    thisDevice: Array(state.device.prefix(4)).hex,
                    currentFingerprint: keys.fingerprint(currentGrant),
                    otherFingerprint: keys.fingerprint(other?.grant),
                    currentChanged: current?.lineage.editedAt.map { Date(epochSeconds: $0) },
                    otherChanged: other?.lineage.editedAt.map { Date(epochSeconds: $0) },
                    side: numbers[c.id] ?? 1, sides: totals[c.id] ?? 1)
            }.sorted { ($0.name, $0.side) < ($1.name, $1.side) }
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
    /// other side the value (its name included). Either way the choice is
    /// a new change that the next sync sends, and it dominates every side
    /// everywhere. With several other sides, `keepOther` is refused: pick
    /// one with `resolveConflict(_:keepingSide:)`.
    public func resolveConflict(_ name: String, keepOther: Bool) throws(VaultError) {
        _ = try resolvingConflict(name, keepOther: keepOther)
    }

    /// `resolveConflict(_:keepOther:)`, returning what the side kept makes
    /// of the grant.
    package func resolvingConflict(_ name: String, keepOther: Bool) throws(VaultError) -> KeptSide {
        try resolve(name) { (sides: Int) throws(VaultError) -> Int in
            guard keepOther else { return 0 }
            guard sides == 1 else {
                throw VaultError(
                    .invalidInput, "'\(name)' has \(sides) other sides; pick one by its number",
                    remedy: .listConflicts)
            }
            return 1
        }
    }

    /// Ends the conflict on `name` keeping side `side`: 0 the current
    /// value, 1 and up the other sides in the order `syncConflicts` lists
    /// them (its `side`).
    public func resolveConflict(_ name: String, keepingSide side: Int) throws(VaultError) {
        _ = try resolvingConflict(name, keepingSide: side)
    }

    /// `resolveConflict(_:keepingSide:)`, returning what the side kept
    /// makes of the grant.
    package func resolvingConflict(_ name: String, keepingSide side: Int) throws(VaultError) -> KeptSide {
        try resolve(name) { (sides: Int) throws(VaultError) -> Int in
            guard (0...sides).contains(side) else {
                throw VaultError(
                    .invalidInput, "'\(name)' has no side \(side): its other sides are 1 to \(sides)",
                    remedy: .listConflicts)
            }
            return side
        }
    }

    /// Resolves the conflict on `name` with the side `pick` chooses among
    /// the current value (0) and the other sides (1 and up).
    private func resolve(_ name: String, pick: (Int) throws(VaultError) -> Int) throws(VaultError) -> KeptSide {
        let keys = try syncKeys()
        var kept: KeptSide?
        _ = try vault.update { (manifest: inout StateManifest) throws(VaultError) in
            var state = try loadSyncState(keys)
            let hash = try vault.keys.nameHash(name)
            var found = try vault.findRow(nameHash: hash, deleted: false)
            if found == nil { found = try vault.findRow(nameHash: hash, deleted: true) }
            let sides = found.map { row in state.conflicts.filter { $0.id == row.id } } ?? []
            guard let row = found, !sides.isEmpty else {
                throw VaultError(.notFound, "no conflict on '\(name)'", remedy: .listConflicts)
            }
            let choice = try pick(sides.count)
            let currentPayload = try vault.keys.open(row)
            var all = [GrantMerge.Side(payload: currentPayload, deleted: row.deleted)]
            for side in sides {
                guard let payload = side.payload.withUnsafeBytes({ Payload.read($0) }) else {
                    throw VaultError(.damaged, "a kept side of '\(name)' is malformed")
                }
                all.append(.init(payload: payload, deleted: payload.grant == nil))
            }
            var (payload, deleted) = GrantMerge.picking(choice, of: all)
            payload.lineage.editedAt = vault.time.now().epochSeconds
            var nameHash = row.nameHash
            if payload.name != currentPayload.name {
                nameHash = try vault.keys.nameHash(payload.name)
                if !deleted, let holder = try vault.findRow(nameHash: nameHash, deleted: false), holder.id != row.id {
                    throw VaultError(
                        .alreadyExists,
                        "the side kept is named '\(payload.name)', which another grant has; rename that one, then pick again"
                    )
                }
            }
            // Rewritten with a new local version: a change here, which the
            // next sync sends with a vector above every side's.
            let version = row.version + 1
            try vault.putRow(
                try vault.keys.seal(payload, id: row.id, version: version, deleted: deleted, nameHash: nameHash))
            manifest.entries[row.id] = .init(version: version, deleted: deleted)
            state.conflicts.removeAll { $0.id == row.id }
            state.bases[row.id] = .init(
                localVersion: 0,
                versions: sides.reduce(state.bases[row.id]?.versions ?? []) { VersionVector.merged($0, $1.versions) })
            try saveSyncState(state, keys)
            kept = KeptSide(name: payload.name, removed: deleted)
        }
        guard let kept else { throw VaultError(.damaged, "the conflict on '\(name)' was not resolved") }
        return kept
    }
}

/// What the side a person kept in a conflict makes of the grant.
package struct KeptSide: Equatable {
    /// The name the grant has now.
    package let name: String
    /// The side kept is a removal: the grant is removed.
    package let removed: Bool
}
