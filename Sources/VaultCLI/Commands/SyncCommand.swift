internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

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
        let location = try ctx.opener.location()
        let published = Vault.passphraseNote(.published, at: location)
        defer { SyncCommand.tellPublished(since: published, at: location, output: ctx.output) }
        if let agent = ctx.agents.client(for: location) {
            let held = SyncCommand.rightsHeld(through: agent, at: location, time: ctx.time)
            let outcome: Result<SyncReport, VaultError>
            do throws(VaultError) { outcome = .success(try agent.sync()) } catch { outcome = .failure(error) }
            switch outcome {
            case .success(var report):
                // The agent's answer does not say what its sync handed over:
                // a right held before it and not after was.
                if report.handedOver.isEmpty, !held.isEmpty,
                    let after = try? agent.storeCheck(probeTimeout: 0, names: held)
                {
                    for (name, right) in zip(held, after.rights) where right != .here {
                        report.handedOver.append(HandedOverRight(grant: name, machine: nil))
                    }
                }
                try Commands.printSyncReport(report, to: ctx.output)
                return .ok
            case .failure(let error) where error.code == .locked || error.code == .unsupported:
                break  // locked: unlock here instead
            case .failure(let error) where error.code == .transient && error.remedy == .checkStore:
                // The agent's store timeout, not this command's, bounded its tries.
                throw CLIError(
                    error.reason, hint: Network.unansweredStoreHint(throughAgent: true), exitCode: .transient)
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

    /// Says that this sync, here or in the agent, published the passphrase
    /// set here ('vault passwd'), and what the other machines need: the
    /// vault file's note of it changed since `before`.
    static func tellPublished(since before: PassphraseSlotsNote?, at location: VaultLocation, output: Output) {
        guard let now = Vault.passphraseNote(.published, at: location), now != before else { return }
        output.info(
            "published the passphrase set here to the store (its keyslot; the passphrase itself never leaves this machine): "
                + "each other machine takes it at its next 'vault sync', and from then on opens only with it, "
                + "so their VAULT_PASSPHRASE_FILE or VAULT_PASSPHRASE_COMMAND needs the new one")
    }

    /// The grants whose right to refresh this machine holds, as the agent
    /// that holds the vault knows it (none when it cannot tell).
    static func rightsHeld(through agent: AgentClient, at location: VaultLocation, time: any TimeSource) -> [String] {
        guard let vault = try? Vault.open(at: location, agent: agent, time: time),
            let names = try? vault.list(secrets: false, each: { $0.name }).items, !names.isEmpty,
            let answer = try? agent.storeCheck(probeTimeout: 0, names: names), answer.configured
        else { return [] }
        return zip(names, answer.rights).compactMap { $1 == .here ? $0 : nil }
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
