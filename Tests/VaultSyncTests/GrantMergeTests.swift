import Foundation
import Testing
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// The merge of two concurrent versions of a grant, by field group
/// (docs/sync.md, "Versions and merge"), as a table.
@Suite("merging concurrent versions of a grant")
struct GrantMergeTests {
    /// A grant as stored after `vault import` under `name`.
    static let base: Payload = Payload(name: "g", grant: nil).edited(name: "g", grant: grant())

    static func grant() -> Grant {
        var g = TestKeys.grant(token: "a0", now: Date(epochSeconds: 1_800_000_000))
        g.refreshToken = "rt1"
        return g
    }

    /// `p` after a refresh: new tokens of the same lineage, no edit.
    static func refreshed(_ p: Payload, access: String, refresh: String) -> Payload {
        var g = p.grant!
        g.accessToken = access
        g.refreshToken = refresh
        return p.edited(name: p.name, grant: g, as: .refresh)
    }

    /// `p` with new tokens put in by a person (an import with --replace).
    static func imported(_ p: Payload, access: String, refresh: String?) -> Payload {
        var g = p.grant!
        g.accessToken = access
        g.refreshToken = refresh
        return p.edited(name: p.name, grant: g)
    }

    static func renamed(_ p: Payload, to name: String) -> Payload { p.edited(name: name, grant: p.grant) }

    static func side(_ p: Payload, deleted: Bool = false) -> GrantMerge.Side { .init(payload: p, deleted: deleted) }

    /// Merges both ways round, checks both give the same value, returns it.
    static func merge(_ a: GrantMerge.Side, _ b: GrantMerge.Side) -> GrantMerge {
        let ab = GrantMerge(a, b, aWins: true)
        let ba = GrantMerge(b, a, aWins: false)
        #expect(ab.value == ba.value && ab.deleted == ba.deleted && ab.conflict == ba.conflict)
        return ab
    }

    @Test("a refresh and a rename: the new name with the new tokens, no conflict")
    func refreshAndRename() {
        let a = Self.refreshed(Self.base, access: "a1", refresh: "rt2")
        var b = Self.base
        for name in ["g1", "g2", "g3", "g4"] { b = Self.renamed(b, to: name) }
        let m = Self.merge(Self.side(a), Self.side(b))
        #expect(!m.conflict)
        #expect(m.value.name == "g4")
        #expect(m.value.grant?.refreshToken == "rt2" && m.value.grant?.accessToken == "a1")
        // The value is ahead of both sides in both histories.
        #expect(m.value.lineage.spent.contains(Lineage.fingerprint("rt1")!))
        let again = Self.merge(Self.side(m.value), Self.side(b))
        #expect(!again.conflict && again.value.grant?.refreshToken == "rt2" && again.value.name == "g4")
    }

    @Test("a refresh and an older copy: the spent refresh token never wins, whichever side the vector favours")
    func spentNeverWins() {
        let a = Self.refreshed(Self.refreshed(Self.base, access: "a1", refresh: "rt2"), access: "a2", refresh: "rt3")
        for aWins in [true, false] {
            let m = GrantMerge(Self.side(Self.base), Self.side(a), aWins: aWins)
            #expect(!m.conflict && m.value.grant?.refreshToken == "rt3")
        }
    }

    @Test("two refreshes of one refresh token (the store away): a conflict, one lineage kept as the value")
    func twoRefreshes() {
        let a = Self.refreshed(Self.base, access: "a1", refresh: "rt2a")
        let b = Self.refreshed(Self.base, access: "b1", refresh: "rt2b")
        let m = Self.merge(Self.side(a), Self.side(b))
        #expect(m.conflict)
        #expect(m.value.grant?.refreshToken == "rt2a")
    }

    @Test("narrowed tokens go with the refresh token they came with, not with the metadata")
    func derivedTokensAreTokens() throws {
        // A narrowed refresh that rotated the refresh token and cached a token, racing a rename.
        var g = Self.base.grant!
        g.refreshToken = "rt2"
        g.derivedTokens = [
            DerivedToken(
                target: try TokenTarget(resource: "https://api.example/"), accessToken: "narrow", tokenType: "Bearer",
                expiresAt: Date(epochSeconds: 1_800_003_600), scopes: [], issuedAt: Date(epochSeconds: 1_800_000_000))
        ]
        let a = Self.base.edited(name: "g", grant: g, as: .refresh)
        #expect(a.lineage.meta == Self.base.lineage.meta, "caching a narrowed token is no edit of the metadata")
        let b = Self.renamed(Self.base, to: "renamed")
        let m = Self.merge(Self.side(a), Self.side(b))
        #expect(!m.conflict && m.value.name == "renamed")
        #expect(m.value.grant?.refreshToken == "rt2" && m.value.grant?.derivedTokens == g.derivedTokens)
        // An older copy with no cache never takes it away, nor brings back the spent refresh token.
        let older = Self.merge(Self.side(m.value), Self.side(Self.base))
        #expect(older.value.grant?.derivedTokens == g.derivedTokens && older.value.grant?.refreshToken == "rt2")
    }

