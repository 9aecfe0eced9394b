import Foundation
import Synchronization
import Testing
import VaultTestSupport

@testable import VaultCore

/// A long list is opened and shown in parts at once, one per processor:
/// the answers are those of one pass, in the same order.
@Suite("a long list in parts")
struct ListInPartsTests {
    let dir = TemporaryDirectory()

    @Test("every position once, in order, whatever the count", arguments: [0, 1, 255, 511, 512, 1_000, 10_007])
    func positions(count: Int) {
        let parts = inParts(count, minimumPart: 256) { range in Array(range) }
        #expect(parts.flatMap { $0 } == Array(0..<count))
        #expect(parts.count <= max(1, count / 256))
        #expect(parts.allSatisfy { !$0.isEmpty } || count == 0)
    }

    @Test("pipelined work: answers in the order handed over, at once or not", arguments: [true, false])
    func pipelinedOrder(concurrent: Bool) throws {
        let answers = try pipelined(concurrent: concurrent) { (hand: (Int) -> Void) throws(VaultError) in
            for i in 0..<50 { hand(i) }
        } work: { (i: Int) -> String in
            // Early items take longest, so later ones finish first.
            usleep(UInt32(max(0, 20 - i) * 100))
            return "answer \(i)"
        }
        #expect(answers == (0..<50).map { "answer \($0)" })
        let none = try pipelined(concurrent: concurrent) { (_: (Int) -> Void) throws(VaultError) in
        } work: {
            $0
        }
        #expect(none.isEmpty)
    }

    @Test("pipelined work: when the producer fails, the work started is waited for and the error thrown")
    func pipelinedFailure() {
        let finished = Mutex(0)
        #expect(throws: VaultError.self) {
            try pipelined(concurrent: true) { (hand: (Int) -> Void) throws(VaultError) in
                for i in 0..<5 { hand(i) }
                throw VaultError(.damaged, "the producer failed")
            } work: { (_: Int) -> Void in
                usleep(2000)
                finished.withLock { $0 += 1 }
            }
        }
        // The fifth was waiting for a sixth and never started.
        #expect(finished.withLock { $0 } == 4)
    }

    @Test("pipelined work: a lone item, and the last, are worked on by the calling thread")
    func pipelinedOnCaller() throws {
        let caller = pthread_self()
        let here = { (_: Int) -> Bool in pthread_equal(pthread_self(), caller) != 0 }
        let lone = try pipelined(concurrent: true, { (hand: (Int) -> Void) throws(VaultError) in hand(1) }, work: here)
        #expect(lone == [true])
        let several = try pipelined(
            concurrent: true, { (hand: (Int) -> Void) throws(VaultError) in for i in 0..<4 { hand(i) } }, work: here)
        #expect(several.last == true)
        if usableProcessors > 1 { #expect(several.dropLast().allSatisfy { !$0 }) }
    }

    @Test("a permutation moves each item to its place")
    func permute() {
        var generator = SystemRandomNumberGenerator()
        for count in [0, 1, 2, 7, 100, 1_000] {
            let order = Array(0..<count).shuffled(using: &generator)
            var items = (0..<count).map { "item \($0)" }
            let expected = order.map { items[$0] }
            Vault.permute(&items, by: order)
            #expect(items == expected)
        }
    }

    @Test("a list long enough to be opened in parts: every grant, sorted, and a damaged row reported alone")
    func longList() throws {
        let vault = try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
        let names = (0..<700).map { String(format: "g%04d", ($0 * 7919) % 700) }
        for name in names { try vault.save(TestKeys.grant(token: "token-\(name)"), as: name) }
        let listing = try vault.list()
        #expect(listing.problems.isEmpty)
        #expect(listing.grants.map(\.name) == names.sorted())
        #expect(listing.grants.allSatisfy { $0.grant.accessToken == "token-\($0.name)" })
        #expect(try vault.list(secrets: false).grants.allSatisfy { $0.grant.accessToken == "" })

        // A ciphertext moved onto a row late in the list (another part than
        // the first): that row alone fails, the others are listed.
        let raw = try RawVault(dir.location)
        var rows = try raw.rows()
        rows[600][4] = rows[0][4]
        rows[600][5] = rows[0][5]
        try raw.replaceRows(rows)
        let damaged = try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret())).list()
        #expect(damaged.grants.count == 699)
        #expect(damaged.problems.count == 1)
        #expect(damaged.problems.first?.reason.contains("failed authentication") == true)
        #expect(damaged.grants.map(\.name) == damaged.grants.map(\.name).sorted())

        // Problems keep the order of the rows, across parts: rows failing
        // their checks against the state first, then rows failing to open.
        rows = try raw.rows()
        rows[100][4] = rows[1][4]
        rows[100][5] = rows[1][5]
        rows[650][2] = .integer(9)
        try raw.replaceRows(rows)
        let both = try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret())).list(secrets: false)
        #expect(both.grants.count == 697)
        #expect(both.problems.count == 3)
        #expect(both.problems.first?.reason.contains("does not match the vault state") == true)
        let labels = try raw.rows().map { row -> String in
            guard case .blob(let id) = row[0] else { return "" }
            return Array(id.prefix(4)).hex
        }
        #expect(both.problems.dropFirst().map { $0.reason.contains(labels[100]) } == [true, false])
        #expect(both.problems.dropFirst().map { $0.reason.contains(labels[600]) } == [false, true])
    }
}
