package import FoundationEssentials
import VaultCrypto
import VaultStorage

// The record operations a refresh needs: each one short transaction, never
// held across a token request.
extension Vault {
    /// True when `g` has an access token with more than `minimumValidity`
    /// seconds left by this machine's clock.
    package func usable(_ g: Grant, _ minimumValidity: TimeInterval) -> Bool {
        g.isUsable(minimumValidity: minimumValidity, at: time.now())
    }

    /// The live grant stored under `name` and its row.
    package func loadWithRow(_ name: String) throws(VaultError) -> (StoredRecord, Grant) {
        try read { (state: StateManifest) throws(VaultError) in try loadLive(name, state: state) }
    }

    /// The grant in record `id` and its current name (it may have been
    /// renamed meanwhile); `notFound` under `expecting` when it was removed.
    func loadRecord(id: [UInt8], expecting name: String) throws(VaultError) -> (Grant, String) {
        try read { (state: StateManifest) throws(VaultError) in
            guard let row = try findRow(id: id), !row.deleted else {
                throw VaultError(.notFound, "grant '\(name)' not found", remedy: .listGrants)
            }
            try check(row, against: state)
            let payload = try keys.open(row)
            guard let grant = payload.grant else { throw VaultError(.tampered, "\(row.label) holds no grant") }
            return (grant, payload.name)
        }
    }

    /// Fails unless the vault can take the refresh's write now (a full
    /// disk, a read-only file, a writer that never lets go), before a
    /// refresh token is spent. Writes nothing: a refresh that then fails
    /// leaves the file, its state and its generation as they were.
    func checkWritable() throws(VaultError) {
        // The write lock can be had (an empty transaction commits nothing).
        try transaction(.immediate) { () throws(VaultError) in }
        let path = location.databasePath
        guard FileSystem.writable(path) else {
            throw VaultError(.io, "cannot access the vault file: \(path) is read-only")
        }
        // Room for the write: a record, its index entry and the state, as
        // WAL frames, with a wide margin.
        if let free = FileSystem.freeBytes(location.directory), free < Vault.roomForARefresh {
            throw VaultError(.io, "the disk is full: cannot write \(path)")
        }
    }

    /// Free bytes the file system must have before a refresh token is spent.
    static let roomForARefresh: Int64 = 256 * 1024

    /// Stores the outcome of a refresh in record `id`. When the record
    /// changed during the request (a sync, an import, a rename), the new
    /// tokens go into its current grant as long as that still holds the
    /// refresh token that was spent; a grant replaced meanwhile is kept as
    /// it is. Returns the grant as stored.
    func storeRefreshed(id: [UInt8], spentRefreshToken: String?, _ next: Grant) throws(VaultError) -> Grant {
        try storeSpending(id: id, spentRefreshToken: spentRefreshToken) { current in
            var merged = current
            merged.accessToken = next.accessToken
            merged.refreshToken = next.refreshToken
            merged.tokenType = next.tokenType
            merged.expiresAt = next.expiresAt
            merged.scopes = next.scopes
            merged.idToken = next.idToken
            merged.refreshedAt = next.refreshedAt
            merged.refreshTokenRotates = next.refreshTokenRotates
            merged.refreshTokenExpiresAt = next.refreshTokenExpiresAt
            merged.tokenResponse = next.tokenResponse
            merged.dead = false
            merged.deadReason = nil
            return merged
        }
    }

    /// Rewrites record `id` with `change` made to its grant, in one short
    /// transaction, as long as it still holds `spentRefreshToken` (the
    /// token a request just spent); a grant whose refresh token changed
    /// meanwhile is kept as it is. Returns the grant as stored.
    func storeSpending(id: [UInt8], spentRefreshToken: String?, _ change: (Grant) -> Grant) throws(VaultError)
        -> Grant
    {
        var stored: Grant?
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, name, current) = try liveRecord(id: id, state: state)
            guard current.refreshToken == spentRefreshToken else {
                stored = current
                return
            }
            let next = change(current)
            try rewrite(row, with: next, name: name, state: &state)
            stored = next
        }
        guard let stored else { throw VaultError(.internalError, "the grant was not read") }
        return stored
    }

    /// Gives record `id` the account learned from its provider after a
    /// refresh, if it still has none and still holds `refreshToken` (the
    /// grant that was refreshed). An edit of the metadata, apart from the
    /// refresh: `rewrite` gives it a tag of its own. Returns the grant as
    /// stored.
    func fillAccount(id: [UInt8], _ account: String, holding refreshToken: String?) throws(VaultError) -> Grant {
        var stored: Grant?
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, name, current) = try liveRecord(id: id, state: state)
            stored = current
            guard current.account == nil, current.refreshToken == refreshToken else { return }
            var next = current
            next.account = account
            try rewrite(row, with: next, name: name, state: &state)
            stored = next
        }
        guard let stored else { throw VaultError(.internalError, "the grant was not read") }
        return stored
    }

    /// Marks record `id` dead after a refusal, unless its refresh token
    /// changed meanwhile (then the refusal was about a token no longer
    /// stored). Returns the grant as marked, or nil when left alone.
    func markDead(id: [UInt8], spentRefreshToken: String?, reason: String) throws(VaultError) -> Grant? {
        var marked: Grant?
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, name, current) = try liveRecord(id: id, state: state)
            guard current.refreshToken == spentRefreshToken else { return }
            var next = current
            next.dead = true
            next.deadReason = reason
            try rewrite(row, with: next, name: name, state: &state)
            marked = next
        }
        return marked
    }

    /// Marks a grant dead (kept, shown by `vault list`).
    public func markDead(_ name: String, reason: String) throws(VaultError) {
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, grant) = try loadLive(name, state: state)
            var next = grant
            next.dead = true
            next.deadReason = reason
            try rewrite(row, with: next, name: name, state: &state)
        }
    }

    func liveRecord(id: [UInt8], state: StateManifest) throws(VaultError) -> (StoredRecord, String, Grant) {
        guard let row = try findRow(id: id), !row.deleted else {
            throw VaultError(.notFound, "the grant was removed during its refresh")
        }
        try check(row, against: state)
        let payload = try keys.open(row)
        guard let grant = payload.grant else { throw VaultError(.tampered, "\(row.label) holds no grant") }
        return (row, payload.name, grant)
    }

    /// Seals `grant` under `name` as the next version of `row`, its lineage
    /// carried on as after a refresh (`Payload.edited`): its tokens, if
    /// they changed, follow their lineage rather than being an edit.
    package func rewrite(_ row: StoredRecord, with grant: Grant, name: String, state: inout StateManifest)
        throws(VaultError)
    {
        let version = row.version + 1
        let payload = try keys.open(row).edited(name: name, grant: grant, as: .refresh, at: time.now())
        try putRow(
            try keys.seal(payload, id: row.id, version: version, deleted: false, nameHash: row.nameHash))
        state.entries[row.id] = .init(version: version, deleted: false)
    }
}