    @Test("two renames: a conflict")
    func twoRenames() {
        let m = Self.merge(Self.side(Self.renamed(Self.base, to: "x")), Self.side(Self.renamed(Self.base, to: "y")))
        #expect(m.conflict && m.value.name == "x")
    }

    @Test("a removal and a refresh: removed, no conflict")
    func removalAndRefresh() {
        let removed = Self.base.edited(name: "g", grant: nil)
        let m = Self.merge(
            Self.side(removed, deleted: true), Self.side(Self.refreshed(Self.base, access: "a1", refresh: "rt2")))
        #expect(!m.conflict && m.deleted && m.value.grant == nil)
    }

    @Test("the same refresh token, one side found it refused: dead wins")
    func deadWins() {
        var g = Self.base.grant!
        g.dead = true
        g.deadReason = "invalid_grant"
        let dead = Self.base.edited(name: "g", grant: g, as: .refresh)
        let m = Self.merge(Self.side(dead), Self.side(Self.renamed(Self.base, to: "h")))
        #expect(!m.conflict && m.value.grant?.dead == true && m.value.name == "h")
    }

    @Test("records written before lineage: equal metadata merges, different metadata is a conflict")
    func withoutLineage() {
        let old = Payload(name: "g", grant: Self.grant())
        var newer = old
        newer.grant?.accessToken = "a1"
        #expect(!Self.merge(Self.side(old), Self.side(newer)).conflict)
        var renamed = old
        renamed.name = "h"
        #expect(Self.merge(Self.side(old), Self.side(renamed)).conflict)
    }

    @Test("two imports without a refresh token that did not see each other: a conflict, whatever their tokens")
    func twoImports() {
        let a = Self.imported(Self.base, access: "from-a", refresh: nil)
        let b = Self.imported(Self.base, access: "from-b", refresh: nil)
        #expect(a.lineage.meta == Self.base.lineage.meta, "new tokens under one name are no edit of the metadata")
        let m = Self.merge(Self.side(a), Self.side(b))
        #expect(m.conflict && m.losers == [.b] && m.value.grant?.accessToken == "from-a")
        // Even the same tokens put in twice apart race, lose nothing, and say so.
        let again = Self.merge(Self.side(a), Self.side(Self.imported(Self.base, access: "from-a", refresh: nil)))
        #expect(again.conflict)
        // An import made after seeing the other wins without a conflict.
        let later = Self.imported(a, access: "from-b-later", refresh: nil)
        let settled = Self.merge(Self.side(a), Self.side(later))
        #expect(!settled.conflict && settled.value.grant?.accessToken == "from-b-later")
    }

    @Test("an import racing a refresh: the import wins, no conflict; racing a removal: a conflict, removal the value")
    func importAgainstRefreshAndRemoval() {
        let imported = Self.imported(Self.base, access: "new", refresh: "rt-new")
        let refreshed = Self.refreshed(Self.base, access: "a1", refresh: "rt2")
        let m = Self.merge(Self.side(imported), Self.side(refreshed))
        #expect(!m.conflict && m.value.grant?.refreshToken == "rt-new")
        let removed = Self.base.edited(name: "g", grant: nil)
        let r = Self.merge(Self.side(removed, deleted: true), Self.side(imported))
        #expect(r.conflict && r.deleted && r.losers == [.b])
        // A removal that saw the import removes it, no conflict.
        let seen = Self.merge(Self.side(imported.edited(name: "g", grant: nil), deleted: true), Self.side(imported))
        #expect(!seen.conflict && seen.deleted)
    }

