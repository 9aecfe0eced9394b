/// The simulation's own account of what happened, kept apart from the
/// vaults it checks: every acknowledged edit with what its machine knew
/// when it made it, and every invariant that broke.
final class Ledger: @unchecked Sendable {
    /// The field groups of docs/sync.md that an edit changes.
    enum Groups {
        case meta
        case tokens
        case both

        var meta: Bool { self != .tokens }
        var tokens: Bool { self != .meta }
    }

    /// An edit a command acknowledged (exit 0).
    struct Edit {
        var id: Int
        var machine: String
        var record: [UInt8]
        var groups: Groups
        /// What it leaves: removed, or the name and the token family.
        var removed: Bool
        var name: String
        var family: Int?
        /// The edits its machine's vault reflected when it was made: those
        /// it replaces on purpose.
        var knownBefore: Set<Int>
        var what: String
        /// A pick between the sides of a conflict (`vault conflicts resolve`).
        var resolves: Bool
        /// A pick between sides that left different metadata (names, or a
        /// removal and a name): an edit of the metadata of its own, which
        /// adopts no side's (docs/sync.md, "Versions and merge").
        var picksMetadata = false
    }

    /// A broken invariant: its kind (what shrinking keeps failing on) and what it was.
    struct Violation: Equatable {
        var kind: String
        var detail: String
    }

    /// The record id the passphrase's edits are kept under: no grant's.
    static let passphrase = [UInt8](repeating: 0xff, count: 16)

    private(set) var edits: [Edit] = []
    private(set) var violations: [Violation] = []
    private(set) var counts: [String: Int] = [:]
    /// Refresh tokens an acknowledged removal (`remove`, or a pick of a
    /// removal) took away with its grant, or an acknowledged `import
    /// --replace` gave up for new tokens: a family whose newest token went
    /// so was ended by a person, not lost.
    private(set) var removedRefreshTokens: Set<String> = []

    func removed(refreshToken: String?) {
        if let refreshToken { removedRefreshTokens.insert(refreshToken) }
    }

    func edit(
        machine: SimMachine, record: [UInt8], groups: Groups, removed: Bool, name: String, family: Int?, what: String,
        resolves: Bool = false, picksMetadata: Bool = false, unseen: Set<Int> = [], seen: Set<Int> = []
    ) {
        let id = edits.count
        edits.append(
            Edit(
                id: id, machine: machine.name, record: record, groups: groups, removed: removed, name: name,
                family: family, knownBefore: machine.known.subtracting(unseen).union(seen),
                what: "\(machine.name) \(what)",
                resolves: resolves, picksMetadata: picksMetadata))
        machine.known.insert(id)
    }

    func violation(_ detail: String, kind: String = "error") {
        violations.append(Violation(kind: kind, detail: detail))
    }

    func count(_ what: String, _ n: Int = 1) { counts[what, default: 0] += n }
}
