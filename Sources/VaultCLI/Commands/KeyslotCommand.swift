internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultSync

/// What `vault keyslot list --json` prints per slot.
struct KeyslotOutput: Encodable {
    let slot: Int64
    let kind: String
    let kdfMemoryMiB: UInt64?
    let kdfPasses: UInt32?

    /// A slot just added: its kind, no KDF details.
    init(added slot: Int64, kind: KeyslotInfo.Kind) {
        self.init(slot: slot, kind: kind.rawValue, kdfMemoryMiB: nil, kdfPasses: nil)
    }

    init(slot: Int64, kind: String, kdfMemoryMiB: UInt64?, kdfPasses: UInt32?) {
        (self.slot, self.kind, self.kdfMemoryMiB, self.kdfPasses) = (slot, kind, kdfMemoryMiB, kdfPasses)
    }

    enum CodingKeys: String, CodingKey {
        case slot, kind
        case kdfMemoryMiB = "kdf_memory_mib"
        case kdfPasses = "kdf_passes"
    }
}

/// `vault keyslot`.
struct KeyslotCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "keyslot",
        abstract: "List, add or remove the ways to unlock the vault.",
        usage:
            "keyslot list|add|remove [{new-keyfile} | {secret-service} | {passphrase} [{kdf-memory}] [{kdf-passes}]] "
            + "[SLOT]",
        arguments: [("list", "show the keyslots"), ("add", "add one slot"), ("remove SLOT", "remove slot SLOT")],
        discussion: """
            Each keyslot wraps the vault's master key; grants are never re-encrypted. Adding or
            removing a slot needs the master key, so the vault is unlocked here (never through the
            agent). 'add --new-keyfile PATH' writes a new random key file (mode 0600, never over an
            existing file) for servers and CI. 'add --secret-service' stores a new random key in the
            desktop keyring: while it is unlocked, commands open the vault without a prompt.
            'add --passphrase' takes the new passphrase from VAULT_NEW_PASSPHRASE_COMMAND,
            _FILE, VAULT_NEW_PASSPHRASE or the terminal. 'remove' refuses to remove the last slot
            that opens the vault (a Secret Service slot counts only while its key is in the
            keyring), and also deletes a Secret Service slot's key from the keyring.
            """,
        examples: [
            "vault keyslot list", "vault keyslot add --new-keyfile /etc/vault/ci.key",
            "vault keyslot add --secret-service",
            "vault keyslot remove 2",
        ]
    )

    @Option("new-keyfile", value: "PATH", help: "add: write a new key file to PATH and a slot it opens")
    var newKeyfile: String?
    @Flag(
        "secret-service", help: "add: keep a new key in the Secret Service (an unlocked keyring), and a slot it opens")
    var secretService: Bool
    @Flag("passphrase", help: "add: a passphrase slot, on a vault without one")
    var passphrase: Bool
    let kdf = KDFOptions()

    /// The action.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .words(["list", "add", "remove"]) : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let action = ctx.arguments.positionals.first
        switch action {
        case "list": return try list(ctx)
        case "add": return try add(ctx)
        case "remove": return try remove(ctx)
        case nil:
            throw CLIError.usage("missing list, add or remove", command: "keyslot")
        case let other?:
            throw CLIError.usage("unknown action '\(other)'", command: "keyslot")
        }
    }

    /// `keyslot list`: the vault's slots, as a table or JSON.
    private func list(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals("list")
        let vault = try ctx.opener.openVault()
        let slots = try vault.keyslots.list()
        if ctx.output.json {
            try ctx.output.printJSON(
                slots.map {
                    KeyslotOutput(
                        slot: $0.number, kind: $0.kind?.rawValue ?? "damaged",
                        kdfMemoryMiB: $0.kdf.map { $0.memoryBytes >> 20 },
                        kdfPasses: $0.kdf?.passes)
                })
            return .ok
        }
        var rows = [["SLOT", "KIND", "DETAILS"]]
        for s in slots {
            let details = s.kdf.map { "Argon2id, \($0.memoryBytes >> 20) MiB, \($0.passes) passes" } ?? "-"
            rows.append(["\(s.number)", s.kind?.rawValue ?? "damaged", details])
        }
        Format.table(rows).forEach { ctx.output.out($0) }
        return .ok
    }

    /// `keyslot add`: a slot of the one kind the options ask for.
    private func add(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals("add")
        let kinds: [any OptionDeclaration] = [$newKeyfile, $secretService, $passphrase]
        guard kinds.filter(\.given).count == 1 else {
            throw CLIError.usage(
                "add needs one of " + kinds.map(\.spec.label).joined(separator: ", "), command: "keyslot")
        }
        let kdf = try self.kdf.parameters(command: "keyslot")
        let vault = try ctx.opener.openVaultDirectly()
        switch (newKeyfile, secretService) {
        case (let path?, _):
            let secret = try Keyfile.generate()
            try Keyfile.write(secret, to: path)
            let number: Int64
            do {
                number = try vault.keyslots.add(.keyfile(secret))
            } catch {
                Keyfile.discard(path: path)
                throw error
            }
            try ctx.output.report(
                "added keyslot \(number): the key file \(path) opens the vault",
                json: KeyslotOutput(added: number, kind: .keyfile))
        case (nil, true):
            guard SecretService.usable(environment: ctx.environment) else {
                throw CLIError(
                    "no Secret Service to use: DBUS_SESSION_BUS_ADDRESS is not set or libsecret is not installed",
                    hint: "run this in your desktop session, with libsecret-1-0 installed")
            }
            let number = try vault.keyslots.addSecretService()
            try ctx.output.report(
                "added keyslot \(number): the Secret Service opens the vault while your keyring is unlocked",
                json: KeyslotOutput(added: number, kind: .secretService))
        default:
            let key = try ctx.opener.unlockSources.newPassphrase(prefix: "VAULT_NEW", fileFlag: nil)
            let number = try vault.keyslots.add(key, kdf: kdf)
            try ctx.output.report(
                "added keyslot \(number): the new passphrase opens the vault",
                json: KeyslotOutput(added: number, kind: .passphrase))
        }
        return .ok
    }

    /// `keyslot remove SLOT`: the slot, and a Secret Service slot's key in the keyring.
    private func remove(_ ctx: Context) throws -> ExitCode {
        let text = try ctx.positionals("remove", "SLOT")[1]
        guard let number = Int64(text), number > 0 else {
            throw CLIError.usage("SLOT must be a slot number from 'vault keyslot list'", command: "keyslot")
        }
        let vault = try ctx.opener.openVaultDirectly()
        let keyring = SecretService.usable(environment: ctx.environment)
        let problem = try vault.keyslots.remove(number, keyring: keyring)
        if let problem {
            ctx.output.warn("the slot is gone, but its key stays in the keyring: \(problem.reason)")
        }
        try ctx.output.report("removed keyslot \(number)", json: ["removed_slot": number])
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$newKeyfile, $secretService, $passphrase] + kdf.declarations }
}