    @Test("a rename on one machine, new tokens on another: both hold, no conflict")
    func renameAndImport() {
        var g = Self.base.grant!
        g.accessToken = "new"
        g.refreshToken = "rt-new"
        g.createdAt = Date(epochSeconds: 1_800_000_500)
        let imported = Self.base.edited(name: "g", grant: g)
        let m = Self.merge(Self.side(Self.renamed(Self.base, to: "h")), Self.side(imported))
        #expect(!m.conflict && m.value.name == "h" && m.value.grant?.refreshToken == "rt-new")
        #expect(m.value.grant?.createdAt == g.createdAt, "created_at goes with the tokens")
    }

    @Test("two renames: picking the other side takes its name")
    func pickingTakesTheName() {
        let x = Self.renamed(Self.base, to: "x")
        let y = Self.renamed(Self.base, to: "y")
        let picked = GrantMerge.choosing(Self.side(y), over: Self.side(x))
        #expect(picked.value.name == "y" && !picked.deleted)
        // The pick has seen both: merged with either side it wins.
        #expect(!Self.merge(Self.side(picked.value), Self.side(x)).conflict)
        #expect(Self.merge(Self.side(picked.value), Self.side(x)).value.name == "y")
    }

    @Test("two picks made apart: different ones race, the same one is no conflict")
    func twoPicksApart() {
        let removal = Self.side(Self.base.edited(name: "g", grant: nil), deleted: true)
        let renamed = Self.side(Self.renamed(Self.base, to: "n19"))
        // One machine keeps the removal, the other the rename, each having
        // seen both sides but not the other's pick.
        let keptRemoval = GrantMerge.choosing(removal, over: renamed)
        let keptRename = GrantMerge.keeping(renamed, over: [removal])
        let apart = Self.merge(Self.side(keptRemoval.value, deleted: true), Self.side(keptRename))
        #expect(apart.conflict)
        // Two renames, each machine picking a different name.
        let x = Self.side(Self.renamed(Self.base, to: "x"))
        let y = Self.side(Self.renamed(Self.base, to: "y"))
        let pickedY = GrantMerge.choosing(y, over: x)
        let keptX = GrantMerge.keeping(x, over: [y])
        #expect(Self.merge(Self.side(pickedY.value), Self.side(keptX)).conflict)
        // Both machines picking the same side lose nothing.
        let keptY = GrantMerge.keeping(y, over: [x])
        let same = Self.merge(Self.side(pickedY.value), Self.side(keptY))
        #expect(!same.conflict && same.value.name == "y")
    }

    @Test("a pick between two removals keeps the newer one: a rename made apart still races it")
    func pickBetweenTwoRemovals() {
        // A removal and a rename raced; the rename became the value, the
        // removal a kept side.
        let removal = Self.base.edited(name: "g", grant: nil)
        let renamed = Self.renamed(Self.base, to: "x")
        let m = Self.merge(Self.side(renamed), Self.side(removal, deleted: true))
        #expect(m.conflict && !m.deleted)
        // One machine keeps the rename and renames it again.
        let renamedAgain = Self.renamed(
            GrantMerge.keeping(Self.side(m.value), over: [Self.side(removal, deleted: true)]), to: "y")
        // Another removes the value, then picks the kept removal.
        let removedHere = m.value.edited(name: m.value.name, grant: nil)
        let picked = GrantMerge.choosing(Self.side(removal, deleted: true), over: Self.side(removedHere, deleted: true))
        #expect(picked.deleted && picked.value.lineage.meta == removedHere.lineage.meta)
        let apart = Self.merge(Self.side(picked.value, deleted: true), Self.side(renamedAgain))
        #expect(apart.conflict, "the removal made after the conflict arrived would otherwise be lost to the rename")
        // A pick of a side whose metadata differs takes a tag of its own,
        // after both sides'.
        let x = Self.renamed(Self.base, to: "x")
        let y = Self.renamed(Self.base, to: "y")
        let pickedY = GrantMerge.picking(1, of: [Self.side(x), Self.side(y)]).value.lineage
        #expect(pickedY.meta != y.lineage.meta && pickedY.meta != x.lineage.meta)
        #expect(pickedY.metaBefore.contains(y.lineage.meta!) && pickedY.metaBefore.contains(x.lineage.meta!))
    }

