internal import FoundationEssentials

/// Which grant serves git credentials for a host (and path): the file
/// `$XDG_CONFIG_HOME/vault/git-credentials.json`, mode 0600, written
/// atomically. Keys are `host[:port][/path]`; values name a grant and,
/// optionally, the user name to send.
public struct GitCredentialMap: Sendable {
    /// One mapping.
    public struct Entry: Codable, Sendable, Equatable {
        /// The name of the grant whose token serves the host.
        public var grant: String
        /// The user name git sends with the token; the provider's default when nil.
        public var username: String?

        /// Creates a mapping to `grant`.
        public init(grant: String, username: String? = nil) {
            self.grant = grant
            self.username = username
        }
    }

    /// The mappings, by host and optional path.
    public private(set) var entries: [String: Entry]
    let path: String

    /// Loads the map (empty when the file does not exist).
    public static func load(configDirectory: String) throws(VaultError) -> GitCredentialMap {
        let path = configDirectory + "/git-credentials.json"
        guard FileSystem.exists(path) else { return GitCredentialMap(entries: [:], path: path) }
        // It decides which host gets which token: only the user may write it.
        let bytes = try FileSystem.readFile(path, limit: 1 << 20, trusted: true)
        guard let entries = try? JSONDecoder().decode([String: Entry].self, from: Data(bytes)) else {
            throw VaultError(.invalidInput, "\(path) is not a valid git credential map")
        }
        return GitCredentialMap(entries: entries, path: path)
    }

    /// Sets (or with `nil`, removes) the mapping for `key`, and saves.
    public mutating func set(_ key: String, _ entry: Entry?) throws(VaultError) {
        let k = GitCredentialMap.normalize(key)
        guard !k.isEmpty, !k.contains(" ") else { throw VaultError(.invalidInput, "invalid host '\(key)'") }
        entries[k] = entry
        let directory = String(path[..<path.lastIndex(of: "/")!])
        try FileSystem.makePrivateDirectory(directory)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        guard let data = try? encoder.encode(entries) else { throw VaultError(.internalError, "cannot encode the map") }
        let bytes = try Secure.copy(data + [0x0a])
        try FileSystem.writeAtomically(path, contents: bytes, replace: true)
    }

    /// The entry for a host and path: the longest matching `host/path`
    /// prefix (on path segments), else the host alone.
    public func entry(host: String, path: String?) -> Entry? {
        let h = host.lowercased()
        if let path, !path.isEmpty {
            var segments = path.split(separator: "/").map(String.init)
            while !segments.isEmpty {
                let key = GitCredentialMap.normalize(h + "/" + segments.joined(separator: "/"))
                if let e = entries[key] { return e }
                segments.removeLast()
            }
        }
        return entries[h]
    }

    /// Host names compare without case (DNS does); paths compare exactly,
    /// as the server that serves them does: `team/App` is not `team/app`.
    static func normalize(_ key: String) -> String {
        var k = key
        for scheme in ["https://", "http://"] where k.lowercased().hasPrefix(scheme) {
            k = String(k.dropFirst(scheme.count))
        }
        while k.hasSuffix("/") { k.removeLast() }
        if k.hasSuffix(".git") { k.removeLast(4) }
        guard let slash = k.firstIndex(of: "/") else { return k.lowercased() }
        return k[..<slash].lowercased() + k[slash...]
    }
}

/// git's credential helper protocol: `key=value` lines up to a blank line.
public struct GitCredentialRequest: Sendable {
    /// The request's fields; repeated keys keep their first value.
    public var fields: [String: String] = [:]

    /// Parses git's request text.
    public init(_ text: String) {
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty { break }
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<eq])
            // Repeated keys (capability[], wwwauth[]) keep the first; vault needs none of them.
            if fields[key] == nil { fields[key] = String(line[line.index(after: eq)...]) }
        }
    }

    /// The `protocol` field (`https`).
    public var proto: String? { fields["protocol"] }
    /// The `host` field, with its port if any.
    public var host: String? { fields["host"] }
    /// The `path` field, sent when `credential.useHttpPath` is set.
    public var path: String? { fields["path"] }
}
