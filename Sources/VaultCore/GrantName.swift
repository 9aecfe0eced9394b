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

extension GrantName {
    /// The names among `names` close enough to `name` to be what was meant
    /// (a slip of the keyboard: a letter missing, added, changed, or two
    /// swapped; case is ignored), nearest first, at most `limit`. Empty when
    /// none is close: a suggestion far from what was typed only misleads.
    package static func nearest(to name: String, among names: some Sequence<String>, limit: Int = 3) -> [String] {
        let typed = Array(name.lowercased().unicodeScalars)
        // A third of the name, at least one edit and at most three; never
        // as many as the name has characters (`g` is not near `h`).
        let allowed = min(3, max(1, typed.count / 3), typed.count - 1)
        guard allowed > 0 else { return [] }
        var near: [(distance: Int, name: String)] = []
        for candidate in names where candidate != name {
            let other = Array(candidate.lowercased().unicodeScalars)
            guard abs(other.count - typed.count) <= allowed else { continue }
            let distance = editDistance(typed, other)
            if distance <= allowed { near.append((distance, candidate)) }
        }
        near.sort { ($0.distance, $0.name) < ($1.distance, $1.name) }
        return near.prefix(limit).map(\.name)
    }

    /// Optimal string alignment distance: insertions, deletions,
    /// substitutions and swaps of two neighbours, one edit each.
    static func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        // Three rows of the table: the one before the previous, the previous, the current.
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { best = min(best, before[j - 2] + 1) }
                current[j] = best
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count]
    }
}
