internal import VaultCore

/// The command line's words for a library error's remedy: the library names
/// what would help, and only this layer knows it as commands and flags.
enum Remedies {
    /// What the person can do about an error, in the command line's words:
    /// each remedy is routed to the one topic that words it (a remedy the
    /// switch misses does not compile).
    static func hint(_ remedy: VaultError.Remedy) -> String {
        let words: String?
        switch remedy {
        case .authorizeAgain, .replaceCredentials, .replaceExisting, .listGrants, .nearGrantNames, .grantNameGrammar,
            .chooseProvider, .giveClient, .configureClient, .giveMachineCredentials, .useFlow, .offeredFlows,
            .finishSooner, .finishSoonerOrFixRedirect, .restartDeviceAuthorization, .waitLongerForDevice,
            .approveAtProvider, .checkClientAuthentication, .declareEmpty400IsInvalidGrant, .removeWithoutRevoking,
            .renameProviderFile,
            .setClock, .revocationRefused:
            words = authorization(remedy)
        case .addProviderConfiguration, .addFromProvider, .nameProviderInJSON, .chooseSection, .sectionsWithTokens,
            .ghTokenInKeyring, .serviceAccountKeyIsNoGrant, .downloadServiceAccountKey, .oauth1GrantFields, .pkcs8Key,
            .giveRequestURL, .signRequestWithKey, .authorizeWithDPoP:
            words = importing(remedy)
        case .setRemote, .syncAgain, .setStoreCredentials, .listConflicts, .publishFromAnotherMachine, .syncFirst,
            .pairOnOtherMachine, .pairAgain, .joinWithOtherKey, .checkStoreAddress, .joinStoreVaultOrChooseAnother,
            .checkStore, .createStoreFolder, .tryAgainShortly, .tryAgainInAMinute, .tryAgainLater, .checkNetwork:
            words = syncing(remedy)
        case .allowOrAskForConfirmation, .waitForQuestionsOrAllow, .unlockForwardingAgent:
            words = agent(remedy)
        case .createVault, .unlockDirectly, .changePassphrase, .listKeyslots, .setHome, .useOwnDirectories,
            .removeOthersWrite, .removeOthersWriteIfPrivate, .makeDirectoryPrivate, .makeFilePrivate,
            .replaceWithOwnFile, .removeOtherLinks, .secretFromFileOrCommand:
            words = localVault(remedy)
        }
        return words ?? ""
    }

    /// A grant, its name, its provider and client, and the authorization flows.
    /// Nil for a remedy of another topic (`hint` routes each to its own).
    private static func authorization(_ remedy: VaultError.Remedy) -> String? {
        switch remedy {
        // The grant keeps its provider and client: its name alone authorizes it again.
        case .authorizeAgain(_, let grant): return "run 'vault add \(grant)' to authorize it again"
        case .replaceCredentials(let provider, let grant, let serviceAccount):
            // The error says what the provider refused (`Grant.refusal`).
            return serviceAccount
                ? "add a new key with 'vault add \(provider) \(grant) --service-account KEY.json'"
                : "give the client's secret or key again with 'vault add \(provider) \(grant) --flow client-credentials' "
                    + "and --client-secret-file FILE or --client-key-file FILE"
        case .replaceExisting: return "use --replace to overwrite it"
        case .listGrants: return "'vault list' shows the stored grants"
        case .nearGrantNames(let names):
            guard !names.isEmpty else { return hint(.listGrants) }
            return didYouMean(names)
        case .grantNameGrammar(let maximumLength):
            return "use 1 to \(maximumLength) letters, digits and . _ @ + -, not starting with - or ."
        case .chooseProvider(let known): return "known providers: \(known.joined(separator: ", ")); or use --issuer URL"
        case .giveClient(let oauth1):
            return oauth1
                ? "pass --client-id and --client-secret-file (for RSA-SHA1, the PEM private key)" : "pass --client-id"
        case .configureClient: return "pass --client-id, or set client_id in a provider file (see 'vault providers')"
        case .giveMachineCredentials: return "give --client-secret-file FILE or --client-key-file FILE"
        case .useFlow(let flows): return "try " + flows.map { "--flow \($0.rawValue)" }.joined(separator: " or ")
        case .offeredFlows(let flows): return "it offers: \(flows.map(\.rawValue).joined(separator: ", "))"
        case .finishSooner(let flows):
            // Only the flows the provider has: no --flow device where there is no device endpoint.
            guard !flows.isEmpty else {
                return "finish the authorization in the browser sooner (--timeout gives more time)"
            }
            return "finish the authorization in the browser sooner, or use "
                + flows.map { "--flow \($0.rawValue)" }.joined(separator: " or ")
        case .finishSoonerOrFixRedirect(let flows):
            return (authorization(.finishSooner(otherFlows: flows)) ?? "")
                + "; if the provider showed an error about the redirect URI, it takes only the one registered for "
                + "its client: name it as \"redirect_uri\" (a loopback address with a fixed port) in the "
                + "provider's file (docs/providers.md)"
        case .restartDeviceAuthorization: return "start the authorization again and enter the new code in time"
        case .waitLongerForDevice(let lifetime):
            return "run it again and approve the code sooner, or wait longer with --timeout SECONDS "
                + "(the provider keeps a code for \(lifetime) seconds)"
        case .approveAtProvider: return "approve the request on the provider's page to add the grant"
        case .checkClientAuthentication:
            return
                "check the client id and secret, and the client authentication the provider accepts (token_endpoint_auth_method); no grant was marked dead"
        case .declareEmpty400IsInvalidGrant:
            return
                "a provider that answers a revoked refresh token with an empty 400 (glewlwyd does) needs \"empty_400_is_invalid_grant\": true in its provider file"
        case .removeWithoutRevoking: return "the grant was kept; try again, or remove it without --revoke"
        case .renameProviderFile(let file, let name):
            return "rename the file to \(file).json, or make its \"name\" '\(name)' (or remove it)"
        case .setClock:
            return "set this machine's clock right (NTP, timedatectl) and try again; the grant was not changed"
        case .revocationRefused(let grant):
            return "the grant was kept: 'vault remove \(grant)' without --revoke removes it here, and its tokens "
                + "stay valid at the provider until they expire; to end them sooner, remove the app's access "
                + "(or sign out its sessions) in your account's settings at the provider"
        default: return nil
        }
    }

