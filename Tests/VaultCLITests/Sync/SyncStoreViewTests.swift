import Foundation
import Glibc
import Testing
import VaultTestSupport

/// What the store can see, checked against docs/sync.md ("What the store
/// learns"): the number of non-empty buckets, their index bytes and padded
/// sizes, and which bucket each sync replaced; nothing else per grant.
extension SyncTests {
    /// Bucket objects in the store: name, index byte (public header) and size.
    func storedBuckets() throws -> [String: (index: UInt8, size: Int)] {
        var out: [String: (index: UInt8, size: Int)] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: storeDir) where name.hasPrefix("b-") {
            let bytes = try #require(FileManager.default.contents(atPath: storeDir + "/" + name))
            // magic 8, version 2, vault id 16, key epoch 4, then the index.
            out[name] = (bytes[30], bytes.count)
        }
        return out
    }

    @Test("the store sees bucket indexes, padded sizes and which bucket changed, as documented")
    func storeView() throws {
        for (i, name) in ["work", "home", "ci"].enumerated() {
            try a.run("import", name, stdin: Home.tokenJSON("store-view-\(i)-\(String(repeating: "x", count: 40 * i))"))
        }
        try connect(a)
        try sync(a)
        let before = try storedBuckets()
        // One object per non-empty bucket: at most one per grant.
        #expect((1...3).contains(before.count))
        #expect(Set(before.values.map(\.index)).count == before.count)
        // Sizes reveal only multiples of 1 KiB: header 31, nonce 24, tag 16.
        for (name, b) in before { #expect((b.size - 31 - 24 - 16) % 1024 == 0, "\(name): \(b.size)") }

        // Changing one grant adds exactly one bucket, under the index of the
        // one it replaces: the store can follow that grant's updates by its
        // index. The replaced one stays a while ("Collecting old objects").
        try a.run("import", "work", "--replace", stdin: Home.tokenJSON("store-view-changed"))
        try sync(a)
        let after = try storedBuckets()
        let new = Set(after.keys).subtracting(before.keys)
        #expect(new.count == 1 && Set(before.keys).isSubset(of: after.keys), "new \(new)")
        if let n = new.first { #expect(before.values.contains { $0.index == after[n]?.index }) }
        #expect(after.count == before.count + 1)
    }
}
