public import FoundationEssentials

/// What a provider does with a refresh token presented again after it
/// issued the next one.
public enum RefreshTokenReuse: String, Sendable, Equatable {
    /// It takes the reuse for a stolen token and revokes the whole grant
    /// (Auth0, Okta and Keycloak with rotation, one-use tokens elsewhere).
    case revokes
    /// The old token keeps working until it expires (Microsoft's).
    case tolerated
}

/// How long a provider's refresh tokens live, as the provider documents it
/// (docs/providers.md, "Refresh token lifetimes"). Presets state it with a
/// link to where the provider says so; a provider file can state its own
/// (a Google app in testing, a self-hosted server). A limit the provider
/// does not document is nil: unknown, never guessed.
public struct RefreshTokenPolicy: Sendable, Equatable, Decodable {
    /// Seconds a refresh token lives from the authorization that issued
    /// it, however often it is used (LinkedIn's 365 days, a Google app in
    /// testing's 7 days). Refreshing does not move it.
    public var lifetime: TimeInterval?
    /// Seconds a refresh token may go unused before the provider lets it
    /// die (Microsoft's 90 days, Google's six months). The provider counts
    /// uses of the refresh token, which are refreshes: handing out an
    /// access token that is still fresh does not count.
    public var inactivity: TimeInterval?
    /// Whether each refresh issues a new refresh token; what a grant's own
    /// refreshes showed wins (`Grant.refreshTokenRotates`).
    public var rotates: Bool?
    /// What the provider does when a refresh token it has replaced comes
    /// back (two machines refreshing one grant each with the same token);
    /// nil when it does not say, which is to be read as `revokes` for a
    /// grant whose refresh token rotates.
    public var reuse: RefreshTokenReuse?
    /// Where the provider documents the policy.
    public var source: String?
    /// Words for people: what else ends a grant.
    public var notes: String?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case lifetime, inactivity, rotates, reuse, source, notes
    }

    /// Creates a policy.
    public init(
        lifetime: TimeInterval? = nil, inactivity: TimeInterval? = nil, rotates: Bool? = nil,
        reuse: RefreshTokenReuse? = nil, source: String? = nil, notes: String? = nil
    ) {
        self.lifetime = lifetime
        self.inactivity = inactivity
        self.rotates = rotates
        self.reuse = reuse
        self.source = source
        self.notes = notes
    }

    /// Reads the object of a provider file, refusing unknown fields;
    /// durations are written `90d`, `12h`, `30m` or `45s`.
    public init(from decoder: any Decoder) throws {
        let any = try decoder.container(keyedBy: AnyCodingKey.self)
        let known = Set(CodingKeys.allCases.map(\.rawValue))
        if let unknown = any.allKeys.map(\.stringValue).sorted().first(where: { !known.contains($0) }) {
            throw VaultError.unknownField(unknown, in: "refresh_token_policy.", known: known)
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func duration(_ key: CodingKeys) throws -> TimeInterval? {
            guard let text = try c.decodeIfPresent(String.self, forKey: key) else { return nil }
            guard let seconds = RefreshTokenPolicy.duration(text), seconds > 0 else {
                throw VaultError(
                    .invalidInput, "refresh_token_policy.\(key.rawValue) needs a duration such as 90d, 12h or 30m")
            }
            return seconds
        }
        lifetime = try duration(.lifetime)
        inactivity = try duration(.inactivity)
        rotates = try c.decodeIfPresent(Bool.self, forKey: .rotates)
        if let text = try c.decodeIfPresent(String.self, forKey: .reuse) {
            guard let value = RefreshTokenReuse(rawValue: text) else {
                throw VaultError(.invalidInput, "refresh_token_policy.reuse must be 'revokes' or 'tolerated'")
            }
            reuse = value
        }
        source = try c.decodeIfPresent(String.self, forKey: .source)
        notes = try c.decodeIfPresent(String.self, forKey: .notes)
    }

    /// True when the provider documents a limit of either kind.
    public var hasLimit: Bool { lifetime != nil || inactivity != nil }

    /// Seconds in `90d`, `12h`, `30m` or `45s`; nil for anything else.
    package static func duration(_ text: String) -> TimeInterval? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        guard let last = text.last, let unit = units[last] else { return nil }
        let digits = text.dropLast()
        guard !digits.isEmpty, digits.count <= 7, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let n = Int(digits)
        else { return nil }
        return Double(n) * unit
    }

    /// `90d`, `12h`: a duration as provider files write it.
    public static func text(_ seconds: TimeInterval) -> String {
        let s = Int(seconds)
        if s % 86400 == 0 && s >= 86400 { return "\(s / 86400)d" }
        if s % 3600 == 0 && s >= 3600 { return "\(s / 3600)h" }
        if s % 60 == 0 && s >= 60 { return "\(s / 60)m" }
        return "\(s)s"
    }
}

