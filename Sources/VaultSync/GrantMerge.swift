internal import VaultCore

/// The merge of two concurrent versions of one grant (docs/sync.md,
/// "Versions and merge"): the metadata (name, provider, account, endpoints
/// and client, removal) and the tokens (access, refresh and ID token,
/// expiry, scopes granted, dead) are merged apart, each by its own
/// lineage, so a rename racing a refresh keeps both, and a refresh token
/// that was spent never wins over the one that replaced it.
struct GrantMerge {
    /// One side: its payload, and whether it is a removal.
    struct Side {
        var payload: Payload
        var deleted: Bool
        var grant: Grant? { deleted ? nil : payload.grant }
    }

    /// The merged value.
    let value: Payload
    /// True when the value is a removal.
    let deleted: Bool
    /// True when the two sides changed the same group of fields apart:
    /// both metadata edits, or tokens of two lineages (two authorizations,
    /// or refreshes made apart while the store could not be reached). The
    /// side that lost is then kept for the user to pick.
    let conflict: Bool
    /// True when the value took the metadata of `a`.
    let metadataFromA: Bool

    /// Merges `a` and `b`; `aWins` breaks ties (the same on every machine).
    init(_ a: Side, _ b: Side, aWins: Bool) {
        let (metaFromA, metaConflict) = GrantMerge.metadata(a, b, aWins: aWins)
        let meta = metaFromA ? a : b
        var lineage = meta.payload.lineage
        let other = metaFromA ? b : a
        // Both histories: a later merge with either side then knows it is
        // behind the value.
        var before = lineage.metaBefore
        for tag in [other.payload.lineage.meta].compactMap({ $0 }) + other.payload.lineage.metaBefore
        where tag != lineage.meta && !before.contains(tag) {
            before.append(tag)
        }
        lineage.metaBefore = Array(before.prefix(Lineage.depth))
        metadataFromA = metaFromA

        guard let metaGrant = meta.grant else {
            // A removal carries no tokens; its lineage keeps what was spent.
            lineage.spent = GrantMerge.union(a.payload.lineage.spent, b.payload.lineage.spent)
            value = Payload(name: meta.payload.name, grant: nil, lineage: lineage)
            deleted = true
            conflict = metaConflict
            return
        }
        let (tokensFromA, tokenConflict) = GrantMerge.tokens(a, b, aWins: aWins)
        let tokens = tokensFromA ? a : b
        let tokenGrant = tokens.grant ?? metaGrant
        lineage.spent = GrantMerge.union(tokens.payload.lineage.spent, (tokensFromA ? b : a).payload.lineage.spent)
        value = Payload(name: meta.payload.name, grant: metaGrant.withTokens(of: tokenGrant), lineage: lineage)
        deleted = false
        conflict = metaConflict || tokenConflict
    }

    /// Whose metadata the value takes, and whether both sides edited it.
    static func metadata(_ a: Side, _ b: Side, aWins: Bool) -> (fromA: Bool, conflict: Bool) {
        let la = a.payload.lineage
        let lb = b.payload.lineage
        if let ta = la.meta, ta == lb.meta { return (aWins, false) }
        if a.payload.name == b.payload.name && a.deleted == b.deleted
            && (a.grant.map { $0.sameMetadata(as: b.grant) } ?? (b.grant == nil))
        {
            return (aWins, false)
        }
        if let ta = la.meta, lb.metaBefore.contains(ta) { return (false, false) }
        if let tb = lb.meta, la.metaBefore.contains(tb) { return (true, false) }
        return (aWins, true)
    }

    /// Whose tokens the value takes, and whether they are of two lineages.
    static func tokens(_ a: Side, _ b: Side, aWins: Bool) -> (fromA: Bool, conflict: Bool) {
        guard let ga = a.grant else { return (false, false) }
        guard let gb = b.grant else { return (true, false) }
        let fa = Lineage.fingerprint(ga.refreshToken)
        let fb = Lineage.fingerprint(gb.refreshToken)
        if let fa, b.payload.lineage.spent.contains(fa) { return (false, false) }
        if let fb, a.payload.lineage.spent.contains(fb) { return (true, false) }
        if fa == fb {
            // The same refresh token: either side's access token serves. A
            // side that found it refused knows more.
            if ga.dead != gb.dead { return (ga.dead, false) }
            return (aWins, false)
        }
        return (aWins, true)
    }

    /// The value when the user picks `chosen`, the kept side of a conflict,
    /// over `current`: its metadata (or its removal) under the current
    /// name, and its tokens unless the current value spent its refresh
    /// token, which never comes back.
    static func choosing(_ chosen: Side, over current: Side) -> (value: Payload, deleted: Bool) {
        var lineage = current.payload.lineage.editingMetadata()
        guard let chosenGrant = chosen.grant else {
            return (Payload(name: current.payload.name, grant: nil, lineage: lineage), true)
        }
        let spentByCurrent = Lineage.fingerprint(chosenGrant.refreshToken).map {
            current.payload.lineage.spent.contains($0)
        }
        var grant = chosenGrant
        if spentByCurrent == true, let tokens = current.grant {
            grant = chosenGrant.withTokens(of: tokens)
        } else {
            lineage = lineage.replacingTokens(of: current.grant, with: chosenGrant)
        }
        lineage.spent = union(lineage.spent, chosen.payload.lineage.spent)
        return (Payload(name: current.payload.name, grant: grant, lineage: lineage), false)
    }

    /// `first`'s entries, then `second`'s not among them, at most `Lineage.depth`.
    static func union(_ first: [String], _ second: [String]) -> [String] {
        var out = first
        for s in second where !out.contains(s) { out.append(s) }
        return Array(out.prefix(Lineage.depth))
    }
}
