internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// What `vault sync --json` prints.
struct SyncOutput: Encodable {
    let pulled: Int
    let pushed: Int
    let conflicts: [String]
    let renamed: [String]
    let repaired: Bool
    let rootMoved: Bool
    let requests: Int
    let bytesSent: Int
    let collected: Int
    let passphraseTaken: Bool
    let passphrases: Int

    enum CodingKeys: String, CodingKey {
        case pulled, pushed, conflicts, renamed, repaired, requests, collected, passphrases
        case bytesSent = "bytes_sent"
        case rootMoved = "root_moved"
        case passphraseTaken = "passphrase_taken"
    }
}

/// One side of a conflict in `vault conflicts --json`.
struct ConflictSide: Encodable {
    let side: String
    /// The name this side gives the grant (two renames differ here).
    let name: String
    let provider: String?
    let machine: String?
    let thisMachine: Bool
    let removed: Bool
    let state: String?
    let changed: String?
    let account: String?
    let expires: String?
    let fingerprint: String?

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(side, forKey: .side)
        try c.encode(name, forKey: .name)
        try c.encode(provider, forKey: .provider)
        try c.encode(machine, forKey: .machine)
        try c.encode(thisMachine, forKey: .thisMachine)
        try c.encode(removed, forKey: .removed)
        try c.encode(state, forKey: .state)
        try c.encode(changed, forKey: .changed)
        try c.encode(account, forKey: .account)
        try c.encode(expires, forKey: .expires)
        try c.encode(fingerprint, forKey: .fingerprint)
    }

    enum CodingKeys: String, CodingKey {
        case side, name, provider, machine, removed, state, changed, account, expires, fingerprint
        case thisMachine = "this_machine"
    }
}

/// A conflict in `vault conflicts --json`.
struct ConflictRow: Encodable {
    let name: String
    let current: String
    let other: String
    let sides: [ConflictSide]
}

/// What `vault remote --json` prints: the store, or nulls when none is set.
struct RemoteOutput: Encodable {
    let url: String?
    let user: String?
    /// Whether the store honours If-Match; nil when none is set.
    let preconditions: Bool?

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(url, forKey: .url)
        try c.encode(user, forKey: .user)
        try c.encode(preconditions, forKey: .preconditions)
    }

    enum CodingKeys: String, CodingKey { case url, user, preconditions }
}

extension Commands {
    /// What a sync did: counts on stderr, or the `--json` document.
    static func printSyncReport(_ r: SyncReport, to output: Output) throws {
        if output.json {
            try output.printJSON(
                SyncOutput(
                    pulled: r.pulled, pushed: r.pushed, conflicts: r.conflicts, renamed: r.renamed,
                    repaired: r.repaired, rootMoved: r.rootMoved, requests: r.requests, bytesSent: r.bytesSent,
                    collected: r.collected, passphraseTaken: r.passphraseTaken, passphrases: r.passphrases))
            return
        }
        let collected =
            r.collected == 0 ? "" : ", \(r.collected) old object\(r.collected == 1 ? "" : "s") deleted"
        output.info(
            "synced: \(r.pulled) received, \(r.pushed) sent "
                + "(\(r.requests) request\(r.requests == 1 ? "" : "s")\(collected))")
        // The store's quirk was told when it was found ('vault remote set');
        // what it means for this sync is told here, with who must sync.
        if r.repaired {
            output.warn(
                "the store had lost an update from this machine; sent again: "
                    + "run 'vault sync' on the other machines to receive it")
        }
        if r.rootMoved {
            output.warn(
                "another machine wrote to the store during this sync, and the store ignores If-Match: "
                    + "run 'vault sync' on the other machines, then here again")
        }
        for name in r.renamed {
            output.info("'\(name)': a grant of the same name came from another machine; kept both")
        }
        for name in r.conflicts {
            output.warn("'\(name)' was changed on two machines at once; both kept, see 'vault conflicts'")
        }
        if r.passphraseTaken {
            // After a race this machine's own passphrase keeps opening it,
            // beside the other's: "the old one" would say otherwise.
            output.info(
                r.passphrases > 1
                    ? "the vault's passphrase was changed on another machine: that passphrase opens this vault "
                        + "now, beside the one set here"
                    : "the vault's passphrase was changed on another machine: that passphrase opens this vault "
                        + "now, and the one it had here no longer does")
        }
        if r.passphrases > 1 {
            output.warn(
                "\(r.passphrases) passphrases open this vault: they were changed on two machines at once; "
                    + "run 'vault passwd' to keep one")
        }
    }
}

