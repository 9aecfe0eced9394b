internal import FoundationEssentials
internal import VaultStorage

/// A grant with its name, as listed.
public struct NamedGrant: Sendable, Equatable {
    /// The name it is stored under.
    public let name: String
    /// The grant.
    public let grant: Grant
}

/// The result of listing: the grants that opened, and a problem for each
/// record that did not (the others stay usable).
public struct GrantListing: Sendable {
    /// Readable grants, sorted by name.
    public let grants: [NamedGrant]
    /// One error per record that failed its checks.
    public let problems: [VaultError]
}

/// What a part of `Vault.list` opened: the grants' names and what the
/// caller keeps of each, in the same order, and the records that failed.
struct Opened<T> {
    var names: [String] = []
    var items: [T] = []
    var problems: [VaultError] = []
}

/// One keyslot, as listed.
public struct KeyslotInfo: Sendable, Equatable {
    /// What opens a slot.
    public enum Kind: String, Sendable {
        case passphrase
        case keyfile = "key file"
        case secretService = "Secret Service"
    }

    /// Its number, for `removeKeyslot`.
    public let number: Int64
    /// Its kind; nil when the slot is damaged.
    public let kind: Kind?
    /// Argon2id parameters of a passphrase slot.
    public let kdf: KDFParameters?

    init(number: Int64, slot: Keyslot?) {
        self.number = number
        kdf = slot?.kdf
        switch slot?.kind {
        case .passphrase: kind = .passphrase
        case .keyfile: kind = .keyfile
        case .secretService: kind = .secretService
        case nil: kind = nil
        }
    }
}

/// How `save` treats an existing grant of the same name.
public enum SaveMode: Sendable {
    /// Insert or replace (GTMAppAuth's save).
    case replace
    /// Fail with `alreadyExists` if the name is taken.
    case insertOnly
}

extension Vault {
    // MARK: GTMAppAuth's store operations

    /// Saves `grant` under `name`, atomically. Returns the record's new version.
    @discardableResult
    public func save(_ grant: Grant, as name: String, mode: SaveMode = .replace) throws(VaultError) -> UInt64 {
        try GrantName.validate(name)
        var version: UInt64 = 0
        try update { (state: inout StateManifest) throws(VaultError) in
            let hash = try keys.nameHash(name)
            let id: [UInt8]
            let payload: Payload
            if let live = try findRow(nameHash: hash, deleted: false) {
                guard mode == .replace else {
                    throw VaultError(
                        .alreadyExists, "grant '\(name)' already exists", remedy: .replaceExisting)
                }
                id = live.id
                try check(live, against: state)
                payload = try keys.open(live).edited(name: name, grant: grant, at: time.now())
            } else if let tombstone = try findRow(nameHash: hash, deleted: true) {
                id = tombstone.id  // a re-added grant keeps its identity
                try check(tombstone, against: state)
                payload = try keys.open(tombstone).edited(name: name, grant: grant, at: time.now())
            } else {
                id = try Secure.randomBytes(16)
                payload = Payload(name: name, grant: nil).edited(name: name, grant: grant, at: time.now())
            }
            version = (state.entries[id]?.version ?? 0) + 1
            try putRow(try keys.seal(payload, id: id, version: version, deleted: false, nameHash: hash))
            state.entries[id] = .init(version: version, deleted: false)
        }
        return version
    }

    /// Loads the grant stored under `name`; `notFound` if there is none.
    public func load(_ name: String) throws(VaultError) -> Grant {
        try read { (state: StateManifest) throws(VaultError) in try loadLive(name, state: state).1 }
    }

