internal import VaultCore
internal import VaultCrypto

/// The merge of two concurrent versions of one grant (docs/sync.md,
/// "Versions and merge"): the metadata (name, provider, account, endpoints
/// and client, removal) and the tokens (access, refresh and ID token,
/// expiry, scopes granted, dead) are merged apart, each by its own
/// lineage, so a rename racing a refresh keeps both, and a refresh token
/// that was spent never wins over the one that replaced it.
///
/// Two edits of one group that did not see each other are a conflict,
/// whatever their values, and the side that lost one is kept whole for a
/// person to pick; nothing here looks at a clock or at which side arrived
/// first. `aWins` only says which of two racing edits becomes the value,
/// and is the same on every machine.
struct GrantMerge {
    /// One side: its payload, and whether it is a removal.
    struct Side {
        var payload: Payload
        var deleted: Bool
        var grant: Grant? { deleted ? nil : payload.grant }
        var lineage: Lineage { payload.lineage }
    }

    /// Which of the two sides.
    enum Which: Equatable {
        case a
        case b
    }

    /// The merged value.
    let value: Payload
    /// True when the value is a removal.
    let deleted: Bool
    /// The sides that lost an edit the value's side had not seen: each is
    /// kept, whole, as a conflict until someone picks.
    let losers: [Which]
    /// True when the value took the metadata of `a`.
    let metadataFromA: Bool

    /// True when two edits raced.
    var conflict: Bool { !losers.isEmpty }

    /// Merges `a` and `b`; `aWins` picks the value between racing edits.
    ///
    /// The value's lineage holds both histories, so that a later merge with
    /// either side knows the value is newer, except the tag of an edit that
    /// lost a race: the value did not replace it knowingly, and a later
    /// version of that side (a refresh of its tokens, made before it heard
    /// of the conflict) must race the value again rather than lose to it
    /// silently, or the newest refresh token of its family would be lost.
    init(_ a: Side, _ b: Side, aWins: Bool) {
        let (metaFromA, metaConflict) = GrantMerge.metadata(a, b, aWins: aWins)
        let meta = metaFromA ? a : b
        let other = metaFromA ? b : a
        metadataFromA = metaFromA
        var losers: [Which] = metaConflict ? [metaFromA ? .b : .a] : []

        var lineage = meta.lineage
        lineage.metaBefore = GrantMerge.union(
            lineage.metaBefore, (metaConflict ? [] : [other.lineage.meta].compactMap { $0 }) + other.lineage.metaBefore,
            except: lineage.meta)
        if let joined = GrantMerge.joinedTag(a, b, conflict: metaConflict) {
            // Two edits that did not see each other left the same outcome
            // (two removals, two renames to one name): the value is both,
            // and a later edit that saw only one of them still races the
            // other, so it carries a tag of its own, the same on every
            // machine, after both.
            lineage.metaBefore = GrantMerge.union(lineage.metaBefore, [meta.lineage.meta ?? ""], except: joined)
            lineage.meta = joined
        }
        lineage.spent = GrantMerge.union(a.lineage.spent, b.lineage.spent)
        lineage.presented = GrantMerge.union(a.lineage.presented, b.lineage.presented)

        guard let metaGrant = meta.grant else {
            // A removal carries no tokens; it keeps the token tag of what it
            // removed. Tokens put in on the other side that it never saw
            // are an edit it raced: kept, not dropped.
            let raced =
                !other.deleted && other.lineage.tokens != meta.lineage.tokens
                && !meta.lineage.tokensReplaced(other.lineage.tokens)
            if raced && !metaConflict { losers.append(metaFromA ? .b : .a) }
            lineage.tokensBefore = GrantMerge.union(
                lineage.tokensBefore,
                raced ? other.lineage.tokensBefore : GrantMerge.tokenHistory(other.lineage), except: lineage.tokens)
            value = Payload(name: meta.payload.name, grant: nil, lineage: lineage)
            deleted = true
            self.losers = losers
            return
        }
        // Against a removal the value's side saw (or raced, above), the
        // tokens are the value's own.
        var (tokensFromA, tokenConflict) = (metaFromA, false)
        if other.grant != nil {
            (tokensFromA, tokenConflict) = GrantMerge.tokens(a, b, aWins: aWins)
            if tokenConflict, !losers.contains(tokensFromA ? .b : .a) { losers.append(tokensFromA ? .b : .a) }
        }
        let tokens = tokensFromA ? a : b
        let tokensOther = tokensFromA ? b : a
        lineage.tokens = tokens.lineage.tokens
        lineage.tokensBefore = GrantMerge.union(
            tokens.lineage.tokensBefore,
            tokenConflict ? tokensOther.lineage.tokensBefore : GrantMerge.tokenHistory(tokensOther.lineage),
            except: lineage.tokens)
        value = Payload(
            name: meta.payload.name,
            grant: GrantMerge.checkedSpent(
                metaGrant.withTokens(of: tokens.grant ?? metaGrant), lineage, against: other),
            lineage: lineage)
        deleted = false
        self.losers = losers
    }