extension Commands {
    /// Why a join failed: a failed join leaves no vault behind, so the
    /// hints that name commands of an existing vault become ones for joining.
    static func joinFailure(_ error: VaultError, url: String) -> CLIError {
        let base = CLIError(error)
        switch error.remedy {
        case .setStoreCredentials?:
            let check =
                S3Location.isS3(url)
                ? "check the store's keys (--credentials-file, --profile, AWS_ACCESS_KEY_ID) and --region"
                : "check the store's user (--user) and password (--password-file)"
            return CLIError(base.message, hint: check, exitCode: base.exitCode)
        case .syncAgain?, .syncFirst?:
            return CLIError(base.message, hint: "run 'vault join' again; nothing was kept", exitCode: base.exitCode)
        default:
            return base
        }
    }

}

extension Commands {
    /// A store URL from the command line, which may not carry a user or
    /// password: a password there would be in every process listing.
    static func storeURL(_ url: String, command: String) throws -> String {
        if URLPolicy.hasUserInfo(url) {
            throw CLIError.usage(
                "the store URL carries a user or password: give them with --user and --password-file", command: command)
        }
        return url
    }
}

/// `vault remote`.
struct RemoteCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "remote",
        abstract: "Show or set the store this vault syncs with.",
        usage:
            "remote [set URL [{user}] [{password-file}]]\n"
            + "remote set s3://BUCKET[/FOLDER] [{endpoint}] [{region}] [{path-style}] [{credentials-file}] "
            + "[{profile}]",
        arguments: [
            ("set URL", "sync with the WebDAV collection or HTTP base URL"),
            ("set s3://BUCKET[/FOLDER]", "sync with a folder of an S3 bucket (AWS S3, Ceph RGW, MinIO, R2, ...)"),
        ],
        discussion: """
            The store only ever sees ciphertext (docs/sync.md). Its user name and password are kept
            inside the vault, encrypted; the password comes from --password-file or is asked on the
            terminal. 'set' creates the folder when it does not exist yet (WebDAV MKCOL, parents
            too), checks that the store answers, and whether it honours If-Match: a store that does
            not still works (lost updates are detected and sent again, old objects deleted later),
            and 'set' says so once. Plain http is refused except to a loopback address.
            An S3 store is a bucket and a folder in it, at --endpoint (AWS_ENDPOINT_URL_S3; default
            AWS's for the region) with --region (AWS_REGION; default us-east-1). Its access key id
            and secret key are kept inside the vault, and never given on the command line: from
            the AWS credentials file (--credentials-file, AWS_SHARED_CREDENTIALS_FILE or
            ~/.aws/credentials; --profile, AWS_PROFILE or "default"), else AWS_ACCESS_KEY_ID and
            AWS_SECRET_ACCESS_KEY, else asked on the terminal. 'set' creates a missing bucket and
            refuses one with versioning (docs/sync.md, "S3 stores").
            """,
        examples: [
            "vault remote set https://dav.example.com/vault/ --user ada",
            "vault remote set s3://team-vault/ada --endpoint https://rgw.example.com --profile team",
            "vault remote",
        ]
    )

    let store = StoreOptions()

    /// `set`.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .words(["set"]) : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let words = ctx.arguments.positionals
        if words.isEmpty {
            let vault = try ctx.opener.openVaultDirectly()
            let engine = try ctx.network.syncEngine(vault)
            guard try ctx.network.syncEngine(vault).isConfigured else {
                try ctx.output.report(
                    "no store is set; set one with 'vault remote set URL'",
                    json: RemoteOutput(url: nil, user: nil, preconditions: nil))
                return .ok
            }
            let d = try engine.remoteDescription()
            if ctx.output.json {
                try ctx.output.printJSON(RemoteOutput(url: d.url, user: d.user, preconditions: d.preconditions))
                return .ok
            }
            let who = S3Location.isS3(d.url) ? "access key" : "user"
            ctx.output.out(Console.escaped(d.url + (d.user.map { " (\(who) \($0))" } ?? "")))
            if !d.preconditions { ctx.output.info("this store ignores If-Match; lost updates are repaired") }
            if let device = try? engine.deviceLabel() {
                ctx.output.info("this machine is \(device) in 'vault conflicts'")
            }
            return .ok
        }
        guard words[0] == "set" else { throw CLIError.usage("unknown action '\(words[0])'", command: "remote") }
        let login = try store.login(
            url: try ctx.positionals("set", "URL")[1], command: "remote", environment: ctx.environment)
        let vault = try ctx.opener.openVaultDirectly()
        let engine = try ctx.network.syncEngine(vault)
        let created = try engine.setRemote(url: login.url, user: login.user, password: login.password)
        if ctx.output.json {
            let d = try engine.remoteDescription()
            try ctx.output.printJSON(RemoteOutput(url: d.url, user: d.user, preconditions: d.preconditions))
            return .ok
        }
        for folder in created { ctx.output.info("created the folder \(folder)") }
        if let d = try? engine.remoteDescription(), !d.preconditions {
            ctx.output.info(
                "this store ignores If-Match; lost updates are repaired, and old objects are collected later")
            ctx.output.warn(
                "such a store could also show an old state or hide other machines' changes without vault noticing "
                    + "(docs/sync.md); prefer a store that honours If-Match (Apache mod_dav, WsgiDAV)")
        }
        ctx.output.info("this vault syncs with \(Console.escaped(SyncEngine.displayName(login.url))); run 'vault sync'")
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { store.declarations }
}