    /// Importing other tools' grants and keys, and requests signed with a grant.
    /// Nil for a remedy of another topic (`hint` routes each to its own).
    private static func importing(_ remedy: VaultError.Remedy) -> String? {
        switch remedy {
        case .addProviderConfiguration:
            return "configure its provider (a provider file with token_endpoint and client_id) and import it again"
        case .addFromProvider(let provider, let grant):
            return
                "to authorize it at \(provider)'s own endpoints: 'vault remove \(grant)', then 'vault add \(provider) \(grant)'"
        case .nameProviderInJSON: return "add \"provider\": \"NAME\""
        case .chooseSection(let tool, let among):
            let flag = tool == "gh" ? "--host" : "--remote"
            return "choose one with \(flag): \(among.joined(separator: ", "))"
        case .sectionsWithTokens(let names): return "its remotes with a token: \(names.joined(separator: ", "))"
        case .ghTokenInKeyring:
            return "gh keeps it in the system keyring: log in again with 'gh auth login --insecure-storage', "
                + "or import the output of 'gh auth token' as {\"access_token\": ..., \"provider\": \"github\"}"
        case .serviceAccountKeyIsNoGrant:
            return "a service account key is not a grant a person authorized: it has nothing to import"
        case .downloadServiceAccountKey:
            return "download the key as JSON (Google Cloud console: IAM, Service accounts, Keys, Add key, JSON)"
        case .oauth1GrantFields:
            return "OAuth 1.0a grants keep token_secret and provider_config.client_id/client_secret"
        case .pkcs8Key(.encrypted):
            return
                "decrypt it with 'openssl pkcs8 -in KEY -out KEY.pk8' (vault keeps it encrypted in the vault) and give that file"
        case .pkcs8Key(.pkcs1):
            return "convert it with 'openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8' and give that file"
        case .pkcs8Key(.other): return "give an unencrypted PKCS#8 RSA private key in PEM form"
        case .giveRequestURL: return "give the request's URL with --url (and its method with --method)"
        case .signRequestWithKey(let grant):
            return "'vault header \(grant) --url URL' prints a request's header fields with a proof signed by the key"
        case .authorizeWithDPoP(let provider):
            return "its key never leaves the program that made it: run 'vault add \(provider) --dpop' to authorize "
                + "with a key of this vault, or sync from the vault that holds the grant"
        default: return nil
        }
    }