    @Test("a pick, and a rename made apart of the side it did not keep, race; the same pick twice agrees")
    func pickAgainstARename() {
        // Two renames raced: x is the value on every machine, y a kept side.
        let m = Self.merge(Self.side(Self.renamed(Self.base, to: "x")), Self.side(Self.renamed(Self.base, to: "y")))
        let y = Self.renamed(Self.base, to: "y")
        let sides = [Self.side(m.value), Self.side(y)]
        #expect(m.conflict && m.value.name == "x")
        // One machine keeps y; another, not having seen that pick, keeps x
        // and renames it.
        let pickedY = GrantMerge.picking(1, of: sides).value
        let keptX = GrantMerge.picking(0, of: sides).value
        let renamed = Self.renamed(keptX, to: "z")
        let apart = Self.merge(Self.side(pickedY), Self.side(renamed))
        #expect(apart.conflict, "the pick of y would otherwise be lost to the rename")
        #expect(Self.merge(Self.side(pickedY), Self.side(keptX)).conflict)
        // Two machines keeping y agree, and a rename after either is newer
        // than both.
        let again = GrantMerge.picking(1, of: sides).value
        #expect(again.lineage.meta == pickedY.lineage.meta)
        let after = Self.merge(Self.side(pickedY), Self.side(Self.renamed(again, to: "w")))
        #expect(!after.conflict && after.value.name == "w")
        // Tokens follow their lineage: y refreshed on its machine, which
        // had not heard of the conflict, replaces the pick's tokens.
        let refreshed = Self.refreshed(y, access: "a2", refresh: "rt2")
        let merged = Self.merge(Self.side(pickedY), Self.side(refreshed))
        #expect(!merged.conflict && merged.value.name == "y" && merged.value.grant?.refreshToken == "rt2")
        // A rename of y there, made before that machine heard of the
        // conflict, did not see the pick either: they race.
        #expect(Self.merge(Self.side(pickedY), Self.side(Self.renamed(y, to: "v"))).conflict)
    }

    @Test("a side that lost a race is not taken as seen: its later refresh races the value again")
    func loserRacesAgain() {
        let a = Self.imported(Self.base, access: "from-a", refresh: "rt-a")
        let b = Self.imported(Self.base, access: "from-b", refresh: "rt-b")
        let m = Self.merge(Self.side(a), Self.side(b))
        #expect(m.conflict && m.value.grant?.refreshToken == "rt-a")
        // B refreshed its tokens before it heard of the conflict.
        let bLater = Self.refreshed(b, access: "b1", refresh: "rt-b2")
        let again = Self.merge(Self.side(m.value), Self.side(bLater))
        #expect(again.conflict, "the newest refresh token of B's tokens would otherwise be dropped silently")
    }

    @Test("an older copy of a side kept in a race is still that side: the value does not replace it silently")
    func olderCopyOfAKeptSide() {
        let a = Self.imported(Self.base, access: "from-a", refresh: "rt-a")
        let b = Self.imported(Self.base, access: "from-b", refresh: "rt-b")
        // A refreshed its tokens before the race was merged.
        let aRefreshed = Self.refreshed(a, access: "a1", refresh: "rt-a2")
        let m = Self.merge(Self.side(b), Self.side(aRefreshed))
        #expect(m.conflict && m.value.grant?.refreshToken == "rt-b")
        // The value lists rt-a as spent (it holds both histories), but rt-a
        // was spent by A's tokens, kept apart: a machine that still holds
        // them (marked dead, say) races the value, as A's side did.
        var g = a.grant!
        g.dead = true
        let stale = a.edited(name: a.name, grant: g, as: .refresh)
        let again = Self.merge(Self.side(m.value), Self.side(stale))
        #expect(again.conflict, "A's tokens would otherwise be taken as replaced by B's and folded away")
        #expect(again.value.grant?.refreshToken == "rt-b")
    }

    @Test("two removals made apart join; an edit that saw only one of them races the other")
    func joinedRemovals() {
        let a = Self.base.edited(name: "g", grant: nil)
        let b = Self.base.edited(name: "g", grant: nil)
        let joined = Self.merge(Self.side(a, deleted: true), Self.side(b, deleted: true))
        #expect(!joined.conflict && joined.deleted)
        #expect(joined.value.lineage.meta != a.lineage.meta && joined.value.lineage.meta != b.lineage.meta)
        // A pick of a renamed side that saw only b's removal.
        let renamed = Self.renamed(Self.base, to: "n")
        let picked = GrantMerge.choosing(Self.side(renamed), over: Self.side(b, deleted: true))
        #expect(Self.merge(Self.side(picked.value), Self.side(joined.value, deleted: true)).conflict)
    }

