internal import FoundationEssentials
package import VaultCore
internal import VaultCrypto

/// Which token requests the agent answers by itself, which it asks the
/// person about first, and which it refuses: per grant and per origin
/// (docs/agent.md, "Forwarding"). Kept in `agent-policy.json` in the
/// configuration directory, read on every request, so a change applies at
/// once; only the user may write it.
package struct AgentPolicy: Sendable, Equatable {
    /// What the agent does with a request.
    package enum Rule: String, Sendable, Codable, CaseIterable {
        /// Hand the token out.
        case allow
        /// Ask the person on this machine; no answer in time is a refusal.
        case confirm
        /// Refuse.
        case deny
    }

    /// The rules of one grant, or the defaults; nil leaves it to the next level.
    package struct Rules: Sendable, Codable, Equatable {
        package var local: Rule?
        package var forwarded: Rule?

        package init(local: Rule? = nil, forwarded: Rule? = nil) {
            self.local = local
            self.forwarded = forwarded
        }

        package subscript(origin: AgentPeer.Origin) -> Rule? {
            get { origin == .local ? local : forwarded }
            set {
                if origin == .local { local = newValue } else { forwarded = newValue }
            }
        }

        var isEmpty: Bool { local == nil && forwarded == nil }

        private enum CodingKeys: String, CodingKey { case local, forwarded }

        /// Strict: a misspelt key is an error, never a rule silently left out.
        package init(from decoder: any Decoder) throws {
            try AgentPolicy.refuseUnknownKeys(in: decoder, allowed: ["local", "forwarded"])
            let c = try decoder.container(keyedBy: CodingKeys.self)
            local = try c.decodeIfPresent(Rule.self, forKey: .local)
            forwarded = try c.decodeIfPresent(Rule.self, forKey: .forwarded)
        }
    }

    /// Any key of a JSON object, to find the ones the policy does not know.
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private struct UnknownKey: Error {}

    fileprivate static func refuseUnknownKeys(in decoder: any Decoder, allowed: Set<String>) throws {
        let all = try decoder.container(keyedBy: AnyKey.self)
        guard all.allKeys.allSatisfy({ allowed.contains($0.stringValue) }) else { throw UnknownKey() }
    }

    /// Without a policy file: local requests are answered, as they always
    /// were; forwarded ones are confirmed, since the other machine's root
    /// can use the forwarded socket.
    package static let builtIn = Rules(local: .allow, forwarded: .confirm)

    /// The user's defaults, over `builtIn`.
    package var defaults = Rules()
    /// Rules of single grants, over the defaults.
    package var grants: [String: Rules] = [:]

    package init() {}

    /// The rule for a request for `grant` from `origin`.
    package func rule(for grant: String, origin: AgentPeer.Origin) -> Rule {
        grants[grant]?[origin] ?? defaults[origin] ?? AgentPolicy.builtIn[origin]!
    }

    /// Where the policy of the vault whose configuration is in `configDirectory` lives.
    package static func path(configDirectory: String) -> String { configDirectory + "/agent-policy.json" }

    private struct File: Codable {
        var `default`: Rules?
        var grants: [String: Rules]?

        init(default: Rules?, grants: [String: Rules]?) {
            self.default = `default`
            self.grants = grants
        }

        private enum CodingKeys: String, CodingKey { case `default`, grants }

        init(from decoder: any Decoder) throws {
            try AgentPolicy.refuseUnknownKeys(in: decoder, allowed: ["default", "grants"])
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.default = try c.decodeIfPresent(Rules.self, forKey: .default)
            grants = try c.decodeIfPresent([String: Rules].self, forKey: .grants)
        }
    }

    /// The policy in `configDirectory`, or the built-in one when there is no
    /// file. A file another user could write, or one that does not parse,
    /// is an error: the agent then refuses rather than guess.
    package static func load(configDirectory: String) throws(VaultError) -> AgentPolicy {
        let path = AgentPolicy.path(configDirectory: configDirectory)
        guard FileSystem.exists(path) else { return AgentPolicy() }
        let bytes = try FileSystem.readFile(path, limit: 1 << 20, trusted: true)
        // Read as the decoder reads JSON, not as strictly as provider files
        // (StrictJSON): 'vault policy' writes this file, and a stricter
        // reading would make agents refuse every request over a policy
        // they took before.
        guard let file = try? JSONDecoder().decode(File.self, from: Data(bytes)) else {
            throw VaultError(
                .invalidInput, "\(path) is not a valid agent policy (keys: default, grants; rules: local, forwarded)")
        }
        var policy = AgentPolicy()
        policy.defaults = file.default ?? Rules()
        policy.grants = file.grants ?? [:]
        return policy
    }

    /// Writes the policy atomically, mode 0600.
    package func save(configDirectory: String) throws(VaultError) {
        try FileSystem.makePrivateDirectory(configDirectory)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let file = File(
            default: defaults.isEmpty ? nil : defaults, grants: grants.filter { !$0.value.isEmpty })
        guard let data = try? encoder.encode(file) else {
            throw VaultError(.internalError, "cannot encode the agent policy")
        }
        let bytes = try Secure.copy(data + [0x0a])
        try FileSystem.writeAtomically(AgentPolicy.path(configDirectory: configDirectory), secret: bytes, replace: true)
    }
}
