import Foundation
import VaultCore
import VaultCrypto
import VaultSync

/// The invariants checked after a schedule has healed, on what every
/// machine's vault holds, against the simulation's own account (`Ledger`)
/// and the provider's truth.
struct Oracle {
    let machines: [SimMachine]
    let provider: SimProvider
    let ledger: Ledger
    let log: (String) -> Void

    /// One side of a record as a machine holds it: its value, or a kept
    /// side of a conflict.
    struct Side: Equatable, Comparable, CustomStringConvertible {
        var removed: Bool
        var name: String
        var access: String?
        var refresh: String?
        var dead: Bool

        static func < (a: Side, b: Side) -> Bool { a.description < b.description }

        var description: String {
            removed ? "removed '\(name)'" : "'\(name)'\(dead ? " dead" : "") \(access ?? "-") \(refresh ?? "-")"
        }
    }

    struct Record: Equatable {
        var value: Side
        var others: [Side]
    }

    func check() {
        var views: [[[UInt8]: Record]] = []
        for machine in machines {
            do {
                views.append(try view(of: machine))
            } catch {
                ledger.violation("\(machine.name)'s vault could not be read: \(error)", kind: "damaged")
                return
            }
        }
        for (i, other) in views.enumerated().dropFirst() where other != views[0] {
            ledger.violation(
                "\(machines[0].name) and \(machines[i].name) differ after healing: "
                    + difference(views[0], other), kind: "diverged")
        }
        checkEdits(views[0])
        checkTokens(views[0])
        checkPassphrases()
        for reuse in provider.reuses {
            let what =
                "refresh token \(reuse.generation) of family \(reuse.family) presented again by \(reuse.presenter)"
            if let excuse = reuse.excuse {
                ledger.count("reuse: " + excuse)
            } else {
                ledger.violation(what, kind: "spent token presented")
            }
        }
    }

    /// What `machine` holds: each record's value and its conflicts' other sides.
    private func view(of machine: SimMachine) throws -> [[UInt8]: Record] {
        let vault = try Vault.open(
            at: machine.location, key: .keyfile(try SecureBytes(copying: SimMachine.keyFile)), time: machine.clock)
        let listing = try vault.list(secrets: false)
        for problem in listing.problems {
            ledger.violation("\(machine.name): \(problem.code) \(problem.reason)", kind: "damaged")
        }
        var records: [[UInt8]: Record] = [:]
        for row in try vault.allRows() {
            let payload = try vault.keys.open([row], secrets: true)[0].get()
            records[row.id] = Record(value: side(removed: row.deleted, name: payload.name, payload.grant), others: [])
        }
        let engine = SyncEngine(vault: vault, transport: SimTransport(machine: machine))
        for conflict in try engine.syncConflicts() {
            let hash = try vault.keys.nameHash(conflict.name)
            guard
                let row = try vault.findRow(nameHash: hash, deleted: false)
                    ?? vault.findRow(nameHash: hash, deleted: true)
            else {
                ledger.violation("\(machine.name) keeps a conflict on '\(conflict.name)', which it has no record of")
                continue
            }
            records[row.id]?.others.append(
                side(removed: conflict.other == nil, name: conflict.otherName, conflict.other))
            records[row.id]?.others.sort()
        }
        return records
    }

    private func side(removed: Bool, name: String, _ grant: Grant?) -> Side {
        Side(
            removed: removed || grant == nil, name: name, access: removed ? nil : grant?.accessToken,
            refresh: removed ? nil : grant?.refreshToken, dead: grant?.dead ?? false)
    }

    private func difference(_ a: [[UInt8]: Record], _ b: [[UInt8]: Record]) -> String {
        var lines: [String] = []
        for id in Set(a.keys).union(b.keys).sorted(by: { $0.lexicographicallyPrecedes($1) }) where a[id] != b[id] {
            lines.append(
                "record \(Array(id.prefix(2)).hex): \(describe(a[id])) against \(describe(b[id]))")
        }
        return lines.prefix(4).joined(separator: "; ")
    }

    private func describe(_ r: Record?) -> String {
        guard let r else { return "nothing" }
        return describe(r.value)
            + (r.others.isEmpty ? "" : " with other sides " + r.others.map(describe).joined(separator: ", "))
    }

    /// A side as the report shows it: tokens by family and generation, never the tokens.
    private func describe(_ side: Side) -> String {
        guard !side.removed else { return "removed '\(side.name)'" }
        func label(_ token: String?, _ kind: String) -> String {
            guard let token, let f = provider.family(of: token) else { return "no \(kind)" }
            return "\(kind) \(f).\(provider.generation(of: token) ?? 0)"
        }
        return
            "'\(side.name)'\(side.dead ? " (dead)" : "") [\(label(side.access, "access")), \(label(side.refresh, "refresh"))]"
    }

    private func family(_ side: Side) -> Int? { provider.family(of: side.refresh ?? side.access) }