    /// The metadata tag of a value that two edits which did not see each
    /// other both left (nil when one saw the other, or they raced): 16 hex
    /// digits of BLAKE2b over the two tags in order, so that every machine
    /// joining the same two gives the same tag.
    static func joinedTag(_ a: Side, _ b: Side, conflict: Bool) -> String? {
        guard !conflict, let ta = a.lineage.meta, let tb = b.lineage.meta, ta != tb,
            !a.lineage.metaBefore.contains(tb), !b.lineage.metaBefore.contains(ta)
        else { return nil }
        let input = Array("vault.joined-tag.v1".utf8) + [0] + Array(min(ta, tb).utf8) + [0] + Array(max(ta, tb).utf8)
        return (try? GenericHash.hash(input, length: 16)).map { Array($0.prefix(8)).hex }
    }

    /// Whose metadata the value takes, and whether both sides edited it
    /// without seeing each other's edit.
    static func metadata(_ a: Side, _ b: Side, aWins: Bool) -> (fromA: Bool, conflict: Bool) {
        let la = a.lineage
        let lb = b.lineage
        // Two removals leave nothing to choose between.
        if a.deleted && b.deleted { return (aWins, false) }
        if let ta = la.meta, ta == lb.meta { return (aWins, false) }
        // Equal values lose nothing (two machines renaming to one name).
        let equal =
            a.payload.name == b.payload.name && a.deleted == b.deleted
            && (a.grant.map { $0.sameMetadata(as: b.grant) } ?? (b.grant == nil))
        let aSeen = la.meta.map { lb.metaBefore.contains($0) } ?? false
        let bSeen = lb.meta.map { la.metaBefore.contains($0) } ?? false
        // Each tag among the other's history: two picks made apart, each
        // keeping (and so tagged as) a side the other had seen, as picks
        // were tagged before they took tags of their own (`picking`).
        // Neither saw the other's pick: different picks raced.
        if aSeen && bSeen { return (aWins, !equal) }
        if aSeen { return (false, false) }
        if bSeen { return (true, false) }
        return (aWins, !equal)
    }

    /// Whose tokens the value takes, and whether two token edits raced.
    ///
    /// In order: a refresh token that one side spent never wins over the
    /// one that replaced it; tokens of one edit (the same tag) follow their
    /// refresh token, and are two lineages only when refreshes were made
    /// apart; otherwise the edit that saw the other's tokens wins, and two
    /// edits that saw neither are a conflict, even when their tokens look
    /// alike (two imports of tokens without a refresh token).
    static func tokens(_ a: Side, _ b: Side, aWins: Bool) -> (fromA: Bool, conflict: Bool) {
        guard let ga = a.grant else { return (false, false) }
        guard let gb = b.grant else { return (true, false) }
        let fa = Lineage.fingerprint(ga.refreshToken)
        let fb = Lineage.fingerprint(gb.refreshToken)
        // Spent by the other side's own tokens: the same edit's tokens (a
        // refresh) or tokens that replaced them knowingly. A merged value
        // also lists what a side kept apart in a race spent; a copy of
        // that side's older tokens is that side's, not the value's, to
        // replace.
        let aSpentByB =
            fa != nil && fa != fb && b.lineage.spent.contains(fa!)
            && (a.lineage.tokens == b.lineage.tokens || b.lineage.tokensReplaced(a.lineage.tokens))
        let bSpentByA =
            fb != nil && fa != fb && a.lineage.spent.contains(fb!)
            && (a.lineage.tokens == b.lineage.tokens || a.lineage.tokensReplaced(b.lineage.tokens))
        switch (aSpentByB, bSpentByA) {
        case (true, false): return (false, false)
        case (false, true): return (true, false)
        case (true, true): return (aWins, true)
        case (false, false): break
        }
        if a.lineage.tokens == b.lineage.tokens {
            guard fa == fb else { return (aWins, true) }
            // The same refresh token: either side's access token serves. A
            // side that found it refused knows more.
            if ga.dead != gb.dead { return (ga.dead, false) }
            return (aWins, false)
        }
        let aReplaced = b.lineage.tokensReplaced(a.lineage.tokens)
        let bReplaced = a.lineage.tokensReplaced(b.lineage.tokens)
        // Two picks made apart that kept different tokens, each of a side
        // the other had seen: neither saw the other's pick.
        if aReplaced && bReplaced { return (aWins, fa != fb || fa == nil) }
        if aReplaced { return (false, false) }
        if bReplaced { return (true, false) }
        return (aWins, true)
    }

