internal import VaultCore

/// The one message `vault add` gives when a provider has no client yet:
/// where to register an application, what to enter there, which scopes,
/// whether vault needs the secret, and how to hand the client to vault.
/// The provider-specific words are data (`registration` in the provider
/// file); every line is escaped on its way to the terminal.
enum ClientRegistration {
    static func error(for p: Provider, configDirectory: String) -> CLIError {
        let who = p.displayName ?? p.name
        let r = p.registration
        let oauth1 = p.protocolVersion == .oauth1
        var hints = ["register an application with \(who) at " + (r?.url ?? "the provider's developer pages")]
        if p.flows.contains(.browser) || p.flows.contains(.paste) {
            let redirect =
                p.redirectURI.map { "\($0), as the provider file's redirect_uri says" } ?? r?.redirectURI
                ?? "http://127.0.0.1/callback if the provider accepts any loopback port; else a fixed one such as "
                + "http://127.0.0.1:8976/callback, set as redirect_uri in the provider file too"
            hints.append("redirect URI: \(redirect)")
        }
        if p.flows.contains(.device) {
            hints.append(
                "device flow (--flow device): "
                    + (r?.deviceFlow ?? "enable it for the application if the provider asks"))
        }
        if !p.scopes.isEmpty {
            hints.append("scopes: \(p.scopes.joined(separator: " ")) (what vault asks for; more with --scope)")
        }
        let secret = r?.clientSecret ?? (p.publicClient ? "none" : "give it to vault if the provider issues one")
        hints.append("client secret: \(secret)")
        let id = oauth1 ? "KEY" : "ID"
        let needsSecret = oauth1 || !p.publicClient
        let file = "\(configDirectory)/providers/\(p.name).json"
        let json =
            needsSecret ? "{\"client_id\": \"\(id)\", \"client_secret\": \"SECRET\"}" : "{\"client_id\": \"\(id)\"}"
        let flags = needsSecret ? "--client-id \(id) --client-secret-file FILE" : "--client-id \(id)"
        hints.append("then give vault the client: put \(json) in \(file) (mode 0600), or pass \(flags)")
        return CLIError(
            "provider '\(p.name)' has no client: vault needs an application registered with \(who) first",
            hints: hints)
    }
}