    @Test("a refresh then a removal on one machine, a rename on another: the kept name never presents the spent token")
    func removalAfterRefreshAgainstRename() {
        let refreshedThenRemoved = Self.refreshed(Self.base, access: "a1", refresh: "rt2").edited(name: "g", grant: nil)
        let renamed = Self.renamed(Self.base, to: "n")
        let m = Self.merge(Self.side(refreshedThenRemoved, deleted: true), Self.side(renamed))
        #expect(m.conflict)
        // Whichever side is the value, the rename's grant holds rt1, which
        // the removed side's refresh spent: it is dead, never refreshed.
        let kept =
            m.deleted ? GrantMerge.choosing(Self.side(renamed), over: Self.side(m.value, deleted: true)).value : m.value
        #expect(kept.name == "n" && kept.grant?.refreshToken == "rt1")
        #expect(kept.grant?.dead == true && kept.grant?.deadReason?.contains("removal") == true)
        // Without the refresh, the rename's tokens are live.
        let removed = Self.base.edited(name: "g", grant: nil)
        let plain = Self.merge(Self.side(removed, deleted: true), Self.side(renamed))
        let live =
            plain.deleted
            ? GrantMerge.choosing(Self.side(renamed), over: Self.side(plain.value, deleted: true)).value : plain.value
        #expect(live.grant?.dead == false)
    }

    @Test("a refresh racing a removal, a rename racing both: the rename never holds the spent token live")
    func refreshRacingRemovalBesideRename() {
        let renamedOnA = Self.renamed(Self.base, to: "n24")
        let removedOnA = renamedOnA.edited(name: "n24", grant: nil)
        let refreshedOnB = Self.refreshed(renamedOnA, access: "a1", refresh: "rt2")
        let renamedOnC = Self.renamed(Self.base, to: "n21")
        func kept(_ m: GrantMerge) -> Payload {
            m.deleted
                ? GrantMerge.choosing(Self.side(renamedOnC), over: Self.side(m.value, deleted: true)).value : m.value
        }
        // The removal holds against the refresh, and the new tokens go
        // with it: the rename, kept, is dead rather than present rt1 again.
        let removal = Self.merge(Self.side(removedOnA, deleted: true), Self.side(refreshedOnB))
        #expect(!removal.conflict && removal.deleted)
        let late = Self.merge(Self.side(removal.value, deleted: true), Self.side(renamedOnC))
        #expect(late.conflict)
        #expect(kept(late).name == "n21" && kept(late).grant?.refreshToken == "rt1" && kept(late).grant?.dead == true)
        // Met in the other order, the rename takes the new tokens first.
        let renamed = Self.merge(Self.side(renamedOnC), Self.side(refreshedOnB))
        #expect(renamed.value.grant?.refreshToken == "rt2")
        let early = Self.merge(Self.side(renamed.value), Self.side(removedOnA, deleted: true))
        #expect(early.conflict)
        #expect(kept(early).grant?.refreshToken == "rt2" && kept(early).grant?.dead == false)
    }

    @Test("a removal and a refusal elsewhere: removed, no conflict")
    func removalAndDeadMark() {
        var g = Self.base.grant!
        g.dead = true
        let dead = Self.base.edited(name: "g", grant: g, as: .refresh)
        let m = Self.merge(Self.side(Self.base.edited(name: "g", grant: nil), deleted: true), Self.side(dead))
        #expect(!m.conflict && m.deleted)
    }

    @Test("picking the kept side never brings back a refresh token the value spent")
    func pickingKeepsLineage() {
        let value = Self.refreshed(Self.renamed(Self.base, to: "x"), access: "a1", refresh: "rt2")
        let other = Self.renamed(Self.base, to: "y")
        let picked = GrantMerge.choosing(Self.side(other), over: Self.side(value))
        #expect(picked.value.grant?.refreshToken == "rt2" && !picked.deleted)
        // A kept side with tokens of its own lineage brings them.
        let own = Self.refreshed(Self.base, access: "b1", refresh: "rt-b")
        #expect(GrantMerge.choosing(Self.side(own), over: Self.side(value)).value.grant?.refreshToken == "rt-b")
    }

    @Test("lineage is stored in the record and read back by both readers")
    func roundTrip() throws {
        let p = Self.refreshed(Self.renamed(Self.base, to: "x"), access: "a1", refresh: "rt2")
        let bytes = try p.sealedBytes().unsafeCopyToArray()
        #expect(bytes.withUnsafeBytes { Payload.read($0) } == p)
        #expect(Payload.decodedWithFoundation(bytes) == p)
        #expect(!p.lineage.spent.isEmpty && p.lineage.meta != nil && !p.lineage.metaBefore.isEmpty)
    }
}