    /// Every acknowledged edit that no later edit replaced on purpose is in
    /// the value or kept as another side; two edits of one group that did
    /// not see each other, with different outcomes, leave a conflict until a
    /// pick that knew both; and with no such race left, no conflict.
    private func checkEdits(_ records: [[UInt8]: Record]) {
        let byRecord = Dictionary(grouping: ledger.edits.filter { $0.record != Ledger.passphrase }, by: \.record)
        let awayFamilies = Set(provider.reuses.filter { $0.excuse != nil }.map(\.family))
        for (id, edits) in byRecord.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            guard let record = records[id] else {
                ledger.violation("record \(Array(id.prefix(2)).hex) of \(edits[0].what) is gone", kind: "lost edit")
                continue
            }
            var unsettled: [(Ledger.Edit, Ledger.Edit)] = []
            var raced = false
            for meta in [true, false] {
                let touching = edits.filter { meta ? $0.groups.meta : $0.groups.tokens }
                // A pick of a side adopts that side's edit of the group: a
                // later edit in that side's line that knew the edit is
                // newer than the pick too. Not of the metadata when the
                // sides left different metadata: such a pick is an edit of
                // its own, and an edit that did not know it races it (a
                // rename of the side it did not keep, made on a machine
                // that had kept that side).
                var adopted: [Int: Int] = [:]
                for r in touching where r.resolves && !(meta && r.picksMetadata) {
                    let candidates = touching.filter {
                        $0.id != r.id && r.knownBefore.contains($0.id)
                            && outcome($0, meta: meta) == outcome(r, meta: meta)
                    }
                    adopted[r.id] = candidates.filter { c in !candidates.contains { $0.knownBefore.contains(c.id) } }
                        .map(\.id).max()
                }
                // A pick that kept what an earlier pick kept adopts what
                // that one adopted too: the same tokens or name, picked
                // again (a second conflict on the grant), so an edit that
                // knew the first adopted edit went past both picks.
                // Two picks of the metadata made apart that kept the same
                // outcome between the same sides (the last edits each knew)
                // are one pick, as the merge takes them (the same tag): an
                // edit that knew one went past both.
                func sides(_ r: Ledger.Edit) -> Set<Int> {
                    let known = touching.filter { r.knownBefore.contains($0.id) }
                    return Set(known.filter { e in !known.contains { $0.knownBefore.contains(e.id) } }.map(\.id))
                }
                var same: [Int: [Int]] = [:]
                if meta {
                    let picks = touching.filter(\.picksMetadata)
                    for r in picks {
                        same[r.id] = picks.filter {
                            $0.id != r.id && outcome($0, meta: true) == outcome(r, meta: true) && sides($0) == sides(r)
                        }.map(\.id)
                    }
                }
                func knows(_ later: Ledger.Edit, _ e: Ledger.Edit) -> Bool {
                    guard later.id != e.id else { return false }
                    var line: Int? = e.id
                    while let id = line {
                        if later.knownBefore.contains(id) { return true }
                        if same[id, default: []].contains(where: { $0 != later.id && later.knownBefore.contains($0) }) {
                            return true
                        }
                        line = adopted[id]
                    }
                    return false
                }
                let latest = touching.filter { e in !touching.contains { knows($0, e) } }
                for e in latest where !([record.value] + record.others).contains(where: { reflects($0, e, meta: meta) })
                {
                    ledger.violation(
                        "'\(e.what)' (\(meta ? "metadata" : "tokens")) was acknowledged, and is neither the value nor a "
                            + "kept side: \(describe(record))"
                            + (latest.count > 1
                                ? "; it raced "
                                    + latest.filter { $0.id != e.id }.map { "'\($0.what)'" }.joined(separator: ", ")
                                : ""),
                        kind: "lost edit")
                }
                // Two lines of edits meet at their last edits that had not
                // seen the other line: those race, unless their outcomes
                // are equal or a pick that knew both settled it.
                func last(_ e: Ledger.Edit, before other: Ledger.Edit) -> Bool {
                    !touching.contains { $0.id != other.id && knows($0, e) && !knows($0, other) }
                }
                for (i, e1) in touching.enumerated() {
                    for e2 in touching[(i + 1)...]
                    where !knows(e1, e2) && !knows(e2, e1) && outcome(e1, meta: meta) != outcome(e2, meta: meta) {
                        // An edit that saw both sides of a race was made on
                        // one of them; the other stays a kept side, and it
                        // races the next edits of the line that never saw
                        // it, though the edit that saw both hides the race
                        // from the lines' last edits (new tokens kept beside
                        // a value one machine removed, and a removal on the
                        // other machine that never saw those tokens). Which
                        // side it was cannot be told, so no conflict is held
                        // needless then.
                        guard last(e1, before: e2) && last(e2, before: e1) else {
                            if touching.contains(where: { knows($0, e1) && knows($0, e2) }) { raced = true }
                            continue
                        }
                        raced = true
                        // A pick that saw both settles the race. Any other
                        // edit that saw both was made on one of the sides,
                        // which the simulation cannot tell: whether a
                        // conflict is left then depends on what it made
                        // (a removal of the value beside a removal is none).
                        if !touching.contains(where: { knows($0, e1) && knows($0, e2) }) { unsettled.append((e1, e2)) }
                    }
                }
            }
            if let (e1, e2) = unsettled.first, record.others.isEmpty {
                ledger.violation(
                    "'\(e1.what)' and '\(e2.what)' raced and no pick has settled it, but no conflict is kept: "
                        + describe(record), kind: "lost edit")
            }
            // A pick makes the simulation's account of who saw what too
            // coarse to tell a needless conflict from a race with the
            // pick (a rename of the value beside a pick of the other
            // side), so only records no one picked on are held to it.
            let families = Set(edits.compactMap(\.family))
            if !raced && !record.others.isEmpty && families.isDisjoint(with: awayFamilies)
                && !edits.contains(where: \.resolves)
            {
                ledger.violation(
                    "a conflict on \(describe(record)) though no two edits raced: "
                        + edits.map { "'\($0.what)'" }.joined(separator: ", "), kind: "needless conflict")
            }
        }
    }

    /// What an edit leaves in one group: removed, a name, or a token family.
    private func outcome(_ e: Ledger.Edit, meta: Bool) -> String {
        if e.removed { return "removed" }
        return meta ? "name " + e.name : "family \(e.family.map(String.init) ?? "none")"
    }

    private func reflects(_ side: Side, _ edit: Ledger.Edit, meta: Bool) -> Bool {
        if edit.removed { return side.removed }
        if side.removed { return false }
        if meta { return side.name == edit.name || side.name.hasPrefix(String(edit.name.prefix(58)) + "+") }
        return family(side) == edit.family
    }

    /// Every machine opens with the same passphrase slots, and they hold
    /// every passphrase set last on a machine (one that no later `passwd`
    /// saw): the old one opens nothing anywhere, and two set at once both stay.
    private func checkPassphrases() {
        var sets: [[[UInt8]]] = []
        for m in machines {
            do {
                let vault = try Vault.open(
                    at: m.location, key: .keyfile(try SecureBytes(copying: SimMachine.keyFile)), time: m.clock)
                sets.append(try vault.keyslots.passphraseSlots())
            } catch {
                ledger.violation("\(m.name)'s keyslots could not be read: \(error)", kind: "damaged")
                return
            }
        }
        for (i, slots) in sets.enumerated().dropFirst() where slots != sets[0] {
            ledger.violation(
                "\(machines[i].name) opens with other passphrases than \(machines[0].name) after healing",
                kind: "passphrase")
        }
        for (m, slots) in zip(machines, sets) {
            log(
                "  \(m.name) opens with passphrase slots "
                    + slots.map { Array($0.suffix(8)).hex }.joined(separator: ", "))
        }
        let changes = ledger.edits.filter { $0.record == Ledger.passphrase }
        let latest = changes.filter { e in !changes.contains { $0.id != e.id && $0.knownBefore.contains(e.id) } }
        let held = Set(sets[0].map { Array($0.suffix(8)).hex })
        for e in latest where !Set(e.name.split(separator: "+").map(String.init)).isSubset(of: held) {
            ledger.violation("'\(e.what)': its passphrase does not open every machine", kind: "passphrase")
        }
        // Every latest change opens the vault and nothing else does: two made
        // at once both, and an older one (seen and replaced by one of them)
        // none.
        let latestSlots = Set(latest.flatMap { $0.name.split(separator: "+").map(String.init) })
        if !latest.isEmpty && !held.isSubset(of: latestSlots) {
            ledger.violation(
                "'\(latest.map(\.what).joined(separator: "', '"))': an older passphrase still opens the vault",
                kind: "passphrase")
        }
    }

    /// Every live token family is held at its newest refresh token.
    private func checkTokens(_ records: [[UInt8]: Record]) {
        for (_, record) in records where !record.value.removed {
            guard let refresh = record.value.refresh, let family = provider.family(of: refresh),
                !provider.isRevoked(family), !provider.isNewest(refresh)
            else { continue }
            let spender = provider.spender(of: refresh)
            // The losses the invariants allow come first, so that a loss is
            // counted once, by its first cause. A person's removal (or new
            // tokens) that took the newest token away is that cause even
            // when the refresh that made it was made alone, with the store
            // away: the holder's tokens reached the store, or would have,
            // and went with the removal.
            if spender?.crashed == true {
                ledger.count("newest refresh token lost with a killed process")
            } else if provider.newest(of: family).map(ledger.removedRefreshTokens.contains) == true {
                // A person removed the grant that held the newest token (or
                // replaced its tokens) while another machine renamed or
                // changed it: shown as a conflict, and the refresh token kept
                // on this side is known spent.
                ledger.count("newest refresh token given up by a person")
                if !record.value.dead {
                    ledger.violation(
                        "'\(record.value.name)' holds spent refresh token \(provider.generation(of: refresh) ?? -1) "
                            + "of family \(family) as live: its next refresh would be a reuse",
                        kind: "newest token lost")
                }
            } else if spender?.refreshedAlone == true {
                ledger.count("newest refresh token lost while the store was away")
            } else {
                ledger.violation(
                    "'\(record.value.name)' holds refresh token \(provider.generation(of: refresh) ?? -1) of family "
                        + "\(family), which was spent: the newest one is lost", kind: "newest token lost")
            }
        }
    }
}
