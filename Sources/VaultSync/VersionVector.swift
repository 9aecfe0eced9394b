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

    /// `v` with `device`'s counter raised by one.
    static func bumped(_ v: Vector, by device: [UInt8]) -> Vector {
        merged(v, [(device, counter(v, device) + 1)])
    }
}

extension SyncRecord {
    /// What merging a local and a remote copy of one record gives.
    enum Merge: Equatable {
        /// Keep the local copy (equal, or newer).
        case keepLocal
        /// Take the remote copy.
        case takeRemote
        /// Concurrent: `winner` becomes the value, `loser` a visible conflict.
        /// The same choice on every machine: the larger sum of counters, then
        /// the larger payload bytes.
        case conflict(winner: SyncRecord, loser: SyncRecord)
    }

    static func merge(local: SyncRecord, remote: SyncRecord) -> Merge {
        switch VersionVector.compare(local.versions, remote.versions) {
        case .equal, .newer: return .keepLocal
        case .older: return .takeRemote
        case .concurrent:
            let l = local.versions.reduce(0) { $0 &+ $1.counter }
            let r = remote.versions.reduce(0) { $0 &+ $1.counter }
            let localWins =
                l != r
                ? l > r : remote.payload.lexicographicallyPrecedes(local.payload) || remote.payload == local.payload
            return localWins ? .conflict(winner: local, loser: remote) : .conflict(winner: remote, loser: local)
        }
    }
}