/// When a grant's refresh token will die, and by which rule.
public struct RefreshTokenDeadline: Sendable, Equatable {
    /// What sets the deadline.
    public enum Rule: String, Sendable, Codable {
        /// The provider said so in its token response (`refresh_token_expires_in`).
        case providerSaid = "refresh_token_expires_in"
        /// The provider's documented lifetime from the authorization.
        case lifetime
        /// The provider's documented limit on going unused, from the last refresh.
        case inactivity
    }

    /// When the refresh token dies.
    public var date: Date
    /// The rule that says so.
    public var rule: Rule
    /// Seconds the rule allows (an inactivity limit, or the life a rotated
    /// token is given), when known: the keep-alive lead time is a share of it.
    public var span: TimeInterval?
    /// True when a refresh before `date` moves it later: an inactivity
    /// limit, or a provider's expiry for a refresh token that rotates.
    public var renewable: Bool

    /// Creates a deadline.
    public init(date: Date, rule: Rule, span: TimeInterval?, renewable: Bool) {
        self.date = date
        self.rule = rule
        self.span = span
        self.renewable = renewable
    }

    /// The default keep-alive lead time: a quarter of the span, at most 7 days.
    public var defaultLead: TimeInterval { min(7 * 86400, (span ?? 28 * 86400) / 4) }

    /// True when a keep-alive at `now` should refresh the grant: the
    /// deadline can be moved and is less than `lead` (the default lead
    /// when nil) away, or already past (a refresh then tells whether the
    /// provider still takes the token).
    public func keepAliveDue(at now: Date, lead: TimeInterval? = nil) -> Bool {
        renewable && date.timeIntervalSince(now) <= (lead ?? defaultLead)
    }
}

extension Grant {
    /// When this grant's refresh token will die, by the provider's answer
    /// or by `policy` (the provider's documented rules); nil when it has
    /// no refresh token or nothing is known. The provider's own
    /// `refresh_token_expires_in` wins over the policy. Otherwise the
    /// earlier of the lifetime (from the authorization: kept in
    /// `refreshTokenExpiresAt` when the grant was authorized, else counted
    /// from `createdAt`) and the inactivity limit (from the last refresh,
    /// `refreshedAt`, or the authorization): the provider sees refreshes,
    /// not the access tokens handed out in between.
    public func refreshTokenDeadline(policy: RefreshTokenPolicy?) -> RefreshTokenDeadline? {
        guard kind == .oauth2, refreshToken != nil, !dead else { return nil }
        // Only a grant that keeps its token endpoint and client can be refreshed in time.
        let rotates = (refreshTokenRotates ?? policy?.rotates ?? false) && hasRefreshRoute
        let issued = refreshedAt ?? createdAt
        if let end = refreshTokenExpiresAt, tokenResponse?["refresh_token_expires_in"] != nil {
            // A rotating token's successor is given a life of its own.
            let span = end.timeIntervalSince(issued)
            return RefreshTokenDeadline(
                date: end, rule: .providerSaid, span: span > 0 ? span : nil, renewable: rotates)
        }
        var candidates: [RefreshTokenDeadline] = []
        if let end = refreshTokenExpiresAt ?? policy?.lifetime.map({ createdAt.addingTimeInterval($0) }) {
            candidates.append(
                RefreshTokenDeadline(date: end, rule: .lifetime, span: policy?.lifetime, renewable: false))
        }
        if let limit = policy?.inactivity {
            candidates.append(
                RefreshTokenDeadline(
                    date: issued.addingTimeInterval(limit), rule: .inactivity, span: limit,
                    renewable: hasRefreshRoute))
        }
        return candidates.min { $0.date < $1.date }
    }

    /// This grant, just authorized, with the end of its refresh token's
    /// documented lifetime kept in `refreshTokenExpiresAt` when the
    /// provider did not say it: a lifetime runs from the authorization,
    /// which nothing else in the grant records once it is refreshed or
    /// authorized again.
    public func withDocumentedLifetime(_ policy: RefreshTokenPolicy?, authorizedAt now: Date) -> Grant {
        guard kind == .oauth2, refreshToken != nil, refreshTokenExpiresAt == nil, let life = policy?.lifetime else {
            return self
        }
        var g = self
        g.refreshTokenExpiresAt = now.addingTimeInterval(life)
        return g
    }
}