    /// The sync store, pairing and joining, and waits for the network.
    /// Nil for a remedy of another topic (`hint` routes each to its own).
    private static func syncing(_ remedy: VaultError.Remedy) -> String? {
        switch remedy {
        case .setRemote: return "set one with 'vault remote set URL'"
        case .syncAgain: return "run 'vault sync' again"
        case .setStoreCredentials: return "set the store's credentials with 'vault remote set'"
        case .listConflicts: return "'vault conflicts' lists them"
        case .publishFromAnotherMachine:
            return "check the address for a mistyped bucket or folder ('vault remote' on a machine that syncs the "
                + "vault shows its store); if it is right, run 'vault remote set' with it and 'vault sync' on a "
                + "machine that has the vault"
        case .syncFirst: return "run 'vault sync' first"
        case .pairOnOtherMachine: return "'vault pair' on the other machine prints one"
        case .pairAgain: return "run 'vault pair' again"
        case .joinWithOtherKey(let passphrase):
            return passphrase
                ? "give the passphrase of the vault on the machine that syncs to this store, or join with --pairing-code-file and a code from 'vault pair' there"
                : "give a key file of the vault on the machine that syncs to this store (VAULT_KEYFILE), or join with --pairing-code-file and a code from 'vault pair' there"
        case .checkStoreAddress:
            return "check the store's address ('vault remote' shows it) and set it again with 'vault remote set'"
        case .joinStoreVaultOrChooseAnother:
            return "to sync this vault, give another folder; to use the vault the store holds, "
                + "'vault join' it (join makes a new vault: with another VAULT_HOME, or once this one is moved)"
        case .checkStore: return "check the store; local data is untouched"
        case .createStoreFolder:
            return "the store did not create it with MKCOL: create the folder on the server, or check the URL"
        case .tryAgainShortly: return "try again in a moment"
        case .tryAgainInAMinute: return "try again in a minute"
        case .tryAgainLater: return "try again later"
        case .checkNetwork: return "check the network and try again"
        default: return nil
        }
    }

    /// The agent: its policy, the questions it asks, and the agent a
    /// forwarded socket leads to.
    /// Nil for a remedy of another topic (`hint` routes each to its own).
    private static func agent(_ remedy: VaultError.Remedy) -> String? {
        switch remedy {
        case .allowOrAskForConfirmation(let grant, let forwarded):
            return forwarded
                ? "on the machine that holds the vault, run 'vault policy \(grant) --forwarded allow', or start its agent with 'vault agent --confirm-command CMD' so that it can ask"
                : "run 'vault policy \(grant) --local allow', or start the agent with 'vault agent --confirm-command CMD' (or in a terminal) so that it can ask"
        case .waitForQuestionsOrAllow(let grant, let forwarded):
            return forwarded
                ? "wait a minute and try again, or, on the machine that holds the vault, run 'vault policy \(grant) --forwarded allow' so that it is not asked"
                : "wait a minute and try again, or run 'vault policy \(grant) --local allow' so that it is not asked"
        case .unlockForwardingAgent:
            return "on the machine this session came from, unlock the vault for a while with 'vault agent' "
                + "(or any vault command there that unlocks it), then try again here; the ssh session can stay open"
        default: return nil
        }
    }

    /// The local vault: creating and unlocking it, its keyslots, and its files' places and permissions.
    /// Nil for a remedy of another topic (`hint` routes each to its own).
    private static func localVault(_ remedy: VaultError.Remedy) -> String? {
        switch remedy {
        case .createVault: return "run 'vault init' to create one"
        case .unlockDirectly: return "unlock with the passphrase or key file itself (VAULT_AGENT=off)"
        case .changePassphrase: return "'vault passwd' changes it"
        case .listKeyslots: return "'vault keyslot list' shows them"
        case .setHome: return "set HOME, or VAULT_HOME and XDG_CONFIG_HOME"
        case .useOwnDirectories: return "keep vault's files in directories of your own"
        case .removeOthersWrite(let path, let orElsewhere):
            return "run 'chmod go-w \(path)'" + (orElsewhere ? ", or keep vault's files elsewhere" : "")
        case .removeOthersWriteIfPrivate(let path): return "run 'chmod go-w \(path)' if that is intended to be private"
        case .makeDirectoryPrivate(let path): return "run 'chmod 700 \(path)'"
        case .makeFilePrivate(let path):
            return "run 'chmod 600 \(path)'; whoever could read it can try passphrases offline"
        case .replaceWithOwnFile: return "remove it, or replace it with a file of your own"
        case .removeOtherLinks: return "remove the other names of the file, or copy it to a new file of its own"
        case .secretFromFileOrCommand:
            return "write the secret to a file, or give a command's output through a *_COMMAND variable"
        default: return nil
        }
    }

    /// `did you mean 'work' or 'works'?` for names near one that was not
    /// found (grants, commands), nearest first. Names may come from the
    /// vault: the one printer escapes the whole hint.
    static func didYouMean(_ names: [String]) -> String {
        let quoted = names.map { "'\($0)'" }
        let choices = quoted.count == 1 ? quoted[0] : quoted.dropLast().joined(separator: ", ") + " or " + quoted.last!
        return "did you mean \(choices)?"
    }
}
