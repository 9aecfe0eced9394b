internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// `vault rename`.
struct RenameCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "rename",
        abstract: "Give a grant a new name.",
        usage: "rename NAME NEW-NAME",
        arguments: [("NAME", "the grant to rename"), ("NEW-NAME", "its new name, which must be free")],
        examples: ["vault rename google work-google"]
    )

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let names = try ctx.positionals("NAME", "NEW-NAME")
        let (from, to) = (try ctx.grantName(names[0]), try ctx.grantName(names[1]))
        let vault = try ctx.opener.openVault()
        try vault.rename(from, to: to)
        try ctx.output.report("renamed '\(from)' to '\(to)'", json: ["name": to, "renamed_from": from])
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
