internal import CSodium

/// Random bytes from the operating system's CSPRNG, for public values such
/// as nonces, salts and identifiers. Secrets use `SecureBytes(randomCount:)`.
public enum Random {
    /// `count` random bytes.
    public static func bytes(_ count: Int) throws(CryptoError) -> [UInt8] {
        try Sodium.ready()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, count) }
        return out
    }

    /// A uniform random integer in `0..<upperBound`.
    public static func uniform(_ upperBound: UInt32) throws(CryptoError) -> UInt32 {
        try Sodium.ready()
        return randombytes_uniform(upperBound)
    }
}