/// `vault sync`.
struct SyncCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "sync",
        abstract: "Sync the grants with the store, both ways.",
        usage: "sync [{json}]",
        discussion: """
            Takes what other machines changed and sends what this one changed. Concurrent changes
            to one grant keep both sides ('vault conflicts'); nothing is dropped silently. A store
            that serves an older state than one already seen, another vault's data, or changed
            bytes is refused and nothing local changes. Exit status 75 when the store cannot be
            reached or keeps changing; run it again. When the store lost an update or, ignoring
            If-Match, took another machine's write during this sync, a warning says which
            machines must sync again for all to be in step.
            """,
        examples: ["vault sync", "vault sync --json"]
    )

    func run(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals()
        // An agent holding the vault syncs it: no passphrase needed here.
        if let agent = ctx.agents.client(for: try ctx.opener.location()) {
            let outcome: Result<SyncReport, VaultError>
            do throws(VaultError) { outcome = .success(try agent.sync()) } catch { outcome = .failure(error) }
            switch outcome {
            case .success(let report):
                try Commands.printSyncReport(report, to: ctx.output)
                return .ok
            case .failure(let error) where error.code == .locked || error.code == .unsupported:
                break  // locked: unlock here instead
            case .failure(let error):
                throw error
            }
        }
        let vault = try ctx.opener.openVaultDirectly()
        let engine = try ctx.network.syncEngine(vault)
        let report = try engine.sync()
        try Commands.printSyncReport(report, to: ctx.output)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}

