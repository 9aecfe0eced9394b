public import FoundationEssentials

/// What a narrowed access token is for: a resource (RFC 8707), an audience,
/// fewer scopes, and how it is obtained (a refresh-token grant that names
/// them, or an RFC 8693 token exchange of the grant's access token).
///
/// Two targets are the same when they name the same resource, audience,
/// set of scopes and method; each grant caches one token per target.
public struct TokenTarget: Sendable, Hashable {
    /// The resource the token is for (RFC 8707 `resource`), an absolute URI.
    public let resource: String?
    /// The audience the token is for (the `audience` parameter some
    /// providers and RFC 8693 use).
    public let audience: String?
    /// The scopes asked for, sorted and without repeats; empty for the grant's own.
    public let scopes: [String]
    /// True for an RFC 8693 token exchange of the grant's access token;
    /// false for a refresh-token grant that names the target.
    public let exchange: Bool

    /// A checked target. A resource must be an absolute URI without a
    /// fragment (RFC 8707 section 2); an audience a non-empty string without
    /// control characters; each scope a scope token (RFC 6749 section 3.3).
    /// A refresh needs at least one of them; an exchange a resource or an audience.
    public init(resource: String? = nil, audience: String? = nil, scopes: [String] = [], exchange: Bool = false)
        throws(VaultError)
    {
        if let resource {
            guard TokenTarget.isResourceURI(resource) else {
                throw VaultError(.invalidInput, "a resource must be an absolute URI without a fragment (RFC 8707)")
            }
        }
        if let audience {
            guard !audience.isEmpty, audience.utf8.count <= 2048, !TokenRequestExtras.hasControl(audience) else {
                throw VaultError(.invalidInput, "an audience must be a non-empty string without control characters")
            }
        }
        guard scopes.allSatisfy(ProviderText.isScope) else {
            throw VaultError(.invalidInput, "a scope has a character OAuth scopes cannot have (RFC 6749 section 3.3)")
        }
        if exchange {
            guard resource != nil || audience != nil else {
                throw VaultError(.invalidInput, "a token exchange needs a resource or an audience to ask for")
            }
        } else if resource == nil && audience == nil && scopes.isEmpty {
            throw VaultError(.invalidInput, "a narrowed token needs a resource, an audience or a scope")
        }
        self.init(stored: resource, audience, scopes, exchange)
    }

    /// A target as stored (read back from a record: not checked again).
    init(stored resource: String?, _ audience: String?, _ scopes: [String], _ exchange: Bool) {
        self.resource = resource
        self.audience = audience
        self.scopes = Array(Set(scopes)).sorted()
        self.exchange = exchange
    }

    /// An absolute URI (a scheme, then `:` and more) without a fragment,
    /// spaces or control characters.
    static func isResourceURI(_ s: String) -> Bool {
        guard s.utf8.count <= 2048, let colon = s.firstIndex(of: ":"), colon != s.startIndex,
            s.index(after: colon) != s.endIndex, !s.contains("#"), !s.contains(" "),
            !TokenRequestExtras.hasControl(s)
        else { return false }
        let scheme = s[..<colon]
        return scheme.first!.isASCII && scheme.first!.isLetter
            && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == ".") }
    }

    /// The target as people read it, for messages.
    public var description: String {
        var parts: [String] = []
        if let resource { parts.append("resource \(ProviderText.sanitized(resource, limit: 120))") }
        if let audience { parts.append("audience \(ProviderText.sanitized(audience, limit: 120))") }
        if !scopes.isEmpty { parts.append("scope \(scopes.joined(separator: " "))") }
        return parts.joined(separator: ", ")
    }
}

/// An access token for one target, obtained with a grant and cached in
/// its record (the grant's `derivedTokens`), so repeated asks do not go
/// to the provider. Part of the grant's tokens, never of its metadata.
public struct DerivedToken: Sendable, Equatable {
    /// What it is for.
    public var target: TokenTarget
    /// The access token.
    public var accessToken: String
    /// Its type, usually `Bearer`.
    public var tokenType: String?
    /// When it expires; nil when the provider gave no expiry.
    public var expiresAt: Date?
    /// The scopes granted, as the provider said (else those asked for).
    public var scopes: [String]
    /// When it was obtained.
    public var issuedAt: Date

