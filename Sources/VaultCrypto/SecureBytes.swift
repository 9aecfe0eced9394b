internal import CSodium

/// Secret bytes in secure memory (`SecureMemory`): locked against swapping
/// where the system allows, kept out of core dumps, zeroed when freed.
///
/// This is the only type that should hold keys, passphrases and plaintext
/// grants for longer than a single call. Its bytes are fixed once it is
/// made (an initializer fills them), so one value may be read from any
/// number of tasks and threads at once; `SecureBuffer` is the mutable
/// kind, for reading input and decrypting into.
public final class SecureBytes: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    // The memory behind `pointer` is written in two places only: inside an
    // initializer, before `self` is returned to anyone (so before any other
    // thread can hold a reference), and when it is freed in `deinit`, after
    // the last reference is gone. Every method reads it, and none hands
    // out a pointer that may write (`withPointer` is an `UnsafePointer`).
    // So concurrent use cannot race, which the compiler cannot see through
    // a raw pointer.
    private nonisolated(unsafe) let pointer: UnsafeMutableRawPointer
    /// The number of bytes held.
    public let count: Int

    /// Allocates `count` bytes and lets `body` fill them before the value
    /// exists anywhere else; they start zeroed. `body` must not keep the
    /// buffer: after it returns, the bytes never change again.
    public init(count: Int, initializingWith body: (UnsafeMutableRawBufferPointer) -> Void) throws(CryptoError) {
        pointer = try SecureMemory.allocate(count)
        self.count = count
        body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }

    /// Allocates `count` zero bytes.
    public convenience init(count: Int) throws(CryptoError) {
        try self.init(count: count) { _ in }
    }

    /// Allocates `count` random bytes.
    public convenience init(randomCount count: Int) throws(CryptoError) {
        try Sodium.ready()
        try self.init(count: count) { Random.fill($0) }
    }

    /// Copies bytes into secure memory. The caller remains responsible for
    /// wiping its own copy.
    ///
    /// Byte arrays take this concrete path: the generic one below, called
    /// from another module, looks up the collection's conformances at run
    /// time, which costs every short-lived command a scan of the binary's
    /// conformance tables.
    package convenience init(copying bytes: [UInt8]) throws(CryptoError) {
        try self.init(count: bytes.count) { target in
            bytes.withUnsafeBytes { source in
                if let base = source.baseAddress { target.baseAddress!.copyMemory(from: base, byteCount: source.count) }
            }
        }
    }

    /// Copies bytes into secure memory. The caller remains responsible for
    /// wiping its own copy.
    public convenience init(copying bytes: some Collection<UInt8>) throws(CryptoError) {
        try self.init(count: bytes.count) { target in
            var i = 0
            for b in bytes {
                target[i] = b
                i += 1
            }
        }
    }

    deinit {
        SecureMemory.release(pointer, count: count)
    }

    /// Reads the bytes. The buffer must not escape the closure.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// The storage as a typed pointer, never nil (an empty value still owns
    /// one byte), for the C calls in this module; read only.
    func withPointer<R, E: Error>(_ body: (UnsafePointer<UInt8>, Int) throws(E) -> R) throws(E) -> R {
        defer { withExtendedLifetime(self) {} }
        return try body(UnsafePointer(pointer.assumingMemoryBound(to: UInt8.self)), count)
    }

    /// A copy of the first `length` bytes, in new secure memory.
    public func prefix(_ length: Int) throws(CryptoError) -> SecureBytes {
        let n = min(max(length, 0), count)
        return try SecureBytes(count: n) { $0.baseAddress!.copyMemory(from: pointer, byteCount: n) }
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

/// Secure memory that is written after it is made: input read a piece at
/// a time, or a scratch buffer that records are decrypted into one after
/// another. Not `Sendable`: one task or thread uses it at a time. What it
/// ends up holding becomes `SecureBytes` through `prefix(_:)`.
public final class SecureBuffer: CustomStringConvertible, CustomDebugStringConvertible {
    private let pointer: UnsafeMutableRawPointer
    /// The number of bytes held.
    public let count: Int

    /// Allocates `count` zero bytes.
    public init(count: Int) throws(CryptoError) {
        pointer = try SecureMemory.allocate(count)
        self.count = count
    }

    deinit {
        SecureMemory.release(pointer, count: count)
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

    /// The storage as a typed pointer, never nil, for the C calls in this
    /// module.
    func withPointer<R, E: Error>(_ body: (UnsafeMutablePointer<UInt8>, Int) throws(E) -> R) throws(E) -> R {
        defer { withExtendedLifetime(self) {} }
        return try body(pointer.assumingMemoryBound(to: UInt8.self), count)
    }

    /// Zeroes the bytes (a scratch buffer between uses).
    public func wipe() {
        sodium_memzero(pointer, max(count, 1))
    }

    /// A copy of the first `length` bytes, fixed, in new secure memory.
    public func prefix(_ length: Int) throws(CryptoError) -> SecureBytes {
        let n = min(max(length, 0), count)
        return try SecureBytes(count: n) { $0.baseAddress!.copyMemory(from: pointer, byteCount: n) }
    }

    /// The size only; the contents are never printed.
    public var description: String { "SecureBuffer(\(count) bytes, redacted)" }
    /// The same as `description`.
    public var debugDescription: String { description }
}

/// The allocation both kinds of secure memory share.
enum SecureMemory {
    /// Sizes up to this come from the pool of small locked slots.
    static let pooledLimit = 32768

    /// `count` zeroed bytes (at least one, so the pointer is never nil):
    /// a slot of the pool of locked memory for small values, else pages
    /// of their own from `sodium_malloc`. `release` must be given the
    /// same count.
    static func allocate(_ count: Int) throws(CryptoError) -> UnsafeMutableRawPointer {
        guard count >= 0 else { throw CryptoError(.outOfMemory, "could not allocate secure memory") }
        if count <= pooledLimit, let p = vault_secure_pool_alloc(count) { return p }
        try Sodium.ready()
        guard let p = sodium_malloc(max(count, 1)) else {
            throw CryptoError(.outOfMemory, "could not allocate secure memory")
        }
        sodium_memzero(p, max(count, 1))
        return p
    }

    /// Zeroes and frees memory from `allocate(count)`.
    static func release(_ pointer: UnsafeMutableRawPointer, count: Int) {
        if !releaseToPool(pointer, count: count) { sodium_free(pointer) }
    }

    /// Zeroes a slot of the pool and lets it go; false, doing nothing, for
    /// memory the pool did not give (`sodium_malloc`'s).
    static func releaseToPool(_ pointer: UnsafeMutableRawPointer, count: Int) -> Bool {
        count <= pooledLimit && vault_secure_pool_free(pointer, count) == 0
    }
}