    /// Removes the grant stored under `name`, leaving a tombstone so the
    /// removal can be told apart from a record that went missing.
    public func remove(_ name: String) throws(VaultError) {
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, _) = try loadLive(name, state: state)
            let version = row.version + 1
            let payload = try keys.open(row).edited(name: name, grant: nil, at: time.now())
            try putRow(
                try keys.seal(payload, id: row.id, version: version, deleted: true, nameHash: row.nameHash))
            state.entries[row.id] = .init(version: version, deleted: true)
        }
    }

    /// Renames a grant; the target name must be free.
    public func rename(_ name: String, to newName: String) throws(VaultError) {
        try GrantName.validate(newName)
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, grant) = try loadLive(name, state: state)
            let newHash = try keys.nameHash(newName)
            if newHash != row.nameHash, try findRow(nameHash: newHash, deleted: false) != nil {
                throw VaultError(.alreadyExists, "grant '\(newName)' already exists")
            }
            let version = row.version + 1
            let payload = try keys.open(row).edited(name: newName, grant: grant, at: time.now())
            try putRow(
                try keys.seal(payload, id: row.id, version: version, deleted: false, nameHash: newHash))
            state.entries[row.id] = .init(version: version, deleted: false)
        }
    }

    /// Every readable grant, plus a problem for each record that failed
    /// authentication, does not match the state, or is missing. With
    /// `secrets` false (a listing for display), each grant keeps what its
    /// state, expiry and refresh-token deadline need and nothing secret:
    /// a present token or client secret is an empty string, and of the
    /// provider configuration only whether a token endpoint and client id
    /// are named (each an empty string) is kept. Load a grant by name for
    /// the rest.
    public func list(secrets: Bool = true) throws(VaultError) -> GrantListing {
        let (grants, problems) = try list(secrets: secrets) { $0 }
        return GrantListing(grants: grants, problems: problems)
    }

    /// `list`, each grant turned into what the caller keeps of it as soon
    /// as it is read, on the thread that read it (so `transform` runs on
    /// several threads at once and must only read what it shares): a long
    /// listing neither copies every grant nor waits to render them.
    /// Sorted by grant name.
    package func list<T>(secrets: Bool = true, each transform: @Sendable (NamedGrant) -> T) throws(VaultError) -> (
        items: [T], problems: [VaultError]
    ) {
        try read { (state: StateManifest) throws(VaultError) in
            var problems: [VaultError] = []
            var liveCount = 0
            // Rows are read a part at a time, and each part is opened on a
            // thread of its own while the next is read: reading overlaps
            // decrypting, and the ciphertexts are never all held at once.
            let keys = self.keys
            let parts = try pipelined(concurrent: keys.opensConcurrently) {
                (hand: ([StoredRecord]) -> Void) throws(VaultError) in
                try tables.records(inBatchesOf: LocalKeys.rowsPerPart) { (rows: [StoredRecord]) throws(VaultError) in
                    var live: [StoredRecord] = []
                    live.reserveCapacity(rows.count)
                    for row in rows {
                        do throws(VaultError) {
                            try check(row, against: state)
                            if !row.deleted { live.append(row) }
                        } catch {
                            problems.append(error)
                        }
                    }
                    liveCount += live.count
                    hand(live)
                }
            } work: { (live: [StoredRecord]) -> Result<Opened<T>, VaultError> in
                Result { () throws(VaultError) in
                    var part = Opened<T>()
                    part.names.reserveCapacity(live.count)
                    part.items.reserveCapacity(live.count)
                    // Each result is moved out (from the end), not copied.
                    var results = try keys.open(live, secrets: secrets)
                    guard results.count == live.count else {
                        throw VaultError(.internalError, "the keys answered \(results.count) of \(live.count) records")
                    }
                    var row = live.count
                    while let result = results.popLast() {
                        row -= 1
                        switch consume result {
                        case .success(var payload):
                            if let grant = payload.grant.take() {
                                part.names.append(payload.name)
                                part.items.append(transform(NamedGrant(name: payload.name, grant: grant)))
                            } else {
                                part.problems.append(VaultError(.damaged, "\(live[row].label) holds no grant"))
                            }
                        case .failure(let error):
                            part.problems.append(error)
                        }
                    }
                    part.problems.reverse()
                    return part
                }
            }
            var names: [String] = []
            var items: [T] = []
            names.reserveCapacity(liveCount)
            items.reserveCapacity(liveCount)
            for part in parts {
                let opened = try part.get()
                names += opened.names
                items += opened.items
                problems += opened.problems
            }
            // Every live entry of the state has its row unless the counts
            // differ; only then find which are missing.
            if state.entries.liveCount != liveCount {
                let seen = try tables.recordIDs()
                for (id, entry) in state.entries.sorted where !seen.contains(id) && !entry.deleted {
                    problems.append(
                        VaultError(.tampered, "record \(Array(id.prefix(4)).hex) is missing (deleted outside vault)"))
                }
            }
            // Sorting positions rather than the items themselves (a grant
            // is a large value, and moving 10,000 of them dominated the
            // sort), then moving each item once into its place.
            Vault.permute(&items, by: names.indices.sorted { names[$0] < names[$1] })
            return (items, problems)
        }
    }

    /// Rearranges `items` so that position i holds what was at `order[i]`
    /// (a permutation of the positions), following each cycle with swaps:
    /// every item moved, none copied.
    static func permute<T>(_ items: inout [T], by order: [Int]) {
        var placed = [Bool](repeating: false, count: order.count)
        for start in order.indices where !placed[start] {
            var i = start
            placed[i] = true
            while order[i] != start {
                items.swapAt(i, order[i])
                i = order[i]
                placed[i] = true
            }
        }
    }

    /// GTMAppAuth's `canAuthorize` for a stored grant: false for a name
    /// that holds none, as GTMAppAuth answers for a missing authorization.
    public func canAuthorize(_ name: String) throws(VaultError) -> Bool {
        do {
            return try load(name).canAuthorize(at: time.now())
        } catch {
            guard error.code == .notFound else { throw error }
            return false
        }
    }

    // MARK: Keyslots

    // MARK: Rows

    func loadLive(_ name: String, state: StateManifest) throws(VaultError) -> (StoredRecord, Grant) {
        try GrantName.validate(name)
        let hash = try keys.nameHash(name)
        guard let row = try findRow(nameHash: hash, deleted: false) else { throw notFound(name, state: state) }
        try check(row, against: state)
        let payload = try keys.open(row)
        guard let grant = payload.grant else {
            throw VaultError(.tampered, "\(row.label) does not belong to this name")
        }
        return (row, grant)
    }

    /// The error for a name no live grant has, carrying the stored names
    /// near it (a typo) when there are any. Finding them opens every
    /// record, which only a miss pays for.
    func notFound(_ name: String, state: StateManifest) -> VaultError {
        let near = GrantName.nearest(to: name, among: liveNames(state: state))
        return VaultError(
            .notFound, "grant '\(name)' not found", remedy: near.isEmpty ? .listGrants : .nearGrantNames(near))
    }

    /// The names of the live grants whose records pass their checks;
    /// tokens are not read. Records that fail are left out, not reported:
    /// this only feeds suggestions.
    private func liveNames(state: StateManifest) -> [String] {
        guard let rows = try? allRows() else { return [] }
        let live = rows.filter { row in
            guard !row.deleted else { return false }
            do throws(VaultError) { try check(row, against: state) } catch { return false }
            return true
        }
        guard let opened = try? keys.open(live, secrets: false) else { return [] }
        return opened.compactMap { result in
            guard let payload = try? result.get(), payload.grant != nil else { return nil }
            return payload.name
        }
    }

    /// A row must match its authenticated state entry exactly.
    package func check(_ row: StoredRecord, against state: StateManifest) throws(VaultError) {
        guard let entry = state.entries[row.id] else {
            throw VaultError(.tampered, "\(row.label) is not part of the vault state (added outside vault)")
        }
        guard entry.version == row.version, entry.deleted == row.deleted else {
            throw VaultError(.tampered, "\(row.label) does not match the vault state (rolled back or replaced)")
        }
    }

    package func findRow(nameHash: [UInt8], deleted: Bool) throws(VaultError) -> StoredRecord? {
        try tables.record(nameHash: nameHash, deleted: deleted)
    }

    /// The row of record `id`, if any.
    package func findRow(id: [UInt8]) throws(VaultError) -> StoredRecord? { try tables.record(id: id) }

    package func allRows() throws(VaultError) -> [StoredRecord] { try tables.records() }

    package func putRow(_ r: StoredRecord) throws(VaultError) { try tables.putRecord(r) }
}
