internal import CSodium

/// libsodium's one-time initialization, done lazily and thread-safely by the
/// Swift runtime's static initializer.
enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0

    /// Throws when libsodium could not initialize (no entropy source).
    static func ready() throws(CryptoError) {
        guard initialized else { throw CryptoError(.unavailable, "libsodium could not initialize") }
    }
}

/// Zeroes memory in a way the compiler cannot optimize away.
public func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    sodium_memzero(base, buffer.count)
}

/// Zeroes an array's storage in place and empties it.
public func secureZero(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { secureZero($0) }
    bytes.removeAll()
}
