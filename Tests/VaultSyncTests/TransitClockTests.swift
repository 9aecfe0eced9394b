import Foundation
import Testing
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// Times in a record from another machine are taken into this machine's
/// clock by lifetimes, never by comparing clocks (docs/sync.md, "Times
/// from another machine").
@Suite("times carried from another machine")
struct TransitClockTests {
    /// A record whose grant expires at `expires` by its writer's clock,
    /// labelled with the writer's clock and the store's.
    static func record(expires: Int64, transit: TransitClock?) throws -> SyncRecord {
        var g = TestKeys.grant(token: "a", now: Date(epochSeconds: expires - 3600))
        g.expiresAt = Date(epochSeconds: expires)
        g.refreshedAt = Date(epochSeconds: expires - 3600)
        var payload = Payload(name: "g", grant: g)
        payload.transit = transit
        return SyncRecord(
            id: Array(repeating: 1, count: 16), versions: [], deleted: false,
            payload: try payload.sealedBytes().unsafeCopyToArray())
    }

    static func grant(_ r: SyncRecord) -> Grant? { r.payload.withUnsafeBytes { Payload.read($0) }?.grant }

    @Test("the lifetime left by the writer's clock, less what passed by the store's, from when we asked")
    func lifetime() throws {
        // The writer's clock is 1000 s ahead of ours; its token had 600 s
        // left when the store's clock read 5000; we asked at 10000 by our
        // clock and the store answered at 5030 by its own.
        let r = try Self.record(expires: 11_600, transit: TransitClock(writer: 11_000, store: 5000))
        let local = try SyncRound.local(r, arrival: (sent: 10_000, store: 5030))
        let g = try #require(Self.grant(local))
        #expect(g.expiresAt == Date(epochSeconds: 10_000 + 600 - 30 - 2))
        #expect(g.refreshedAt == Date(epochSeconds: 10_000 + 600 - 30 - 2 - 3600), "every token time moves alike")
        #expect(local.payload.withUnsafeBytes { Payload.read($0) }?.transit == nil, "kept in this machine's clock")
    }

    @Test("a store whose clock went back takes nothing off; a record of an older release keeps its times")
    func edges() throws {
        let back = try SyncRound.local(
            try Self.record(expires: 2000, transit: TransitClock(writer: 1000, store: 5000)),
            arrival: (sent: 100, store: 4000))
        #expect(Self.grant(back)?.expiresAt == Date(epochSeconds: 100 + 1000 - 2))
        let old = try SyncRound.local(try Self.record(expires: 2000, transit: nil), arrival: (sent: 100, store: 4000))
        #expect(Self.grant(old)?.expiresAt == Date(epochSeconds: 2000))
    }
}
