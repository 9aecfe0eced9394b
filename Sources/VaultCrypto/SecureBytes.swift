internal import CSodium

/// Secret bytes in memory from `sodium_malloc`: guard pages around them,
/// locked against swapping where the system allows, zeroed when freed.
///
/// This is the only type that should hold keys, passphrases and plaintext
/// grants for longer than a single call.
public final class SecureBytes: CustomStringConvertible, CustomDebugStringConvertible {
    private let pointer: UnsafeMutableRawPointer
    /// The number of bytes held.
    public let count: Int

    /// Allocates `count` zero bytes.
    public init(count: Int) throws(CryptoError) {
        try Sodium.ready()
        guard count >= 0, let p = sodium_malloc(max(count, 1)) else {
            throw CryptoError(.outOfMemory, "could not allocate secure memory")
        }
        sodium_memzero(p, max(count, 1))
        pointer = p
        self.count = count
    }

    /// Allocates `count` random bytes.
    public convenience init(randomCount count: Int) throws(CryptoError) {
        try self.init(count: count)
        randombytes_buf(pointer, count)
    }

    /// Copies bytes into secure memory. The caller remains responsible for
    /// wiping its own copy.
    public convenience init(copying bytes: some Collection<UInt8>) throws(CryptoError) {
        try self.init(count: bytes.count)
        let target = pointer.assumingMemoryBound(to: UInt8.self)
        var i = 0
        for b in bytes {
            target[i] = b
            i += 1
        }
    }

    deinit {
        sodium_free(pointer)
    }

    /// Reads the bytes. The buffer must not escape the closure.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Writes the bytes. The buffer must not escape the closure.
    public func withUnsafeMutableBytes<R, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }

    /// The storage as a typed pointer, never nil (an empty value still owns
    /// one byte), for the C calls in this module.
    func withPointer<R, E: Error>(_ body: (UnsafeMutablePointer<UInt8>, Int) throws(E) -> R) throws(E) -> R {
        defer { withExtendedLifetime(self) {} }
        return try body(pointer.assumingMemoryBound(to: UInt8.self), count)
    }

    /// A copy of the first `length` bytes, in new secure memory.
    public func prefix(_ length: Int) throws(CryptoError) -> SecureBytes {
        let n = min(max(length, 0), count)
        let out = try SecureBytes(count: n)
        out.pointer.copyMemory(from: pointer, byteCount: n)
        return out
    }

    /// Constant-time comparison of contents.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        count == other.count && sodium_memcmp(pointer, other.pointer, count) == 0
    }

    /// Copies the bytes out into an ordinary array. Use only where an API
    /// needs one (serialization); wipe the copy with `secureZero` after use.
    public func unsafeCopyToArray() -> [UInt8] {
        Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// The size only; the contents are never printed.
    public var description: String { "SecureBytes(\(count) bytes, redacted)" }
    /// The same as `description`.
    public var debugDescription: String { description }
}