    /// The value when the person keeps `sides[index]` of a conflict's
    /// sides (`sides[0]` the current value, then the other sides): the
    /// current value (`keeping`) or another side (`choosing`), with every
    /// side's history, so that the pick is newer than each.
    ///
    /// A pick between sides that leave different metadata is an edit of
    /// the metadata of its own: it takes a tag derived from the kept
    /// side's and every side's tags (`pickedTag`), not the kept side's.
    /// Under the kept side's tag, another machine that kept the other side
    /// without seeing this pick, and then renamed it, would have that tag
    /// in its history and win unseen; under a tag of its own the two
    /// race, a conflict on every machine. Two machines that keep the same
    /// side of the same sides make the same tag, and agree.
    static func picking(_ index: Int, of sides: [Side]) -> (value: Payload, deleted: Bool) {
        let current = sides[0]
        var value: Payload
        var deleted = current.deleted
        if index == 0 {
            value = keeping(current, over: Array(sides.dropFirst()))
        } else {
            (value, deleted) = choosing(sides[index], over: current)
            for (i, other) in sides.enumerated() where i != 0 && i != index {
                value = keeping(.init(payload: value, deleted: deleted), over: [other])
            }
        }
        let kept = Side(payload: value, deleted: deleted)
        if sides.contains(where: { !sameMetadata($0, kept) }), let tag = pickedTag(value.lineage.meta, of: sides) {
            value.lineage.metaBefore = union(
                value.lineage.metaBefore, [value.lineage.meta].compactMap { $0 }, except: tag)
            value.lineage.meta = tag
        }
        return (value, deleted)
    }

    /// The metadata tag of a pick that kept the side tagged `kept` among
    /// `sides`: 16 hex digits of BLAKE2b over the kept tag and all the
    /// sides' tags in order, the same on every machine that makes the
    /// same pick.
    static func pickedTag(_ kept: String?, of sides: [Side]) -> String? {
        var input = Array("vault.picked-tag.v1".utf8) + [0] + Array((kept ?? "").utf8)
        for tag in sides.map({ $0.lineage.meta ?? "" }).sorted() { input += [0] + Array(tag.utf8) }
        return (try? GenericHash.hash(input, length: 16)).map { Array($0.prefix(8)).hex }
    }

