/// Rules for grant names: they become environment variable names
/// (`WORK_ACCESS_TOKEN`) and appear in commands, so they are kept simple.
public enum GrantName {
    /// Longest accepted name.
    public static let maximumLength = 64

    /// Throws unless `name` is 1-64 characters of letters, digits and
    /// `. _ @ + -`, not starting with `-` or `.`.
    public static func validate(_ name: String) throws(VaultError) {
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
                hint: "use 1 to \(maximumLength) letters, digits and . _ @ + -, not starting with - or .")
        }
    }
}
