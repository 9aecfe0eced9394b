internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// `vault xoauth2`.
struct XOAuth2Command: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "xoauth2",
        abstract: "Print the SASL XOAUTH2 (or OAUTHBEARER) response for IMAP and SMTP.",
        usage: "xoauth2 NAME [{base64}] [{user}] [{oauthbearer} [{host}] [{port}]]",
        arguments: [("NAME", "the grant")],
        discussion: """
            XOAUTH2: user=USER^Aauth=Bearer TOKEN^A^A. OAUTHBEARER: n,a=USER,^A[host=HOST^A]
            [port=PORT^A]auth=Bearer TOKEN^A^A. Mail clients usually want --base64; some (msmtp's
            passwordeval with auth oauthbearer) want only the token: use 'vault token'.
            See docs/mail.md for msmtp, mutt, mbsync, offlineimap and aerc.
            """,
        examples: [
            "vault xoauth2 gmail --base64", "vault xoauth2 work --oauthbearer --host imap.example.com --port 993",
        ],
        printsJSON: false
    )

    @Flag("base64", help: "print it base64-encoded, as sent on the wire")
    var base64: Bool
    @Option("user", value: "USER", help: "the login (default: the grant's account)")
    var user: String?
    @Flag("oauthbearer", help: "RFC 7628 OAUTHBEARER instead of XOAUTH2")
    var oauthbearer: Bool
    @Option("host", value: "HOST", help: "OAUTHBEARER: the server's host name")
    var host: String?
    @Option("port", value: "PORT", help: "OAUTHBEARER: the server's port")
    var port: Port?

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        // OAUTHBEARER's host and port fields, checked before any token is fetched.
        var kv = ""
        if let host = host {
            guard OutputGrammar.isSASLHost(host) else {
                throw CLIError.usage(
                    "--host must be a host name or an IP address, not \(host.debugDescription)", command: "xoauth2")
            }
            kv += "host=\(host)\u{1}"
        }
        if let port { kv += "port=\(port.number)\u{1}" }
        let grant = try Commands.freshGrants([name], ctx: ctx)[0].1
        guard let user = user ?? grant.account else {
            throw CLIError("grant '\(name)' names no account", hint: "pass --user LOGIN")
        }
        let token = grant.accessToken ?? ""
        // Every field is checked against the SASL grammar: a ^A or a line
        // break in an account from an ID token would add fields of its own.
        guard OutputGrammar.isSASLUser(user) else {
            throw CLIError(
                "the user name \(user.debugDescription) contains control characters, which SASL cannot carry",
                hint: "pass the login with --user")
        }
        guard OutputGrammar.isBearerToken(token) else {
            throw CLIError(
                "the access token of '\(name)' is not a bearer token SASL can carry (RFC 6750 b64token)",
                hint: "run 'vault refresh \(name)', or 'vault add \(name)' to authorize it again")
        }
        let response: String
        if oauthbearer {
            // RFC 7628 section 3.1; the authzid in the GS2 header escapes , and =.
            let authzid = user.replacing("=", with: "=3D").replacing(",", with: "=2C")
            response = "n,a=\(authzid),\u{1}\(kv)auth=Bearer \(token)\u{1}\u{1}"
        } else {
            response = "user=\(user)\u{1}auth=Bearer \(token)\u{1}\u{1}"
        }
        var bytes =
            base64
            ? Array((Base64.encodeString(Array(response.utf8), .standard) + "\n").utf8) : Array(response.utf8)
        Console.writeAll(&bytes, fd: 1)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$base64, $user, $oauthbearer, $host, $port] }
}
