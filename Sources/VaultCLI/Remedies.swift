internal import VaultCore

/// The command line's words for a library error's remedy: the library names
/// what would help, and only this layer knows it as commands and flags.
enum Remedies {
    static func hint(_ remedy: VaultError.Remedy) -> String {
        switch remedy {
        // The grant keeps its provider and client: its name alone authorizes it again.
        case .authorizeAgain(_, let grant): return "run 'vault add \(grant)' to authorize it again"
        case .replaceCredentials(let provider, let grant, let serviceAccount):
            return serviceAccount
                ? "the provider refused the service account's key (deleted or disabled?): add a new key with 'vault add \(provider) \(grant) --service-account KEY.json'"
                : "the provider refused the client's credentials: add them again with 'vault add \(provider) \(grant) --flow client-credentials'"
        case .replaceExisting: return "use --replace to overwrite it"
        case .listGrants: return "'vault list' shows the stored grants"
        case .createVault: return "run 'vault init' to create one"
        case .unlockDirectly: return "unlock with the passphrase or key file itself (VAULT_AGENT=off)"
        case .chooseProvider(let known): return "known providers: \(known.joined(separator: ", ")); or use --issuer URL"
        case .changePassphrase: return "'vault passwd' changes it"
        case .listKeyslots: return "'vault keyslot list' shows them"
        case .giveClient(let oauth1):
            return oauth1
                ? "pass --client-id and --client-secret-file (for RSA-SHA1, the PEM private key)" : "pass --client-id"
        case .configureClient: return "pass --client-id, or set client_id in a provider file (see 'vault providers')"
        case .useFlow(let flows): return "try " + flows.map { "--flow \($0.rawValue)" }.joined(separator: " or ")
        case .finishSooner(let flows):
            // Only the flows the provider has: no --flow device where there is no device endpoint.
            guard !flows.isEmpty else {
                return "finish the authorization in the browser sooner (--timeout gives more time)"
            }
            return "finish the authorization in the browser sooner, or use "
                + flows.map { "--flow \($0.rawValue)" }.joined(separator: " or ")
        case .removeWithoutRevoking: return "the grant was kept; try again, or remove it without --revoke"
        case .addProviderConfiguration:
            return "configure its provider (a provider file with token_endpoint and client_id) and import it again"
        case .setRemote: return "set one with 'vault remote set URL'"
        case .syncAgain: return "run 'vault sync' again"
        case .setStoreCredentials: return "set the store's credentials with 'vault remote set'"
        case .listConflicts: return "'vault conflicts' lists them"
        case .publishFromAnotherMachine: return "run 'vault remote set' and 'vault sync' on a machine that has it"
        case .syncFirst: return "run 'vault sync' first"
        case .pairOnOtherMachine: return "'vault pair' on the other machine prints one"
        case .pairAgain: return "run 'vault pair' again"
        case .joinWithOtherKey(let passphrase):
            return passphrase
                ? "give the passphrase of the vault on the machine that syncs to this store, or join with --pairing-code-file and a code from 'vault pair' there"
                : "give a key file of the vault on the machine that syncs to this store (VAULT_KEYFILE), or join with --pairing-code-file and a code from 'vault pair' there"
        case .chooseSection(let tool, let among):
            let flag = tool == "gh" ? "--host" : "--remote"
            return "choose one with \(flag): \(among.joined(separator: ", "))"
        case .giveMachineCredentials: return "give --client-secret-file FILE or --client-key-file FILE"
        case .addFromProvider(let provider, let grant):
            return
                "to authorize it at \(provider)'s own endpoints: 'vault remove \(grant)', then 'vault add \(provider) \(grant)'"
        }
    }
}
