internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// What `vault sync --json` prints.
struct SyncOutput: Encodable {
    let pulled: Int
    let pushed: Int
    let conflicts: [String]
    let renamed: [String]
    let repaired: Bool
    let rootMoved: Bool
    let requests: Int
    let bytesSent: Int
    let collected: Int
    let passphraseTaken: Bool
    let passphrases: Int

    enum CodingKeys: String, CodingKey {
        case pulled, pushed, conflicts, renamed, repaired, requests, collected, passphrases
        case bytesSent = "bytes_sent"
        case rootMoved = "root_moved"
        case passphraseTaken = "passphrase_taken"
    }
}

/// One side of a conflict in `vault conflicts --json`.
struct ConflictSide: Encodable {
    let side: String
    /// The name this side gives the grant (two renames differ here).
    let name: String
    let provider: String?
    let machine: String?
    let thisMachine: Bool
    let removed: Bool
    let state: String?
    let changed: String?
    let account: String?
    /// The scopes this side was granted (nil for a removed side).
    let scopes: [String]?
    let expires: String?
    let fingerprint: String?

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(side, forKey: .side)
        try c.encode(name, forKey: .name)
        try c.encode(provider, forKey: .provider)
        try c.encode(machine, forKey: .machine)
        try c.encode(thisMachine, forKey: .thisMachine)
        try c.encode(removed, forKey: .removed)
        try c.encode(state, forKey: .state)
        try c.encode(changed, forKey: .changed)
        try c.encode(account, forKey: .account)
        try c.encode(scopes, forKey: .scopes)
        try c.encode(expires, forKey: .expires)
        try c.encode(fingerprint, forKey: .fingerprint)
    }

    enum CodingKeys: String, CodingKey {
        case side, name, provider, machine, removed, state, changed, account, scopes, expires, fingerprint
        case thisMachine = "this_machine"
    }
}

/// A conflict in `vault conflicts --json`.
struct ConflictRow: Encodable {
    let name: String
    let current: String
    let other: String
    let sides: [ConflictSide]
}

/// What `vault remote --json` prints: the store, or nulls when none is set.
struct RemoteOutput: Encodable {
    let url: String?
    let user: String?
    /// Whether the store honours If-Match; nil when none is set.
    let preconditions: Bool?

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(url, forKey: .url)
        try c.encode(user, forKey: .user)
        try c.encode(preconditions, forKey: .preconditions)
    }

    enum CodingKeys: String, CodingKey { case url, user, preconditions }
}

extension Commands {
    /// What a sync did: counts on stderr, or the `--json` document.
    static func printSyncReport(_ r: SyncReport, to output: Output) throws {
        if output.json {
            try output.printJSON(
                SyncOutput(
                    pulled: r.pulled, pushed: r.pushed, conflicts: r.conflicts, renamed: r.renamed,
                    repaired: r.repaired, rootMoved: r.rootMoved, requests: r.requests, bytesSent: r.bytesSent,
                    collected: r.collected, passphraseTaken: r.passphraseTaken, passphrases: r.passphrases))
            return
        }
        let collected =
            r.collected == 0 ? "" : ", \(r.collected) old object\(r.collected == 1 ? "" : "s") deleted"
        output.info(
            "synced: \(r.pulled) received, \(r.pushed) sent "
                + "(\(r.requests) request\(r.requests == 1 ? "" : "s")\(collected))")
        // The store's quirk was told when it was found ('vault remote set');
        // what it means for this sync is told here, with who must sync.
        if r.repaired {
            output.warn(
                "the store had lost an update from this machine; sent again: "
                    + "run 'vault sync' on the other machines to receive it")
        }
        if r.rootMoved {
            output.warn(
                "another machine wrote to the store during this sync, and the store ignores If-Match: "
                    + "run 'vault sync' on the other machines, then here again")
        }
        for name in r.renamed {
            output.info("'\(name)': a grant of the same name came from another machine; kept both")
        }
        for right in r.handedOver {
            output.info(
                "handed the right to refresh '\(right.grant)' over to "
                    + (right.machine.map { "machine \($0), which asked for it" } ?? "the machine that asked for it"))
        }
        for name in r.conflicts {
            output.warn("'\(name)' was changed on two machines at once; both kept, see 'vault conflicts'")
        }
        if r.passphraseTaken {
            // After a race this machine's own passphrase keeps opening it,
            // beside the other's: "the old one" would say otherwise.
            output.info(
                r.passphrases > 1
                    ? "the vault's passphrase was changed on another machine: that passphrase opens this vault "
                        + "now, beside the one set here"
                    : "the vault's passphrase was changed on another machine: that passphrase opens this vault "
                        + "now, and the one it had here no longer does")
        }
        if r.passphrases > 1 {
            output.warn(
                "\(r.passphrases) passphrases open this vault: they were changed on two machines at once; "
                    + "run 'vault passwd' to keep one")
        }
    }
}

extension Commands {
    /// The hints for an address typed on the command line that answers
    /// as no store of its kind: an http(s) URL where an S3 server answered
    /// gets the s3:// command it stands for.
    static func addressHints(_ error: VaultError, url: String, command: String) -> [String] {
        let help = "check the address; see 'vault \(command.prefix { $0 != " " }) --help'"
        guard StoreKind.of(url: url) != .s3, error.reason.contains(WebDAVObjectStore.answeredAsS3),
            let s3 = s3Command(for: url, command: command)
        else { return [help] }
        return ["as an S3 store: '\(s3)' (with the bucket's keys: --credentials-file, --profile or AWS_ACCESS_KEY_ID)"]
    }

    /// Why a join failed: a failed join leaves no vault behind, so the
    /// hints that name commands of an existing vault become ones for joining.
    static func joinFailure(_ error: VaultError, url: String, environment: [String: String]) -> CLIError {
        if let usage = unresolvedAWSHost(error, url: url, command: "join", environment: environment) { return usage }
        let base = CLIError(error)
        switch error.remedy {
        case .setStoreCredentials?:
            let check =
                StoreKind.of(url: url) == .s3
                ? "check the store's keys (--credentials-file, --profile, AWS_ACCESS_KEY_ID) and --region"
                : "check the store's user (--user) and password (--password-file)"
            return CLIError(base.message, hint: check, exitCode: base.exitCode)
        case .syncAgain?, .syncFirst?:
            return CLIError(base.message, hint: "run 'vault join' again; nothing was kept", exitCode: base.exitCode)
        case .checkStoreAddress?:
            // The address came from the command line: a usage error.
            return CLIError(base.message, hints: addressHints(error, url: url, command: "join"), exitCode: .usage)
        default:
            return base
        }
    }

}

extension Commands {
    /// A store URL from the command line, which may not carry a user or
    /// password: a password there would be in every process listing.
    static func storeURL(_ url: String, command: String) throws -> String {
        if URLPolicy.hasUserInfo(url) {
            throw CLIError.usage(
                "the store URL carries a user or password: give them with --user and --password-file", command: command)
        }
        return url
    }
}
