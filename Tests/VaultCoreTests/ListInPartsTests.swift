import Foundation
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
    }
}
