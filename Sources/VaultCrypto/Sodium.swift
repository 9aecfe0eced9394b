internal import CSodium
internal import Glibc

/// libsodium, loaded and initialized on first use (CSodium).
enum Sodium {
    /// Throws when libsodium cannot be loaded or could not initialize.
    static func ready() throws(CryptoError) {
        var error: UnsafePointer<CChar>?
        guard vault_sodium_load(&error) == 0 else {
            throw CryptoError(.unavailable, error.map { String(cString: $0) } ?? "libsodium could not initialize")
        }
    }
}

/// Zeroes memory in a way the compiler cannot optimize away. glibc's
/// `explicit_bzero`, so wiping a token does not load libsodium.
public func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    explicit_bzero(base, buffer.count)
}

/// Zeroes an array's storage in place and empties it.
public func secureZero(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { secureZero($0) }
    bytes.removeAll()
}
