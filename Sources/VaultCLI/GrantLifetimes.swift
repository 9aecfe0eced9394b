internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore

/// What `list`, `show` and `keepalive` know about how long grants live:
/// the providers' documented refresh-token policies (presets and provider
/// files) and, for "last used", this machine's audit log. Reading the log
/// rather than writing to the vault on every token keeps `vault token`
/// fast and gives sync nothing to carry.
struct GrantLifetimes {
    let catalog: ProviderCatalog
    /// The newest token handed out for each grant on this machine.
    let lastUse: [String: Date]

    init(location: VaultLocation) {
        catalog = ProviderCatalog.load(configDirectory: location.configDirectory)
        var newest: [String: Int64] = [:]
        if let entries = try? AuditLog(directory: location.directory).read().entries {
            for e in entries where e.outcome == .allowed || e.outcome == .confirmed {
                newest[e.grant] = max(newest[e.grant] ?? e.time, e.time)
            }
        }
        lastUse = newest.mapValues(Date.init(epochSeconds:))
    }

    /// The documented policy of `grant`'s provider, when the provider is known.
    func policy(_ grant: Grant) -> RefreshTokenPolicy? { catalog.providers[grant.provider]?.refreshTokenPolicy }

    /// Whether `grant` refreshes with a refresh token at a provider this
    /// machine knows no file or preset of: the provider's documented
    /// policies (how long a refresh token lives, whether a reused one is
    /// revoked) stay with the machine that has the file, since provider
    /// files do not sync. Not for a grant imported with endpoints of its
    /// own: no provider file described it anywhere, so none is missing
    /// (as for gh's or oidc-agent's own tokens, said of nothing).
    func providerUnknown(_ grant: Grant) -> Bool {
        grant.kind == .oauth2 && grant.hasRefreshRoute && catalog.providers[grant.provider] == nil
            && catalog.files[grant.provider] == nil
            && grant.providerConfiguration?.endpointsSource != ProviderConfiguration.importedEndpoints
    }

    /// Where the provider file of `provider` would be on this machine.
    static func providerFile(_ provider: String, configDirectory: String) -> String {
        configDirectory + "/providers/" + provider + ".json"
    }

    /// When `grant`'s refresh token dies, and why.
    func deadline(_ grant: Grant) -> RefreshTokenDeadline? { grant.refreshTokenDeadline(policy: policy(grant)) }

    /// The rule in words: `after 90d unused`, `365d after authorization`, `the provider says`.
    static func ruleText(_ d: RefreshTokenDeadline) -> String {
        switch d.rule {
        case .providerSaid: return "the provider says so"
        case .lifetime: return d.span.map { "\(RefreshTokenPolicy.text($0)) after authorization" } ?? "its lifetime"
        case .inactivity: return d.span.map { "after \(RefreshTokenPolicy.text($0)) unused" } ?? "unused"
        }
    }

    /// A summary of `grant` named `name`, with its deadline and last use.
    func summary(_ name: String, _ grant: Grant, now: Date) -> GrantSummary {
        var s = GrantSummary(name: name, grant: grant, now: now)
        // A policy of refresh tokens says nothing about a grant without one.
        let relevant = grant.kind == .oauth2 && grant.refreshToken != nil
        s.addLifetime(deadline: deadline(grant), policy: relevant ? policy(grant) : nil, lastUsed: lastUse[name])
        return s
    }
}

extension GrantSummary {
    /// Adds when the refresh token dies, by which rule, and when the grant was last used here.
    mutating func addLifetime(deadline: RefreshTokenDeadline?, policy: RefreshTokenPolicy?, lastUsed: Date?) {
        refreshTokenDeadlineAt = deadline?.date.epochSeconds
        refreshTokenDeadline = deadline.map { Format.timestamp($0.date) }
        refreshTokenDeadlineRule = deadline?.rule.rawValue
        refreshTokenDeadlineRenewable = deadline?.renewable
        refreshTokenPolicySource = policy?.source
        lastUsedAt = lastUsed?.epochSeconds
        self.lastUsed = lastUsed.map(Format.timestamp)
    }
}