    /// The value when the person picks `chosen`, a kept side of a
    /// conflict, over `current`: exactly that side, its name included, and
    /// its tokens unless the current value spent its refresh token (which
    /// never comes back; the current value's tokens continue its lineage).
    /// Its lineage holds both sides' histories, so that the pick is newer
    /// than either.
    ///
    /// The metadata takes the chosen side's tag, unless the current value
    /// leaves the same metadata (two removals, or the same name and
    /// fields): then it keeps the current value's. That one may be an edit
    /// made here since the conflict arrived (a removal of the value), which
    /// no other machine has seen; the chosen side's tag is one they have
    /// seen, and another machine may have gone past it (picked the other
    /// side, then renamed), so the pick would lose to that rename unseen.
    static func choosing(_ chosen: Side, over current: Side) -> (value: Payload, deleted: Bool) {
        var lineage = chosen.lineage
        if sameMetadata(chosen, current), let meta = current.lineage.meta {
            lineage.meta = meta
            lineage.metaBefore = union(
                current.lineage.metaBefore, [chosen.lineage.meta].compactMap { $0 } + chosen.lineage.metaBefore,
                except: meta)
        } else {
            lineage.metaBefore = union(
                lineage.metaBefore, [current.lineage.meta].compactMap { $0 } + current.lineage.metaBefore,
                except: lineage.meta)
        }
        lineage.tokensBefore = union(lineage.tokensBefore, tokenHistory(current.lineage), except: lineage.tokens)
        lineage.spent = union(chosen.lineage.spent, current.lineage.spent)
        lineage.presented = union(chosen.lineage.presented, current.lineage.presented)
        guard let chosenGrant = chosen.grant else {
            return (Payload(name: chosen.payload.name, grant: nil, lineage: lineage), true)
        }
        var grant = chosenGrant
        let spentByCurrent = Lineage.fingerprint(chosenGrant.refreshToken).map {
            current.lineage.spent.contains($0)
        }
        if spentByCurrent == true, let tokens = current.grant {
            grant = chosenGrant.withTokens(of: tokens)
        }
        return (
            Payload(name: chosen.payload.name, grant: checkedSpent(grant, lineage, against: current), lineage: lineage),
            false
        )
    }

    /// True when two sides leave the same metadata: both removals, or the
    /// same name and fields.
    static func sameMetadata(_ a: Side, _ b: Side) -> Bool {
        if a.deleted || b.deleted { return a.deleted && b.deleted }
        return a.payload.name == b.payload.name && (a.grant.map { $0.sameMetadata(as: b.grant) } ?? false)
    }

    /// `grant`, kept against `other`, marked dead when `other` is a
    /// removal and a refresh presented the grant's refresh token, which
    /// the provider replaced (`lineage` is the value's, holding both
    /// sides' histories): a side that never saw that refresh, whose newer
    /// tokens went with the removal. A merge never brings a spent refresh
    /// token back as live (the provider would take it for a stolen one and
    /// end the family); the grant is authorized again. A refresh token
    /// that an import or a removal gave up was never presented and stays
    /// live, and so do tokens kept against live sides: there, the tokens
    /// that replaced them win (`tokens`).
    static func checkedSpent(_ grant: Grant, _ lineage: Lineage, against other: Side) -> Grant {
        guard other.deleted, !grant.dead, let f = Lineage.fingerprint(grant.refreshToken),
            lineage.presented.contains(f)
        else { return grant }
        var marked = grant
        marked.dead = true
        marked.deadReason = "a refresh replaced its refresh token, and the newer tokens went with a removal"
        return marked
    }

    /// The value when the person keeps `current` over the other sides:
    /// the same grant, with their histories, so that it is newer than each.
    static func keeping(_ current: Side, over others: [Side]) -> Payload {
        var value = current.payload
        for other in others {
            value.lineage.metaBefore = union(
                value.lineage.metaBefore, [other.lineage.meta].compactMap { $0 } + other.lineage.metaBefore,
                except: value.lineage.meta)
            value.lineage.tokensBefore = union(
                value.lineage.tokensBefore, tokenHistory(other.lineage), except: value.lineage.tokens)
        }
        return value
    }

    /// A side's token tag and the ones it replaced (`untagged` for none).
    static func tokenHistory(_ lineage: Lineage) -> [String] {
        [lineage.tokens ?? Lineage.untagged] + lineage.tokensBefore
    }

    /// The entries of both histories but `except`, at most
    /// `Lineage.depth`: those of one list (the one that sorts last, so
    /// that the union of the same two lists is the same whichever side
    /// each comes from), then the other's not among them.
    static func union(_ x: [String], _ y: [String], except: String? = nil) -> [String] {
        let (first, second) = x.lexicographicallyPrecedes(y) ? (y, x) : (x, y)
        var out = first.filter { $0 != except }
        for s in second where !out.contains(s) && s != except { out.append(s) }
        return Array(out.prefix(Lineage.depth))
    }
}
