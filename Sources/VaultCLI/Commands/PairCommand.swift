internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

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
