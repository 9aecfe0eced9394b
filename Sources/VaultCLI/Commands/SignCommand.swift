internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// `vault sign`.
struct SignCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "sign",
        abstract: "Print a URL signed with an OAuth 1.0a grant (query-string signing).",
        usage: "sign NAME {url} [{method}] [{body-form}]",
        arguments: [("NAME", "an OAuth 1.0a grant")],
        discussion: "Adds the protocol parameters and the signature to the URL's query (RFC 5849 section 3.5.3).",
        examples: ["curl \"$(vault sign trello --url 'https://api.trello.com/1/members/me')\""],
        printsJSON: false
    )

    let signing = SigningOptions()

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let grant = try Commands.freshGrants([name], ctx: ctx)[0].1
        let params = try signing.signature(grant, ctx: ctx)
        var bytes = Array((OAuth1.signedURL(signing.url ?? "", params) + "\n").utf8)
        Console.writeAll(&bytes, fd: 1)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { signing.declarations }
}
