package import FoundationEssentials
internal import VaultCrypto

/// What a record's two groups of fields replaced, so that a merge of two
/// concurrent versions can tell which tokens and which metadata are newer
/// without comparing clocks (docs/sync.md, "Versions and merge").
///
/// A refresh is not an edit: it changes the token fields (access, refresh
/// and ID token, expiry, granted scopes, dead) and leaves the metadata
/// (name, provider, account, endpoints and client) alone; a rename or a
/// removal is the opposite. Each group keeps its own history, so a rename
/// racing a refresh keeps both, and a spent refresh token never wins over
/// the one that replaced it. New tokens that a person or an app puts in
/// (an import, a new authorization, a save) are an edit of the tokens:
/// they get a tag of their own, so that two such edits made apart are
/// always told apart from a refresh, whatever their tokens look like.
package struct Lineage: Equatable, Sendable {
    /// Fingerprints of the refresh tokens the current tokens replaced,
    /// newest first: each refresh that rotated, and each new authorization
    /// or import that replaced a refresh token, adds the one it spent.
    package var spent: [String] = []
    /// Fingerprints of the refresh tokens a refresh presented and the
    /// provider replaced, newest first, at most `depth` (unlike `spent`,
    /// not those an import or a removal gave up, which the provider never
    /// saw). A copy that still holds one must never present it: the
    /// provider would take it for a stolen token and end the whole family.
    package var presented: [String] = []
    /// A random tag of the current metadata, replaced by every edit of it;
    /// nil in records written before lineage was kept.
    package var meta: String?
    /// The tags this metadata replaced, newest first.
    package var metaBefore: [String] = []
    /// A random tag of the tokens' last edit (an import, an authorization,
    /// a save, a pick between conflicting sides), kept by refreshes; nil
    /// in records written before token tags were kept.
    package var tokens: String?
    /// The token tags this one replaced, newest first; `Lineage.untagged`
    /// stands for tokens written before token tags were kept.
    package var tokensBefore: [String] = []
    /// When the last edit of either group was made, in seconds since 1970
    /// by the clock of the machine that made it (taken into each reader's
    /// clock like the tokens' times): what `vault conflicts` shows as each
    /// side's time. Never used to decide anything.
    package var editedAt: Int64?

    /// How many ancestors each history keeps. A record that falls further
    /// behind than this while another machine keeps changing it is merged
    /// as a conflict, never silently.
    package static let depth = 32

    /// What `tokensBefore` holds for tokens that had no tag.
    package static let untagged = "-"

    package init(
        spent: [String] = [], meta: String? = nil, metaBefore: [String] = [], tokens: String? = nil,
        tokensBefore: [String] = []
    ) {
        self.spent = spent
        self.meta = meta
        self.metaBefore = metaBefore
        self.tokens = tokens
        self.tokensBefore = tokensBefore
    }

    var isEmpty: Bool {
        spent.isEmpty && presented.isEmpty && meta == nil && metaBefore.isEmpty && tokens == nil && tokensBefore.isEmpty
            && editedAt == nil
    }

    /// The fingerprint of a refresh token: 16 bytes of BLAKE2b under a label
    /// of its own, kept only inside the record's ciphertext.
    package static func fingerprint(_ refreshToken: String?) -> String? {
        guard let refreshToken, !refreshToken.isEmpty else { return nil }
        var input = Array("vault.lineage.v1".utf8) + [0] + Array(refreshToken.utf8)
        defer { secureZero(&input) }
        return (try? GenericHash.hash(input, length: 16))?.hex
    }

    /// The lineage after the tokens changed from `old` to `new`: the
    /// refresh token given up, if any, joins the spent ones.
    package func replacingTokens(of old: Grant?, with new: Grant?) -> Lineage {
        var next = self
        next.spent = Lineage.given(up: old, for: new, to: spent)
        return next
    }

    /// The lineage after a refresh presented `old`'s refresh token and the
    /// provider answered with `new`'s.
    package func presenting(_ old: Grant?, for new: Grant?) -> Lineage {
        var next = self
        next.presented = Lineage.given(up: old, for: new, to: presented)
        return next
    }

    /// `list` with the fingerprint of `old`'s refresh token first, when
    /// `new` holds another one and the list does not have it yet.
    private static func given(up old: Grant?, for new: Grant?, to list: [String]) -> [String] {
        guard let before = fingerprint(old?.refreshToken), before != fingerprint(new?.refreshToken),
            !list.contains(before)
        else { return list }
        return Array(([before] + list).prefix(depth))
    }

    /// The lineage after an edit of the metadata: a new tag, the old one
    /// remembered.
    package func editingMetadata() -> Lineage {
        var next = self
        if let meta { next.metaBefore = Array(([meta] + metaBefore.filter { $0 != meta }).prefix(Lineage.depth)) }
        next.meta = (try? Random.bytes(8))?.hex
        return next
    }

    /// The lineage after an edit of the tokens: a new tag, the old one
    /// (or `untagged`) remembered.
    package func editingTokens() -> Lineage {
        var next = self
        let old = tokens ?? Lineage.untagged
        next.tokensBefore = Array(([old] + tokensBefore.filter { $0 != old }).prefix(Lineage.depth))
        next.tokens = (try? Random.bytes(8))?.hex
        return next
    }

    /// True when these tokens replaced, knowingly, the tokens tagged `tag`
    /// (nil: tokens written before tags were kept).
    package func tokensReplaced(_ tag: String?) -> Bool {
        tokensBefore.contains(tag ?? Lineage.untagged)
    }
}

