internal import VaultCrypto

/// Argon2id cost of a passphrase keyslot.
public struct KDFParameters: Equatable, Sendable {
    /// Number of passes.
    public var passes: UInt32
    /// Memory in bytes.
    public var memoryBytes: UInt64

    /// Creates parameters; they are checked against the bounds when used.
    public init(passes: UInt32, memoryBytes: UInt64) {
        self.passes = passes
        self.memoryBytes = memoryBytes
    }

    /// The default for new passphrases: 3 passes over 256 MiB, about 0.7 s
    /// on a small machine. Deliberately slow; tests pass `.minimum` explicitly.
    public static let `default` = KDFParameters(passes: 3, memoryBytes: 256 << 20)

    /// libsodium's INTERACTIVE floor (2 passes, 64 MiB): the cheapest setting
    /// a vault accepts. Meant for tests and very small machines.
    public static let minimum = KDFParameters(
        passes: UInt32(PasswordHash.minimumOpsLimit), memoryBytes: PasswordHash.minimumMemLimit)

    /// Throws unless within the bounds every keyslot must respect.
    public func validate() throws(VaultError) {
        do {
            try PasswordHash.checkBounds(opsLimit: UInt64(passes), memLimit: memoryBytes)
        } catch {
            throw VaultError(.invalidInput, error.reason)
        }
    }
}
