import Foundation
import Testing

@testable import VaultCrypto

@Suite("secure memory: small values from a pool of locked slots")
struct SecureMemoryTests {
    /// Sizes around each edge: the smallest slot, the largest pooled size,
    /// and values that take pages of their own from `sodium_malloc`.
    static let sizes = [0, 1, 63, 64, 65, 4095, 4096, 4097, 32767, 32768, 32769, 100_000]

    @Test("every size starts zeroed and keeps what was written", arguments: sizes)
    func startsZeroed(count: Int) throws {
        let buffer = try SecureBuffer(count: count)
        buffer.withUnsafeBytes { #expect($0.allSatisfy { $0 == 0 }) }
        buffer.withUnsafeMutableBytes { bytes in
            for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 7 &+ 1) }
        }
        let fixed = try buffer.prefix(count)
        fixed.withUnsafeBytes { bytes in
            #expect(bytes.count == count)
            #expect(bytes.indices.allSatisfy { bytes[$0] == UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) })
        }
    }

    @Test("a slot let go is zeroed whole, what was written past the count included, before it is handed out again")
    func letGoZeroed() throws {
        // Other tests of this process take and write slots of the same
        // classes at the same time, so the slot is never read while it is
        // free: the pool hands the slot just let go out first, and the test
        // reads it only once it has it back (and tries again if another
        // thread took it in between).
        for count in [600, 17000] {
            // The slot's whole class: the next power of two from 64 bytes.
            var whole = 64
            while whole < count { whole *= 2 }
            var checked = false
            for _ in 0..<100 where !checked {
                let slot = try SecureMemory.allocate(count)
                memset(slot, 0xA5, whole)
                SecureMemory.release(slot, count: count)
                let again = try SecureMemory.allocate(count)
                defer { SecureMemory.release(again, count: count) }
                guard again == slot else { continue }
                checked = true
                #expect(UnsafeRawBufferPointer(start: again, count: whole).allSatisfy { $0 == 0 }, "\(count) bytes")
            }
            #expect(checked, "the slot let go of \(count) bytes never came back")
        }
    }

    @Test("threads taking and letting go of slots at once each keep their own bytes")
    func concurrentUse() async throws {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for t in 0..<8 {
                group.addTask {
                    var intact = true
                    for round in 0..<2000 {
                        let count = [16, 200, 3000, 9000][(t + round) % 4]
                        let mark = UInt8(truncatingIfNeeded: t &* 31 &+ round)
                        let value = try SecureBytes(count: count) { memset($0.baseAddress!, Int32(mark), count) }
                        value.withUnsafeBytes { if !$0.allSatisfy({ $0 == mark }) { intact = false } }
                    }
                    return intact
                }
            }
            for try await intact in group { #expect(intact) }
        }
    }

    @Test("memory from sodium_malloc is never taken for a slot of the pool")
    func foreignPointer() throws {
        try Sodium.ready()
        let large = try SecureMemory.allocate(SecureMemory.pooledLimit + 1)
        defer { SecureMemory.release(large, count: SecureMemory.pooledLimit + 1) }
        // Told it is small, the pool still refuses a pointer it did not give.
        #expect(SecureMemory.releaseToPool(large, count: 16) == false)
    }
}
