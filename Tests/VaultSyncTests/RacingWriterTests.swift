import Foundation
import Synchronization
import Testing

@testable import VaultCore
@testable import VaultSync

/// The store's compare-and-swap under contention, which every promise of
/// sync rests on: of many writers that replace one object at once under
/// the same If-Match, or create one under If-None-Match, exactly one wins
/// on Ceph RGW, and the object holds its bytes (RGW may answer a losing
/// writer 500 rather than 412: a lost race, never a success). Apache's
/// mod_dav checks the condition of concurrent writers before either
/// writes, so several may be told they won; the object holds the last
/// one's bytes. That is why sync reads every root write back, twice
/// (docs/sync.md, "A sync").
@Suite("racing writers on a real store")
struct RacingWriterTests {
    static let kinds = StoreKind.available.filter { $0 == .apache || $0 == .rgw }
    static let writers = 16

    /// Runs `write(i)` on `writers` threads released together; the outcomes by writer.
    func race(_ write: @escaping @Sendable (Int) -> WriteOutcome?) -> [WriteOutcome?] {
        let outcomes = Mutex([WriteOutcome?](repeating: nil, count: Self.writers))
        let start = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        for i in 0..<Self.writers {
            group.enter()
            Thread {
                start.wait()
                let outcome = write(i)
                outcomes.withLock { $0[i] = outcome }
                group.leave()
            }.start()
        }
        for _ in 0..<Self.writers { start.signal() }
        group.wait()
        return outcomes.withLock { $0 }
    }

    /// Checks the winners against what the store holds.
    func judge(_ outcomes: [WriteOutcome?], held: [UInt8], kind: StoreKind) {
        let winners = outcomes.indices.filter { outcomes[$0] == .stored }
        #expect(outcomes.allSatisfy { $0 != nil }, "every writer had an answer: \(outcomes)")
        #expect(winners.map { Array("writer \($0)".utf8) }.contains(held), "the object holds a winner's bytes")
        if kind == .rgw {
            #expect(winners.count == 1, "outcomes: \(outcomes)")
        } else {
            #expect(!winners.isEmpty, "outcomes: \(outcomes)")
        }
    }

    @Test("16 writers replace one object under one If-Match: exactly one wins on RGW", arguments: kinds)
    func replace(kind: StoreKind) throws {
        let bench = try SyncBench(kind)
        _ = try bench.store.put("race-root", Array("first".utf8), precondition: .absent)
        let etag = try #require(try bench.store.get("race-root")?.etag)
        let clients = try (0..<Self.writers).map { _ in try #require(try bench.client()) }
        let box = UncheckedClients(clients)
        let outcomes = race { i in
            try? box.clients[i].put("race-root", Array("writer \(i)".utf8), precondition: .matches(etag))
        }
        judge(outcomes, held: try #require(try bench.store.get("race-root")).bytes, kind: kind)
    }

    @Test("16 writers create one object under If-None-Match: exactly one wins on RGW", arguments: kinds)
    func create(kind: StoreKind) throws {
        let bench = try SyncBench(kind)
        let clients = try (0..<Self.writers).map { _ in try #require(try bench.client()) }
        let box = UncheckedClients(clients)
        let outcomes = race { i in
            try? box.clients[i].put("race-new", Array("writer \(i)".utf8), precondition: .absent)
        }
        judge(outcomes, held: try #require(try bench.store.get("race-new")).bytes, kind: kind)
    }
}

/// One client per writer thread, each used by its thread alone.
final class UncheckedClients: @unchecked Sendable {
    let clients: [any SyncStore]
    init(_ clients: [any SyncStore]) { self.clients = clients }
}