/// `vault join`.
struct JoinCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "join",
        abstract: "Create this machine's vault from a store another machine syncs to.",
        usage:
            "join URL [{user}] [{password-file}] [{pairing-code-file}]\n"
            + "join s3://BUCKET[/FOLDER] [{endpoint}] [{region}] [{path-style}] [{credentials-file}] "
            + "[{profile}] [{pairing-code-file}]",
        arguments: [("URL", "the store, as given to 'vault remote set' on the other machine")],
        discussion: """
            Opens the store's copy of the vault's keyslots with the vault's passphrase (from the
            usual sources: VAULT_PASSPHRASE_COMMAND, _FILE, VAULT_PASSPHRASE or the terminal) or
            its key file (--keyfile, VAULT_KEYFILE), creates the local vault with the same key,
            and syncs. With --pairing-code-file, no passphrase is needed: the code from 'vault
            pair' (valid once, for ten minutes) opens an offer the other machine left in the
            store. Either way the new vault opens later with the vault's passphrase or key files.
            A wrong passphrase exits 77 and leaves nothing behind.
            The store could try to guess the passphrase offline, as a thief of the vault file
            could: use a strong one.
            """,
        examples: [
            "vault join https://dav.example.com/vault/ --user ada",
            "vault join https://dav.example.com/vault/ --user ada --pairing-code-file code.txt",
        ]
    )

    let store = StoreOptions()
    @Option(
        "pairing-code-file", value: "F", help: "join with the one-time code 'vault pair' printed on the other machine")
    var pairingCodeFile: String?

    func run(_ ctx: Context) throws -> ExitCode {
        // A URL that carries a password is refused first, whatever else is wrong.
        let given = try Commands.storeURL(try ctx.positionals("URL")[0], command: "join")
        let location = try ctx.opener.location()
        if Vault.exists(at: location) {
            throw CLIError("a vault already exists at \(location.databasePath)")
        }
        let login = try store.login(url: given, command: "join", environment: ctx.environment)
        let (url, user, password) = (login.url, login.user, login.password)
        let report: SyncReport
        if let file = pairingCodeFile {
            let code: SecureBytes
            do throws(VaultError) { code = try SecretFile.read(path: file) } catch {
                throw CLIError("\(error.reason) (from --pairing-code-file)", hint: error.remedy.map(Remedies.hint))
            }
            let text = code.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            do throws(VaultError) {
                (_, report) = try SyncEngine.join(
                    at: location, url: url, user: user, password: password, pairingCode: text,
                    transport: ctx.network.transport, time: ctx.time)
            } catch { throw Commands.joinFailure(error, url: url) }
        } else {
            let (key, _, _) = try ctx.opener.unlockSources.key(joining: true)
            do throws(VaultError) {
                (_, report) = try SyncEngine.join(
                    at: location, url: url, user: user, password: password, key: key, transport: ctx.network.transport,
                    time: ctx.time)
            } catch { throw Commands.joinFailure(error, url: url) }
        }
        ctx.output.info(
            "joined: created a vault at \(location.databasePath) from \(Console.escaped(SyncEngine.displayName(url)))")
        try Commands.printSyncReport(report, to: ctx.output)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { store.declarations + [$pairingCodeFile] }
}

/// `vault pair`.
struct PairCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "pair",
        abstract: "Print a one-time code that lets another machine join without the passphrase.",
        usage: "pair",
        discussion: """
            Leaves an offer in the store, sealed under a random 128-bit code, and prints the code on
            stdout. On the new machine, put the code in a file and run 'vault join URL
            --pairing-code-file FILE' within ten minutes; the offer is then deleted. Treat the code
            like the passphrase until it is used: with the store's credentials, it opens the vault.
            """,
        examples: ["vault pair > code.txt"],
        printsJSON: false
    )

    func run(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals()
        let vault = try ctx.opener.openVaultDirectly()
        let engine = try ctx.network.syncEngine(vault)
        let code = try engine.createPairingOffer()
        var bytes = Array((code + "\n").utf8)
        Console.writeAll(&bytes, fd: 1)
        secureZero(&bytes)
        ctx.output.info(
            "on the new machine, within ten minutes: vault join URL --pairing-code-file FILE (with this code in FILE)")
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}

