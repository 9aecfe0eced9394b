/// Rules for grant names. An app may use any name without control
/// characters (`validate`); the command line, where names are typed and
/// become environment variable names (`WORK_ACCESS_TOKEN`), keeps them
/// simple (`validateForCommandLine`).
public enum GrantName {
    /// Longest name the command line accepts.
    public static let maximumLength = 64

    /// The longest name an app may give a grant, in UTF-8 bytes.
    public static let maximumLibraryLength = 512

    /// Names are the app's keys: throws unless `name` is 1 to 512 bytes of
    /// UTF-8 without control characters (C0, DEL, C1), which no display or
    /// protocol of a name should have to escape.
    public static func validate(_ name: String) throws(VaultError) {
        let bytes = name.utf8.count
        guard bytes > 0, bytes <= maximumLibraryLength,
            !name.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) })
        else {
            throw VaultError(
                .invalidInput, "invalid grant name (1 to \(maximumLibraryLength) bytes, no control characters)")
        }
    }

    /// The command line's stricter rule, for names it types and exports as
    /// environment variables: 1-64 characters of letters, digits and
    /// `. _ @ + -`, not starting with `-` or `.`.
    public static func validateForCommandLine(_ name: String) throws(VaultError) {
        let bytes = Array(name.utf8)
        let allowed = { (b: UInt8) -> Bool in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a)
                || b == 0x2e || b == 0x5f || b == 0x40 || b == 0x2b || b == 0x2d
        }
        guard !bytes.isEmpty, bytes.count <= maximumLength, bytes.allSatisfy(allowed),
            bytes[0] != 0x2d, bytes[0] != 0x2e
        else {
            throw VaultError(
                .invalidInput, "invalid grant name",
                remedy: .grantNameGrammar(maximumLength: maximumLength))
        }
    }
}
