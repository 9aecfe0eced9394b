/// Version vectors of synced records (docs/sync.md, "Versions and merge").
enum VersionVector {
    typealias Vector = [(device: [UInt8], counter: UInt64)]

    enum Order: Equatable {
        case equal
        /// The first has seen everything the second has, and more.
        case newer
        /// The second is newer.
        case older
        /// Each has changes the other has not seen.
        case concurrent
    }

    static func counter(_ v: Vector, _ device: [UInt8]) -> UInt64 {
        v.first { $0.device == device }?.counter ?? 0
    }

    static func compare(_ a: Vector, _ b: Vector) -> Order {
        var aAhead = false
        var bAhead = false
        for device in Set(a.map(\.device) + b.map(\.device)) {
            let (x, y) = (counter(a, device), counter(b, device))
            if x > y { aAhead = true }
            if y > x { bAhead = true }
        }
        switch (aAhead, bAhead) {
        case (false, false): return .equal
        case (true, false): return .newer
        case (false, true): return .older
        case (true, true): return .concurrent
        }
    }

    /// The device whose change `a` has and `b` lacks (the one that went
    /// furthest past `b`), or zeros when `a` has none.
    static func author(_ a: Vector, over b: Vector) -> [UInt8] {
        a.filter { $0.counter > counter(b, $0.device) }
            .max { $0.counter - counter(b, $0.device) < $1.counter - counter(b, $1.device) }?.device
            ?? Array(repeating: 0, count: 16)
    }

    /// The element-wise maximum, sorted by device.
    static func merged(_ a: Vector, _ b: Vector) -> Vector {
        Set(a.map(\.device) + b.map(\.device)).sorted { $0.lexicographicallyPrecedes($1) }
            .map { ($0, max(counter(a, $0), counter(b, $0))) }
    }

    /// `v` with `device`'s counter raised for a change that the device's
    /// vault holds as local version `version` of the record: to that
    /// version, or by one where it is already there.
    ///
    /// A device's counter is the record's local version, which only ever
    /// grows, rather than the last counter it remembers sending: a machine
    /// killed after the store took its change, before it noted the vector,
    /// would otherwise give its next change the same counter, and every
    /// other machine would take that change for the one it already has (a
    /// removal undone by a refresh elsewhere, found by the simulation).
    static func bumped(_ v: Vector, by device: [UInt8], at version: UInt64) -> Vector {
        merged(v, [(device, max(version, counter(v, device) + 1))])
    }
}

extension SyncRecord {
    /// True when `a` becomes the value over `b` between racing edits: the
    /// larger sum of counters, then the larger id of the device that made
    /// the change the other lacks. Decided by the two vectors alone, so
    /// every machine that merges the two decides the same, whichever of
    /// them it holds.
    static func firstWins(_ a: SyncRecord, over b: SyncRecord) -> Bool {
        let sa = a.versions.reduce(0) { $0 &+ $1.counter }
        let sb = b.versions.reduce(0) { $0 &+ $1.counter }
        if sa != sb { return sa > sb }
        let da = VersionVector.author(a.versions, over: b.versions)
        let db = VersionVector.author(b.versions, over: a.versions)
        return !da.lexicographicallyPrecedes(db)
    }

    /// The other sides record `a` keeps after a merge with `b`: each side's
    /// own that the other has not settled (a side the other has seen but
    /// does not keep was picked over, or continued by it), then the sides
    /// that lost an edit in this merge, whole. At most
    /// `SyncBucket.maxSiblings`: the newest are kept.
    static func siblings(merging a: SyncRecord, _ b: SyncRecord, losers: [GrantMerge.Which]) -> [SyncSibling] {
        func same(_ x: VersionVector.Vector, _ y: VersionVector.Vector) -> Bool {
            VersionVector.compare(x, y) == .equal
        }
        func unsettled(_ of: SyncRecord, by other: SyncRecord) -> [SyncSibling] {
            of.siblings.filter { s in
                let order = VersionVector.compare(s.versions, other.versions)
                return order == .newer || order == .concurrent
                    || other.siblings.contains { same($0.versions, s.versions) }
            }
        }
        var out = unsettled(a, by: b)
        for s in unsettled(b, by: a) where !out.contains(where: { same($0.versions, s.versions) }) { out.append(s) }
        for loser in losers {
            let (side, other) = loser == .a ? (a, b) : (b, a)
            guard !out.contains(where: { same($0.versions, side.versions) }) else { continue }
            out.append(
                SyncSibling(
                    versions: side.versions, deleted: side.deleted, payload: side.payload,
                    device: VersionVector.author(side.versions, over: other.versions),
                    valueDevice: VersionVector.author(other.versions, over: side.versions)))
        }
        return Array(out.suffix(SyncBucket.maxSiblings))
    }

    /// What merging a local and a remote copy of one record gives.
    enum Merge: Equatable {
        /// Keep the local copy (equal, or newer).
        case keepLocal
        /// Take the remote copy.
        case takeRemote
        /// Concurrent: `winner` becomes the value where their edits race
        /// (`firstWins`), the same choice on every machine.
        case conflict(winner: SyncRecord, loser: SyncRecord)
    }

    static func merge(local: SyncRecord, remote: SyncRecord) -> Merge {
        switch VersionVector.compare(local.versions, remote.versions) {
        case .equal, .newer: return .keepLocal
        case .older: return .takeRemote
        case .concurrent:
            return firstWins(local, over: remote)
                ? .conflict(winner: local, loser: remote) : .conflict(winner: remote, loser: local)
        }
    }
}