extension Payload {
    /// How a change of a record's grant came about.
    package enum Change {
        /// A person or an app changed it (a save, a rename, a removal):
        /// new tokens are an edit of the tokens.
        case edit
        /// A refresh, a refusal or what the provider said after one: the
        /// tokens follow their lineage, no edit of them.
        case refresh
    }

    /// The payload after a local change of `grant` (nil: a removal): a new
    /// metadata tag when the metadata or the name changed, a new token tag
    /// when an edit brought other tokens, and the refresh token the new
    /// grant gives up counted as spent. A removal keeps the token tag of
    /// what it removed, so that tokens put in elsewhere that it never saw
    /// are told apart from the ones it meant to remove.
    package func edited(name newName: String, grant newGrant: Grant?, as change: Change = .edit, at now: Date? = nil)
        -> Payload
    {
        var next = self
        next.lineage = lineage.replacingTokens(of: grant, with: newGrant)
        if change == .refresh { next.lineage = next.lineage.presenting(grant, for: newGrant) }
        if newName != name || (newGrant == nil) != (grant == nil)
            || newGrant.map({ !$0.sameMetadata(as: grant) }) ?? false
        {
            next.lineage = next.lineage.editingMetadata()
        }
        if change == .edit, let newGrant, grant.map({ !newGrant.sameTokens(as: $0) }) ?? true {
            next.lineage = next.lineage.editingTokens()
        }
        if let now, next.lineage.meta != lineage.meta || next.lineage.tokens != lineage.tokens {
            next.lineage.editedAt = now.epochSeconds
        }
        next.name = newName
        next.grant = newGrant
        return next
    }
}

extension Grant {
    /// True when the fields a refresh never changes are equal (the
    /// metadata group of docs/sync.md). `created_at` is not among them: it
    /// says when the tokens' authorization began, and goes with them.
    package func sameMetadata(as other: Grant?) -> Bool {
        guard let other else { return false }
        return provider == other.provider && kind == other.kind && account == other.account
            && providerConfiguration == other.providerConfiguration
    }

    /// True when the tokens are the same ones (the token group's secrets
    /// and its refusal): an edit that brings others is an edit of the tokens.
    package func sameTokens(as other: Grant) -> Bool {
        accessToken == other.accessToken && refreshToken == other.refreshToken && tokenSecret == other.tokenSecret
            && idToken == other.idToken && dpopKey == other.dpopKey && dead == other.dead
    }

    /// This grant's metadata with `tokens`' token fields.
    package func withTokens(of tokens: Grant) -> Grant {
        var g = tokens
        g.provider = provider
        g.kind = kind
        g.account = account
        g.providerConfiguration = providerConfiguration
        // A DPoP key is stored only with an OAuth 2.0 grant (kind
        // oauth2_dpop): under another kind the record could not be read.
        if g.kind != .oauth2 { g.dpopKey = nil }
        return g
    }
}
