internal import CSodium
internal import Glibc
import Synchronization

/// Random bytes from the operating system's CSPRNG, for public values such
/// as nonces, salts and identifiers. Secrets use `SecureBytes(randomCount:)`.
///
/// A deterministic simulation (Tests/VaultSimulation) replaces the source
/// on its own threads with a seeded stream (`SeededRandom`), so that one
/// seed replays a whole schedule; every other thread, and every process
/// that is not a simulation, draws from the operating system.
public enum Random {
    /// `count` random bytes.
    public static func bytes(_ count: Int) throws(CryptoError) -> [UInt8] {
        try Sodium.ready()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { fill($0) }
        return out
    }

    /// A uniform random integer in `0..<upperBound`.
    public static func uniform(_ upperBound: UInt32) throws(CryptoError) -> UInt32 {
        try Sodium.ready()
        if let seeded = SeededRandom.current { return seeded.uniform(upperBound) }
        return randombytes_uniform(upperBound)
    }

    /// A uniform random fraction in `0..<1`, for jitter; never fails (the
    /// system's generator stands in when libsodium cannot be loaded).
    package static func fraction() -> Double {
        if let seeded = SeededRandom.current { return Double(seeded.uniform(1 << 24)) / Double(1 << 24) }
        return Double.random(in: 0..<1)
    }

    /// Fills `buffer` from the calling thread's source.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        if let seeded = SeededRandom.current {
            seeded.fill(buffer)
        } else {
            randombytes_buf(base, buffer.count)
        }
    }
}

/// A seeded stream of bytes standing in for the operating system's
/// generator on the threads it is installed on: BLAKE2b keyed with the
/// seed over a block counter. Only a simulation installs one; the bytes
/// are as predictable as the seed, so nothing secret may come from it.
package final class SeededRandom: Sendable {
    /// Where the stream stands: the next block's number, and the bytes of
    /// the current block not yet given out (taken from the end).
    private struct Position {
        var counter: UInt64 = 0
        var block: [UInt8] = []
    }

    private let key: SecureBytes
    // One thread uses an installed source at a time (the simulation's
    // threads run one after another); the lock is never contended.
    private let position = Mutex(Position())

    /// A stream that `seed` (any bytes) fixes.
    package init(seed: [UInt8]) throws(CryptoError) {
        key = try SecureBytes(copying: try GenericHash.hash(Array("vault.seeded-random".utf8) + seed))
    }

    /// The source installed on the calling thread, if any.
    static var current: SeededRandom? {
        guard let raw = pthread_getspecific(SeededRandom.threadKey) else { return nil }
        return Unmanaged<SeededRandom>.fromOpaque(raw).takeUnretainedValue()
    }

    /// Runs `body` with this stream as the calling thread's source.
    package func installed<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        let previous = pthread_getspecific(SeededRandom.threadKey)
        let retained = Unmanaged.passRetained(self)
        pthread_setspecific(SeededRandom.threadKey, retained.toOpaque())
        defer {
            pthread_setspecific(SeededRandom.threadKey, previous)
            retained.release()
        }
        return try body()
    }

    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        position.withLock { p in
            for i in 0..<buffer.count {
                if p.block.isEmpty { refill(&p) }
                buffer[i] = p.block.removeLast()
            }
        }
    }

    /// The next 64 bits of the stream.
    package func next() -> UInt64 {
        var raw: UInt64 = 0
        withUnsafeMutableBytes(of: &raw) { fill($0) }
        return raw
    }

    func uniform(_ upperBound: UInt32) -> UInt32 {
        guard upperBound > 1 else { return 0 }
        // Rejection sampling, as randombytes_uniform does: no modulo bias.
        let limit = UInt32.max - UInt32.max % upperBound
        while true {
            var raw: UInt32 = 0
            withUnsafeMutableBytes(of: &raw) { fill($0) }
            if raw < limit { return raw % upperBound }
        }
    }

    private func refill(_ p: inout Position) {
        var input = Array("block".utf8)
        withUnsafeBytes(of: p.counter.littleEndian) { input.append(contentsOf: $0) }
        p.counter += 1
        // BLAKE2b cannot fail for these lengths once libsodium is loaded,
        // which the key's derivation already required.
        p.block = (try? GenericHash.hash(input, key: key, length: 64)) ?? Array(repeating: 0, count: 64)
    }
}