/// `vault conflicts`.
struct ConflictsCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "conflicts",
        abstract: "Show grants changed on two machines at once, and pick a side.",
        usage: "conflicts [resolve NAME {keep:choices}] [{json}]",
        arguments: [("resolve NAME", "end the conflict on NAME")],
        discussion: """
            When two machines change one grant between syncs, every machine takes the same side as
            the value and keeps the other; the other side travels through the store, so every
            machine that holds the grant lists the conflict (and 'vault list' marks the grant)
            until someone picks, on any machine. Each side shows the name it gives the grant, the
            machine that made it (the start of its sync device id), when, the provider and account,
            the expiry and TOKENS, a short keyed fingerprint: equal on two sides when they hold the
            same tokens. Tokens are not shown. 'resolve' keeps the current value, or makes another
            side the value, its name included: 'other' when there is one other side, its number
            (1, 2, ...) when there are several. The next 'vault sync' sends the choice to the
            other machines, which then drop the conflict too.
            """,
        examples: [
            "vault conflicts", "vault conflicts resolve work --keep other", "vault conflicts resolve work --keep 2",
        ]
    )

    @Option(
        "keep", value: "SIDE",
        help: "current (the value now), other (the side kept aside), or the number of one of several other sides",
        choices: ["current", "other"])
    var keep: String?

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
        if words.first == "resolve" {
            let name = try ctx.grantName(try ctx.positionals("resolve", "NAME")[1])
            switch keep {
            case "current"?: try engine.resolveConflict(name, keepingSide: 0)
            case "other"?: try engine.resolveConflict(name, keepOther: true)
            case let value? where Int(value).map({ $0 > 0 }) == true:
                try engine.resolveConflict(name, keepingSide: Int(value)!)
            default:
                throw CLIError.usage(
                    "--keep must be current, other or the number of another side", command: "conflicts")
            }
            try ctx.output.report(
                "kept the \(keep!) side of '\(name)'; 'vault sync' sends the choice",
                json: ["name": name, "kept": keep!])
            return .ok
        }
        if let word = words.first { throw CLIError.usage("unknown action '\(word)'", command: "conflicts") }
        let conflicts = try engine.syncConflicts()
        let now = ctx.time.now()
        func describe(_ g: Grant?, _ changed: Date?) -> String {
            guard let g else { return "removed" }
            return "\(g.state(at: now).rawValue), changed \(Format.timestamp(changed ?? g.refreshedAt ?? g.createdAt))"
        }
        /// A side's label: the current value, `other`, or `other N` among several.
        func label(_ c: SyncConflict) -> String { c.sides > 1 ? "other \(c.side)" : "other" }
        func side(current: Bool, _ c: SyncConflict) -> ConflictSide {
            let g = current ? c.current : c.other
            let changed = (current ? c.currentChanged : c.otherChanged) ?? g.map { $0.refreshedAt ?? $0.createdAt }
            let device = current ? c.currentDevice : c.otherDevice
            return ConflictSide(
                side: current ? "current" : label(c), name: current ? c.name : c.otherName, provider: g?.provider,
                machine: device, thisMachine: device == c.thisDevice, removed: g == nil,
                state: g.map { $0.state(at: now).rawValue }, changed: changed.map(Format.timestamp),
                account: g?.account, expires: g?.expiresAt.map(Format.timestamp),
                fingerprint: current ? c.currentFingerprint : c.otherFingerprint)
        }
        // One entry per grant: its value, then each other side.
        let grouped = Dictionary(grouping: conflicts, by: \.name).sorted { $0.key < $1.key }
        if ctx.output.json {
            try ctx.output.printJSON(
                grouped.map { name, others in
                    ConflictRow(
                        name: name, current: describe(others[0].current, others[0].currentChanged),
                        other: describe(others[0].other, others[0].otherChanged),
                        sides: [side(current: true, others[0])] + others.map { side(current: false, $0) })
                })
            return .ok
        }
        guard !conflicts.isEmpty else {
            ctx.output.info("no conflicts")
            return .ok
        }
        // What tells the sides apart: the name each gives the grant, the
        // machine that made it, when, the provider and account, the expiry
        // and a keyed fingerprint of the tokens.
        var rows = [["GRANT", "SIDE", "NAME", "MACHINE", "CHANGED", "PROVIDER", "ACCOUNT", "EXPIRES", "TOKENS"]]
        for (name, others) in grouped {
            for s in [side(current: true, others[0])] + others.map({ side(current: false, $0) }) {
                let machine = (s.machine ?? "unknown") + (s.thisMachine ? " (this machine)" : "")
                // Format.table escapes every cell for the terminal.
                let grant = s.side == "current" ? name : ""
                rows.append(
                    s.removed
                        ? [grant, s.side, s.name, machine, "removed", "-", "-", "-", "-"]
                        : [
                            grant, s.side, s.name, machine, "\(s.changed ?? "-") (\(s.state ?? "-"))",
                            s.provider ?? "-",
                            s.account ?? "-", s.expires ?? "-", s.fingerprint ?? "-",
                        ])
            }
        }
        Format.table(rows).forEach { ctx.output.out($0) }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$keep] }
}
