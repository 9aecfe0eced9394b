internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// `vault conflicts`.
struct ConflictsCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "conflicts",
        abstract: "Show grants changed on two machines at once, and pick a side.",
        usage: "conflicts [resolve NAME {keep:choices}|N] [{json}]",
        arguments: [("resolve NAME", "end the conflict on NAME")],
        discussion: """
            When two machines change one grant between syncs, every machine takes the same side as
            the value and keeps the other; the other side travels through the store, so every
            machine that holds the grant lists the conflict (and 'vault list' marks the grant)
            until someone picks, on any machine. Each side shows the name it gives the grant, the
            machine that made it (the start of its sync device id), when, the provider and account,
            the scopes when the sides differ in them, the expiry and TOKENS, a short keyed
            fingerprint: equal on two sides when they hold the same tokens. Tokens are not shown.
            'resolve' keeps the current value, or makes another side the value, its name included:
            'other' when there is one other side, its number (1, 2, ...) when there are several.
            The next 'vault sync' sends the choice to the other machines, which then drop the
            conflict too.
            """,
        examples: [
            "vault conflicts", "vault conflicts resolve work --keep other", "vault conflicts resolve work --keep 2",
        ]
    )

    @Option(
        "keep", value: "SIDE",
        help: "current (the value now), other (the side kept aside), or the number of one of several other sides")
    var keep: ConflictSideChoice?

    /// `resolve`, then a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        switch positionals.count {
        case 0: return .words(["resolve"])
        case 1 where positionals[0] == "resolve": return .grant
        default: return .nothing
        }
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let words = ctx.arguments.positionals
        let vault = try ctx.opener.openVaultDirectly()
        let engine = try ctx.network.syncEngine(vault)
        if words.first == "resolve" { return try resolve(ctx, engine) }
        if let word = words.first { throw CLIError.usage("unknown action '\(word)'", command: "conflicts") }
        return try list(ctx, engine)
    }

    /// `conflicts resolve NAME --keep SIDE`: ends the conflict on NAME with
    /// the side `--keep` names as the value.
    private func resolve(_ ctx: Context, _ engine: SyncEngine) throws -> ExitCode {
        let name = try ctx.grantName(try ctx.positionals("resolve", "NAME")[1])
        guard let keep else {
            throw CLIError.usage(
                "--keep must be current, other or the number of another side", command: "conflicts")
        }
        let kept: KeptSide
        switch keep {
        case .current: kept = try engine.resolvingConflict(name, keepingSide: 0)
        case .other: kept = try engine.resolvingConflict(name, keepOther: true)
        case .side(let number): kept = try engine.resolvingConflict(name, keepingSide: number)
        }
        // What the side kept makes of the grant: another name, or none.
        let outcome =
            kept.removed
            ? ": the grant is removed" : kept.name != name ? ": it is '\(kept.name)' now" : ""
        try ctx.output.report(
            "kept the \(keep.argument) side of '\(name)'\(outcome); 'vault sync' sends the choice",
            json: ["name": name, "kept": keep.argument])
        return .ok
    }

    /// `conflicts`: every grant in conflict, with each of its sides, as a
    /// table or JSON.
    private func list(_ ctx: Context, _ engine: SyncEngine) throws -> ExitCode {
        let conflicts = try engine.syncConflicts()
        let now = ctx.time.now()
        // One entry per grant: its value, then each other side.
        let grouped = Dictionary(grouping: conflicts, by: \.name).sorted { $0.key < $1.key }
        func sides(_ others: [SyncConflict]) -> [ConflictSide] {
            [Self.side(current: true, others[0], now: now)] + others.map { Self.side(current: false, $0, now: now) }
        }
        if ctx.output.json {
            try ctx.output.printJSON(
                grouped.map { name, others in
                    ConflictRow(
                        name: name, current: Self.describe(others[0].current, others[0].currentChanged, now: now),
                        other: Self.describe(others[0].other, others[0].otherChanged, now: now),
                        sides: sides(others))
                })
            return .ok
        }
        guard !conflicts.isEmpty else {
            ctx.output.info("no conflicts")
            return .ok
        }
        // What tells the sides apart: the name each gives the grant, the
        // machine that made it, when, the provider and account, the scopes
        // (when two sides of some grant differ in them: a re-authorization
        // that asked for more), the expiry and a keyed fingerprint of the
        // tokens.
        let listed = grouped.map { name, others in (name, sides(others)) }
        let scopesDiffer = listed.contains { _, sides in
            Set(sides.filter { !$0.removed }.map { Set($0.scopes ?? []) }).count > 1
        }
        var rows = [
            ["GRANT", "SIDE", "NAME", "MACHINE", "CHANGED", "PROVIDER", "ACCOUNT"] + (scopesDiffer ? ["SCOPES"] : [])
                + ["EXPIRES", "TOKENS"]
        ]
        for (name, sides) in listed {
            for s in sides {
                let machine = (s.machine ?? "unknown") + (s.thisMachine ? " (this machine)" : "")
                // Format.table escapes every cell for the terminal.
                let grant = s.side == "current" ? name : ""
                guard !s.removed else {
                    let blank = Array(repeating: "-", count: rows[0].count - 5)
                    rows.append([grant, s.side, s.name, machine, "removed"] + blank)
                    continue
                }
                let scopes = s.scopes.flatMap { $0.isEmpty ? nil : $0.joined(separator: " ") } ?? "-"
                rows.append(
                    [
                        grant, s.side, s.name, machine, "\(s.changed ?? "-") (\(s.state ?? "-"))", s.provider ?? "-",
                        s.account ?? "-",
                    ] + (scopesDiffer ? [scopes] : []) + [s.expires ?? "-", s.fingerprint ?? "-"])
            }
        }
        Format.table(rows).forEach { ctx.output.out($0) }
        return .ok
    }

    /// One side of a conflict in a word: removed, or its state and when it changed.
    private static func describe(_ g: Grant?, _ changed: Date?, now: Date) -> String {
        guard let g else { return "removed" }
        return "\(g.state(at: now).rawValue), changed \(Format.timestamp(changed ?? g.refreshedAt ?? g.createdAt))"
    }

    /// The current value of `c`'s grant, or its other side, as listed.
    private static func side(current: Bool, _ c: SyncConflict, now: Date) -> ConflictSide {
        let g = current ? c.current : c.other
        let changed = (current ? c.currentChanged : c.otherChanged) ?? g.map { $0.refreshedAt ?? $0.createdAt }
        let device = current ? c.currentDevice : c.otherDevice
        // A side's label: the current value, `other`, or `other N` among several.
        let label = current ? "current" : c.sides > 1 ? "other \(c.side)" : "other"
        return ConflictSide(
            side: label, name: current ? c.name : c.otherName, provider: g?.provider,
            machine: device, thisMachine: device == c.thisDevice, removed: g == nil,
            state: g.map { $0.state(at: now).rawValue }, changed: changed.map(Format.timestamp),
            account: g?.account, scopes: g?.scopes, expires: g?.expiresAt.map(Format.timestamp),
            fingerprint: current ? c.currentFingerprint : c.otherFingerprint)
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$keep] }
}
