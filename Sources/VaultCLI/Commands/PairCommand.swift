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
        let (url, user) = try engine.storeAddress()
        ctx.output.info(
            "on the new machine, within ten minutes, with this code in FILE: "
                + Console.escaped(PairCommand.joinCommand(url: url, user: user) + " --pairing-code-file FILE"))
        return .ok
    }

    /// The `vault join` that reaches the same store: an S3 store's bucket
    /// and folder with its endpoint, region and addressing (its keys come
    /// from that machine's own credentials), or the URL and its user.
    static func joinCommand(url: String, user: String?) -> String {
        guard StoreKind.of(url: url) == .s3, let s3 = try? S3Location(canonical: url) else {
            return "vault join \(url)" + (user.map { " --user \($0)" } ?? "")
        }
        return "vault join s3://\(s3.bucket)\(s3.prefix.isEmpty ? "" : "/" + s3.prefix) --endpoint \(s3.endpoint) "
            + "--region \(s3.region)\(s3.pathStyle ? " --path-style" : "")"
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
