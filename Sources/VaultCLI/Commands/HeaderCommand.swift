internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// `vault header`.
struct HeaderCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "header",
        abstract: "Print an Authorization header with a fresh token (or an OAuth 1.0a signature).",
        usage:
            "header NAME [{method} {url} [{body-form}]] [{dpop-nonce}] [{resource}] [{audience}] [{scope}] "
            + "[{exchange}]",
        arguments: [("NAME", "the grant")],
        discussion: """
            Prints 'Authorization: Bearer TOKEN', ready for curl -H @-. For an OAuth 1.0a grant it
            prints a signed 'Authorization: OAuth ...' header for the request given by --method,
            --url and --body-form (RFC 5849, with a fresh nonce and timestamp). For a grant bound
            to a DPoP key (vault add --dpop) it prints 'Authorization: DPoP TOKEN' and a 'DPoP:'
            proof for the request given by --method and --url (RFC 9449, with the token's hash);
            when the server answers 401 with a DPoP-Nonce header, ask again with --dpop-nonce.
            --resource, --audience, --scope and --exchange put a narrowed token in it, as for
            'vault token'.
            """,
        examples: [
            "vault header work | curl -H @- https://api.example.com/",
            "vault header flickr --url 'https://api.flickr.com/services/rest?method=flickr.test.login'",
            "vault header bound --method POST --url https://api.example.com/items | curl -H @- -d @item.json https://api.example.com/items",
        ],
        printsJSON: false
    )

    let signing = SigningOptions()
    @Option("dpop-nonce", value: "N", help: "DPoP: the nonce the server gave in its DPoP-Nonce header")
    var dpopNonce: String?
    let narrowing = TargetOptions()

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let target = try narrowing.target(ctx)
        if target == nil, signing.bodyForm == nil,
            let made = try Commands.agentAuthorization(
                name, method: signing.method ?? "GET", url: signing.url, nonce: dpopNonce, ctx: ctx)
        {
            try printFields(name, made)
            return .ok
        }
        let grant = try Commands.freshGrants([name], target: target, ctx: ctx)[0].1
        if dpopNonce != nil && !grant.accessTokenIsDPoPBound {
            throw CLIError.usage("--dpop-nonce is for an access token bound to a DPoP key", command: "header")
        }
        let line: String
        if grant.kind == .oauth1 {
            line = "Authorization: " + OAuth1.authorizationHeader(try signing.signature(grant, ctx: ctx))
        } else if grant.accessTokenIsDPoPBound {
            line = try dpopLines(name, grant, ctx: ctx)
        } else {
            line = "Authorization: Bearer \(try headerToken(name, grant))"
        }
        var bytes = Array((line + "\n").utf8)
        Console.writeAll(&bytes, fd: 1)
        return .ok
    }

    /// Prints the fields an agent made (operation 13), under the rules a
    /// header made here follows.
    func printFields(_ name: String, _ made: RequestAuthorization) throws {
        if dpopNonce != nil && !made.dpopBound {
            throw CLIError.usage("--dpop-nonce is for an access token bound to a DPoP key", command: "header")
        }
        if made.dpopBound { try checkBoundTarget(signing.url ?? "") }
        // `Authorization: SCHEME TOKEN` and a proof: visible ASCII, one space after the scheme.
        let names = made.fields.map { $0.name.lowercased() }
        let wellFormed = made.fields.allSatisfy { field in
            let words = field.value.split(separator: " ", omittingEmptySubsequences: false)
            return words.count == (field.name.lowercased() == "authorization" ? 2 : 1)
                && words.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { (0x21...0x7e).contains($0) } }
        }
        guard names == (made.dpopBound ? ["authorization", "dpop"] : ["authorization"]), wellFormed else {
            throw CLIError(
                "the agent's header fields for '\(name)' are not ones an HTTP request can carry",
                hint: "run 'vault refresh \(name)', or 'vault add \(name)' to authorize it again")
        }
        var bytes = Array((made.fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n") + "\n").utf8)
        Console.writeAll(&bytes, fd: 1)
    }

    /// A DPoP-bound token travels with its proof over https, or plain http
    /// to this machine only.
    func checkBoundTarget(_ url: String) throws {
        guard case .success = Result(catching: { () throws(HTTPError) in try URLPolicy.check(url) }) else {
            throw CLIError.usage(
                "a DPoP-bound token goes to an https URL (or plain http to this machine only)", command: "header")
        }
    }

    /// The grammar of --url, --method and --dpop-nonce, which a signature
    /// or a DPoP proof covers, and the narrowing options: checked before a
    /// refresh spends anything.
    func validate() throws(ValidationError) {
        try narrowing.validate()
        if let url = signing.url, !DPoPKey.isRequestURL(url) {
            throw ValidationError(
                "--url must be an absolute http or https URL of at most 8 KiB of printable ASCII, without spaces "
                    + "or backslashes (percent-encode other characters)")
        }
        if let method = signing.method, !DPoPKey.isMethod(method) {
            throw ValidationError("--method must be an HTTP method in capitals (GET, POST, ...)")
        }
        if let nonce = dpopNonce, !DPoPKey.isNonce(nonce) {
            throw ValidationError(
                "--dpop-nonce is not a DPoP nonce (1 to 1024 printable ASCII characters without spaces, quotes "
                    + "or backslashes)")
        }
    }

    /// The access token, refused when it would break the header line.
    func headerToken(_ name: String, _ grant: Grant) throws -> String {
        let token = grant.accessToken ?? ""
        // A header value ends at a line break: refuse what would start another header.
        guard !token.isEmpty, token.unicodeScalars.allSatisfy({ (0x21...0x7e).contains($0.value) }) else {
            throw CLIError(
                "the access token of '\(name)' has characters an HTTP header cannot carry",
                hint: "run 'vault refresh \(name)', or 'vault add \(name)' to authorize it again")
        }
        return token
    }

    /// `Authorization: DPoP TOKEN` and the `DPoP` proof for --method on --url.
    func dpopLines(_ name: String, _ grant: Grant, ctx: Context) throws -> String {
        guard let url = signing.url else {
            throw CLIError.usage(
                "'\(name)' is bound to a DPoP key: its proof is for one request, given by --url (and --method)",
                command: "header")
        }
        guard signing.bodyForm == nil else {
            throw CLIError.usage(
                "--body-form is for OAuth 1.0a; a DPoP proof does not cover the body", command: "header")
        }
        try checkBoundTarget(url)
        _ = try headerToken(name, grant)
        let headers = try grant.authorizationHeaders(
            method: signing.method ?? "GET", url: url, nonce: dpopNonce, at: ctx.time.now())
        return headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { signing.declarations + [$dpopNonce] + narrowing.declarations }
}
