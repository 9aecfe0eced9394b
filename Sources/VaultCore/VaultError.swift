/// An error from VaultKit: a stable code, a lower-case reason without
/// secrets, and an optional remedy that a front end says in its own words.
public struct VaultError: Error, Equatable, CustomStringConvertible, Sendable {
    /// Stable identifiers. The groups say how a caller recovers. Open to
    /// new codes, as swift-nio's errors are: a `switch` over codes needs a
    /// `default`, so a code added later breaks no app's build; an unknown
    /// code is best treated as a failure that changed nothing.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The stable text of the code (`vault.not_found`, ...).
        public let rawValue: String

        /// A code from its stable text.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The stable text.
        public var description: String { rawValue }

        // The request cannot be served as asked.
        /// No grant, slot or object of that name.
        public static let notFound = Code(rawValue: "vault.not_found")
        /// Something of that name is there already.
        public static let alreadyExists = Code(rawValue: "vault.already_exists")
        /// The input does not fit its grammar or the operation.
        public static let invalidInput = Code(rawValue: "vault.invalid_input")
        /// No vault at the place given.
        public static let noVault = Code(rawValue: "vault.no_vault")
        // Unlocking.
        /// The passphrase or key does not open the vault.
        public static let wrongKey = Code(rawValue: "vault.wrong_key")
        /// The vault is locked: a key is needed.
        public static let locked = Code(rawValue: "vault.locked")
        // Stored bytes that fail their checks.
        /// Stored bytes are cut or malformed.
        public static let damaged = Code(rawValue: "vault.damaged")
        /// Stored bytes fail their authentication.
        public static let tampered = Code(rawValue: "vault.tampered")
        /// A format, version or store this build does not take.
        public static let unsupported = Code(rawValue: "vault.unsupported")
        // Talking to a provider.
        /// The provider refused the grant (`invalid_grant` in a 400 or 401, or a
        /// provider's documented equivalent), or the person denied an authorization.
        /// In a refresh, the one error that marks a grant dead.
        public static let refused = Code(rawValue: "vault.refused")
        /// The provider does not accept the client (`invalid_client`,
        /// `unauthorized_client`): its id, secret or authentication method must
        /// change. Says nothing about the grant, which is kept as it is.
        public static let invalidClient = Code(rawValue: "vault.invalid_client")
        /// The provider answered with another OAuth error (`invalid_request`,
        /// `invalid_scope`, ...): a failure that changes nothing.
        public static let providerError = Code(rawValue: "vault.provider_error")
        /// A network failure, a 429 or 5xx whatever its body, or temporarily_unavailable: try again later.
        public static let transient = Code(rawValue: "vault.transient")
        /// The provider's answer failed a check (malformed, wrong state, nonce or audience).
        public static let badResponse = Code(rawValue: "vault.bad_response")
        /// Nobody completed the authorization in time (the browser never came
        /// back, the device code expired): running it again can succeed.
        public static let timedOut = Code(rawValue: "vault.timed_out")
        /// The grant needs a new authorization (refused by the provider, or expired without a refresh token).
        public static let dead = Code(rawValue: "vault.dead")
        /// The agent's policy, or the person asked to confirm, refused to hand
        /// out the grant's token; the grant is fine.
        public static let denied = Code(rawValue: "vault.denied")
        // The environment.
        /// Another process or machine holds what is needed; try again shortly.
        public static let busy = Code(rawValue: "vault.busy")
        /// The calling task was cancelled before the work began; nothing changed.
        public static let cancelled = Code(rawValue: "vault.cancelled")
        /// The file system failed.
        public static let io = Code(rawValue: "vault.io")
        /// A file or directory others could change or read.
        public static let insecurePath = Code(rawValue: "vault.insecure_path")
        /// A bug, or a code from a newer peer this build does not know.
        public static let internalError = Code(rawValue: "vault.internal")
    }

    /// What went wrong.
    public let code: Code
    /// A lower-case explanation without secrets or final period.
    public let reason: String
    /// The provider's OAuth error code (`invalid_grant`, ...), when it gave one.
    public let oauthError: String?
    /// What would get past the error, for a front end to say in its own
    /// words (the command line names its commands; an app its screens).
    public let remedy: Remedy?
    /// The HTTP status of the provider's answer the error comes from, if any.
    public private(set) var httpStatus: Int?
    /// Seconds the provider asked to wait before trying again (its
    /// `Retry-After`, with a 429 or 5xx), if it said. A date there is
    /// counted from the answer's own `Date`, never from this machine's clock.
    public private(set) var retryAfter: Double?

    /// Creates an error.
    public init(
        _ code: Code, _ reason: String, oauthError: String? = nil, remedy: Remedy? = nil
    ) {
        self.code = code
        self.reason = reason
        self.oauthError = oauthError
        self.remedy = remedy
    }

    /// The same error, with the HTTP status of the answer it comes from.
    package func with(httpStatus status: Int) -> VaultError {
        var copy = self
        copy.httpStatus = status
        return copy
    }

    /// The same error, with the wait the provider asked for.
    package func with(retryAfter seconds: Double?) -> VaultError {
        var copy = self
        copy.retryAfter = seconds
        return copy
    }

    /// A way past an error, named without any front end's words.
    ///
    /// Releases add cases as vault learns new ways past errors: a `switch`
    /// over a remedy keeps a `default:` for those it does not word itself.
    public enum Remedy: Sendable, Equatable, Codable {
        /// Authorize the grant again with its provider.
        case authorizeAgain(provider: String, grant: String)
        /// Add the machine grant again with a new key or secret (the
        /// provider refused the stored one: deleted, disabled, rotated).
        case replaceCredentials(provider: String, grant: String, serviceAccount: Bool)
        /// Save again, replacing the grant of that name.
        case replaceExisting
        /// Look at the stored grants' names.
        case listGrants
        /// Create a vault first.
        case createVault
        /// Unlock with the passphrase or key file in this process, not through the agent.
        case unlockDirectly
        /// Choose a known provider, or describe one by its issuer.
        case chooseProvider(known: [String])
        /// Change the passphrase rather than add a second one.
        case changePassphrase
        /// Look at the keyslots' numbers.
        case listKeyslots
        /// Give the client id (and, for OAuth 1.0a, its secret or key).
        case giveClient(oauth1: Bool)
        /// Give the client id, or set it in a provider definition.
        case configureClient
        /// Authorize with another flow.
        case useFlow([Provider.Flow])
        /// Finish in the browser sooner, or use another flow.
        case finishSooner(otherFlows: [Provider.Flow])
        /// As `finishSooner`, for a browser sent back to a port chosen for
        /// this run: a provider that takes only the redirect URI registered
        /// for its client shows an error instead, and needs that URI named.
        case finishSoonerOrFixRedirect(otherFlows: [Provider.Flow])
        /// The grant was kept: try again, or remove it without revoking.
        case removeWithoutRevoking
        /// Store the grant with its provider's endpoints and client, or authorize again.
        case addProviderConfiguration
        /// Set the sync store first.
        case setRemote
        /// Sync again.
        case syncAgain
        /// Set the sync store's credentials again.
        case setStoreCredentials
        /// Look at the kept conflicts.
        case listConflicts
        /// Let a machine that has the vault publish it to the store first.
        case publishFromAnotherMachine
        /// Sync first.
        case syncFirst
        /// Make a pairing code on a machine that has the vault.
        case pairOnOtherMachine
        /// Make a new pairing code.
        case pairAgain
        /// Join with the passphrase or key file of the vault on the machine
        /// it came from, or with a pairing code made there.
        case joinWithOtherKey(passphrase: Bool)
        /// Pick one of the sections of another tool's file (rclone's
        /// remotes, gh's hosts) that could be meant.
        case chooseSection(tool: String, among: [String])
        /// Give a machine grant its client's secret or private key.
        case giveMachineCredentials
        /// Remove the grant and add it anew from its configured provider
        /// (it keeps endpoints of its own that the provider does not have).
        case addFromProvider(provider: String, grant: String)
        /// Check the sync store's address: it answers, but not as a store of
        /// that kind at that address does (a plain-http server asked for
        /// TLS, an S3 server at a WebDAV URL, a bucket that does not exist).
        case checkStoreAddress
        /// The store's folder holds another vault: join that vault (as a
        /// vault of its own), or sync this one to another folder.
        case joinStoreVaultOrChooseAnother

        // Waiting.
        /// Another process holds the vault for a moment: try again shortly.
        case tryAgainShortly
        /// Another machine holds the sync lease: try again in a minute.
        case tryAgainInAMinute
        /// The provider is unavailable for now: try again later.
        case tryAgainLater
        /// The network failed: check it and try again.
        case checkNetwork
        /// Set this machine's clock right and try again; nothing changed.
        case setClock

        // An agent's confirmation.
        /// The agent's policy says to confirm `grant` for requests of this
        /// origin, and its agent has no way to ask: allow the grant for
        /// them with `vault policy`, or start the agent with a way to ask.
        /// `forwarded`: the request came through a forwarded agent, so
        /// that is done on the machine that holds the vault.
        case allowOrAskForConfirmation(grant: String, forwarded: Bool)
        /// The agent refused to ask the person again so soon (too many
        /// questions in the last minute): wait a minute, or allow `grant`
        /// for requests of this origin with `vault policy`.
        case waitForQuestionsOrAllow(grant: String, forwarded: Bool)
        /// The agent a forwarded socket leads to is locked or not running:
        /// unlock it on the machine that holds the vault.
        case unlockForwardingAgent

        // The sync store.
        /// The store answered in a way sync cannot use; local data is untouched.
        case checkStore
        /// Create the store's folder on the server (it does not create it
        /// itself), or check the URL.
        case createStoreFolder

        // Files and directories.
        /// Set HOME (or the vault's own location variables).
        case setHome
        /// Keep the vault's files in directories of one's own.
        case useOwnDirectories
        /// Take write permission on `path` from group and others (or, with
        /// `orElsewhere`, keep the files somewhere else).
        case removeOthersWrite(path: String, orElsewhere: Bool)
        /// Take write permission on `path` from group and others, if it is
        /// meant to be private.
        case removeOthersWriteIfPrivate(path: String)
        /// Make the directory at `path` private to its owner.
        case makeDirectoryPrivate(path: String)
        /// Make the file at `path` readable by its owner only (others could
        /// try passphrases against it offline).
        case makeFilePrivate(path: String)
        /// Remove the file, or replace it with one of one's own.
        case replaceWithOwnFile
        /// Remove the file's other names (hard links), or copy it to a new file.
        case removeOtherLinks
        /// Give the secret in a file, or as a command's output.
        case secretFromFileOrCommand

        // Input.
        /// Name grants with 1 to `maximumLength` letters, digits and `. _ @ + -`,
        /// not starting with `-` or `.`.
        case grantNameGrammar(maximumLength: Int)
        /// Add the provider's name to the token JSON (`"provider": "NAME"`).
        case nameProviderInJSON
        /// Give the URL (and method) of the request a DPoP proof is for.
        case giveRequestURL
        /// Have the request's header fields made with a proof signed by the
        /// grant's DPoP key, where the key is, rather than its bare token.
        case signRequestWithKey(grant: String)
        /// A token file's tokens are bound to a key it does not carry:
        /// authorize here with a key of this vault, or sync the vault that has it.
        case authorizeWithDPoP(provider: String)
        /// Rename the provider file to `file`.json, or make its inner name `name`.
        case renameProviderFile(file: String, name: String)
        /// The sections of another tool's file that hold a token.
        case sectionsWithTokens([String])
        /// gh keeps its token in the system keyring: log in to gh without it,
        /// or import gh's printed token.
        case ghTokenInKeyring
        /// A service account's key is not a grant a person authorized.
        case serviceAccountKeyIsNoGrant
        /// Download the service account's key as JSON.
        case downloadServiceAccountKey
        /// OAuth 1.0a grants keep token_secret and the client's id and secret.
        case oauth1GrantFields
        /// Give the private key as unencrypted PKCS#8 PEM; `from` says what
        /// was given instead.
        case pkcs8Key(from: KeyForm)
        /// The flows the provider offers.
        case offeredFlows([Provider.Flow])
        /// Start the device authorization again and enter the new code in time.
        case restartDeviceAuthorization
        /// The wait for a device approval ended at the caller's own time
        /// limit, before the code expired at the provider: start again and
        /// approve sooner, or allow more time, up to the code's lifetime
        /// (`codeLifetime` seconds).
        case waitLongerForDevice(codeLifetime: Int)
        /// Approve the request on the provider's page.
        case approveAtProvider
        /// Check the client's id and secret and the client authentication
        /// the provider accepts; no grant was marked dead.
        case checkClientAuthentication
        /// Declare in the provider file that an empty 400 means invalid_grant.
        case declareEmpty400IsInvalidGrant
        /// Stored grant names close to the one asked for, which may be what
        /// was meant (nearest first; a name none is close to gets `listGrants`).
        case nearGrantNames([String])
        /// The provider refused this client's revocation request (401, 403):
        /// trying again will not help; removing the grant without revoking
        /// leaves its tokens valid at the provider until they expire.
        case revocationRefused(grant: String)

        /// A private key's form, for `pkcs8Key`.
        public enum KeyForm: String, Sendable, Equatable, Codable {
            /// An encrypted PKCS#8 key.
            case encrypted
            /// A PKCS#1 (`BEGIN RSA PRIVATE KEY`) key.
            case pkcs1
            /// Something else, or nothing recognisable.
            case other
        }
    }

    /// The reason, without secrets.
    public var description: String { reason }
}