    /// Creates a derived token.
    public init(
        target: TokenTarget, accessToken: String, tokenType: String?, expiresAt: Date?, scopes: [String],
        issuedAt: Date
    ) {
        self.target = target
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scopes = scopes
        self.issuedAt = issuedAt
    }

    /// How long a token the provider gave no expiry is used, in seconds.
    public static let assumedLifetime: TimeInterval = 3600
    /// How many derived tokens a grant keeps; the oldest goes first.
    public static let cacheSize = 16

    /// When it is treated as expired: its expiry, or `assumedLifetime`
    /// after it was obtained.
    public var usableUntil: Date { expiresAt ?? issuedAt.addingTimeInterval(DerivedToken.assumedLifetime) }

    /// True when more than `minimumValidity` seconds are left at `now`.
    public func isUsable(minimumValidity: TimeInterval, at now: Date) -> Bool {
        usableUntil.timeIntervalSince(now) > minimumValidity
    }
}

extension Grant {
    /// The cached token for `target` with more than `minimumValidity`
    /// seconds left at `now`, if any (none for a dead grant).
    public func derivedToken(for target: TokenTarget, minimumValidity: TimeInterval, at now: Date) -> DerivedToken? {
        guard !dead else { return nil }
        return derivedTokens.first { $0.target == target && $0.isUsable(minimumValidity: minimumValidity, at: now) }
    }

    /// The cache with `token` added: newest first, one per target, expired
    /// ones dropped, at most `DerivedToken.cacheSize`.
    package func caching(_ token: DerivedToken, now: Date) -> [DerivedToken] {
        let kept = derivedTokens.filter { $0.target != token.target && $0.usableUntil > now }
        return Array(([token] + kept).prefix(DerivedToken.cacheSize))
    }

    /// This grant as a program sees it when handed `token`: its metadata,
    /// with the narrowed access token, type, expiry and scopes, and no
    /// refresh or ID token.
    public func narrowed(to token: DerivedToken) -> Grant {
        var g = self
        g.accessToken = token.accessToken
        g.tokenType = token.tokenType ?? "Bearer"
        g.expiresAt = token.usableUntil
        g.scopes = token.scopes.isEmpty ? scopes : token.scopes
        g.refreshToken = nil
        g.idToken = nil
        g.tokenResponse = nil
        g.derivedTokens = []
        return g
    }
}

extension DerivedToken: Codable {
    enum CodingKeys: String, CodingKey {
        case target, scopes
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresAt = "expires_at"
        case issuedAt = "issued_at"
    }

    enum TargetKeys: String, CodingKey {
        case resource, audience, scopes, exchange
    }

    /// Decodes a stored derived token (docs/format.md, "Derived tokens").
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let t = try c.nestedContainer(keyedBy: TargetKeys.self, forKey: .target)
        target = TokenTarget(
            stored: try t.decodeIfPresent(String.self, forKey: .resource),
            try t.decodeIfPresent(String.self, forKey: .audience),
            try t.decodeIfPresent([String].self, forKey: .scopes) ?? [],
            try t.decodeIfPresent(Bool.self, forKey: .exchange) ?? false)
        accessToken = try c.decode(String.self, forKey: .accessToken)
        tokenType = try c.decodeIfPresent(String.self, forKey: .tokenType)
        expiresAt = try c.decodeIfPresent(Int64.self, forKey: .expiresAt).map(Date.init(epochSeconds:))
        scopes = try c.decodeIfPresent([String].self, forKey: .scopes) ?? []
        issuedAt = Date(epochSeconds: try c.decode(Int64.self, forKey: .issuedAt))
    }

    /// Encodes it as stored: empty lists and a false flag are left out.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        var t = c.nestedContainer(keyedBy: TargetKeys.self, forKey: .target)
        try t.encodeIfPresent(target.resource, forKey: .resource)
        try t.encodeIfPresent(target.audience, forKey: .audience)
        if !target.scopes.isEmpty { try t.encode(target.scopes, forKey: .scopes) }
        if target.exchange { try t.encode(true, forKey: .exchange) }
        try c.encode(accessToken, forKey: .accessToken)
        try c.encodeIfPresent(tokenType, forKey: .tokenType)
        try c.encodeIfPresent(expiresAt?.epochSeconds, forKey: .expiresAt)
        if !scopes.isEmpty { try c.encode(scopes, forKey: .scopes) }
        try c.encode(issuedAt.epochSeconds, forKey: .issuedAt)
    }
}
