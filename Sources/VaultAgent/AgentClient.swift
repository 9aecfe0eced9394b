internal import CPlatform
public import FoundationEssentials
internal import Glibc
public import VaultCore
package import VaultCrypto
public import VaultSync

/// A client of the running agent of one vault.
///
/// The agent holds the unlocked keys and answers operations; it never
/// hands out the master key. A `Vault` opened through it reads and writes
/// the database itself and asks the agent to seal and open records.
public final class AgentClient {
    let connection: AgentConnection
    /// Where the agent listens.
    public let paths: AgentPaths

    private init(connection: AgentConnection, paths: AgentPaths) {
        self.connection = connection
        self.paths = paths
    }

    /// Connects to the agent at `paths`. `notFound` when none is running;
    /// `insecurePath` when the socket or its directory is not safely ours.
    public static func connect(_ paths: AgentPaths, timeout: Int = 60) throws(VaultError) -> AgentClient {
        AgentClient(connection: try AgentConnection.connect(paths, timeout: timeout), paths: paths)
    }

    /// What the agent says about itself and the vault with `vaultID`
    /// (unlocked is false when it holds another vault's keys).
    func hello(vaultID: [UInt8]) throws(VaultError) -> AgentProtocol.Status {
        try connection.answer(.hello(vaultID: vaultID))
    }

    /// The agent's state for the vault at `location`.
    public func status(location: VaultLocation) throws(VaultError) -> AgentStatus {
        let header = try LockedVault(location: location).header
        let s = try hello(vaultID: header.vaultID)
        return AgentStatus(
            unlocked: s.unlocked, pid: Int(s.pid), idleSecondsLeft: Int(s.idleSecondsLeft),
            hardSecondsLeft: Int(s.hardSecondsLeft))
    }

    /// Hands the unlocked vault's master key to the agent (like `ssh-add`).
    public func load(_ vault: Vault) throws(VaultError) {
        let key = try vault.requireMasterKey()
        var raw = key.unsafeCopyToArray()
        var message = AgentRequest.load(vaultID: vault.header.vaultID, key: raw).message
        secureZero(&raw)
        try connection.acknowledged(&message)
    }

    /// Makes the agent drop its keys.
    public func lock() throws(VaultError) {
        var message = AgentRequest.lock.message
        try connection.acknowledged(&message)
    }

    /// A fresh access token, refreshed by the agent when needed; the same
    /// rules and errors as `TokenRefresher.freshGrant`.
    public func token(_ name: String, minimumValidity: TimeInterval, forceRefresh: Bool) throws(VaultError)
        -> AgentToken
    {
        try GrantName.validate(name)
        let answer: TokenAnswer = try connection.answer(
            .token(name: name, minimumValidity: AgentRequest.seconds(minimumValidity), force: forceRefresh))
        return AgentToken(accessToken: answer.accessToken, tokenType: answer.tokenType, expiresAt: answer.expiresAt)
    }
}

extension AgentClient {
    /// Seconds a client waits for the agent's sync: more than the tries of
    /// one request to a store that never answers take at the default
    /// timeout (5 of 30 s, and the waits between them).
    package static let syncWait = 180
    /// Seconds the agent's sync may take: it ends its tries of the store
    /// before the client stops waiting, so that the client hears the
    /// store's reason rather than that the agent did not answer.
    package static let syncDeadline = Double(syncWait - 15)

    /// Has the agent sync the vault it holds (it has the keys sync needs).
    public func sync() throws(VaultError) -> SyncReport {
        let wait = connection.timeout
        connection.setTimeout(seconds: wait == 0 ? 0 : max(wait, AgentClient.syncWait))
        defer { connection.setTimeout(seconds: wait) }
        do throws(VaultError) {
            let answer: FullSyncReport = try connection.answer(.syncReport)
            return answer.report
        } catch let error where error.code == .unsupported && !connection.broken {
            // An agent of an earlier release: its report says nothing of
            // passphrases.
            return try connection.answer(.sync)
        }
    }

    /// The sync store as the agent sees it with the credentials it holds
    /// (`vault doctor`): probed within `probeTimeout` seconds (0: not
    /// probed), and who may refresh each of `names`.
    package func storeCheck(probeTimeout: UInt32, names: [String]) throws(VaultError) -> StoreCheckAnswer {
        try connection.answer(.storeCheck(probeTimeout: probeTimeout, names: names))
    }

    /// The names of the grants in a sync conflict (`vault list` marks them).
    public func conflictNames() throws(VaultError) -> [String] {
        let answer: NamesAnswer = try connection.answer(.conflicts)
        return answer.names
    }
}

/// What `AgentClient.status` reports.
public struct AgentStatus: Sendable, Equatable {
    /// True when the agent holds this vault's keys.
    public let unlocked: Bool
    /// The agent's process id.
    public let pid: Int
    /// Seconds until the idle timeout locks it (0: none).
    public let idleSecondsLeft: Int
    /// Seconds until the hard timeout locks it (0: none).
    public let hardSecondsLeft: Int
}

/// A token as the agent hands it out.
public struct AgentToken: Sendable {
    /// The access token.
    public let accessToken: String
    /// Its type (`Bearer`).
    public let tokenType: String
    /// Epoch seconds of expiry, or nil.
    public let expiresAtSeconds: Int64?

    init(accessToken: String, tokenType: String, expiresAt: Int64) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        expiresAtSeconds = expiresAt == AgentProtocol.noExpiry ? nil : expiresAt
    }
}

/// Keys held by the agent: each operation is a request to it.
///
/// The agent may lock (`vault lock`, a timeout) or exit while a command
/// is under way. An operation it then does not answer is done here instead
/// when `fallback` unlocks the vault in this process, and so is every
/// later one. The operations have no effect of their own, so doing one
/// again here, inside the same transaction, applies nothing twice.
package final class AgentKeys: VaultKeys {
    let client: AgentClient
    /// The vault the agent held when it was opened through it.
    let vaultID: [UInt8]
    /// Unlocks the vault in this process after the agent locked, or
    /// returns nil when nothing here can (the operation then fails).
    package var fallback: (() throws(VaultError) -> Vault?)?
    /// Called before each request to the agent (a test pauses there).
    package var beforeRequest: (() -> Void)?
    /// The keys unlocked here once the agent stopped answering.
    private var local: (any VaultKeys)?

    init(client: AgentClient, vaultID: [UInt8]) {
        self.client = client
        self.vaultID = vaultID
    }

    /// None while the agent serves: it never hands the master key out.
    /// Once the vault was unlocked here, that unlock's, so what needs it
    /// (a refresh's sync lease) works as for a vault opened here.
    package var masterKey: SecureBytes? { local?.masterKey }

    /// True once the operations are done here rather than by the agent.
    package var unlockedHere: Bool { local != nil }

    /// True when `error` from the agent means it no longer serves this
    /// command: it answered that it is locked, or the connection broke.
    func agentGone(_ error: VaultError) -> Bool {
        error.code == .locked || client.connection.broken
    }

    /// The keys unlocked here after the agent went away with `error`. When
    /// this process cannot unlock the vault, the command fails as locked:
    /// the agent's error, or, when the connection broke, one that says so.
    func unlockHere(after error: VaultError) throws(VaultError) -> any VaultKeys {
        if let local { return local }
        guard let fallback else { throw error }
        guard let vault = try fallback() else {
            if error.code == .locked { throw error }
            throw VaultError(.locked, "the agent was locked or stopped before the command was done")
        }
        guard vault.header.vaultID == vaultID else {
            throw VaultError(.locked, "the vault file was replaced while the agent held it")
        }
        local = vault.keys
        return vault.keys
    }

    /// Asks the agent, or does it here when the agent went away and the
    /// vault can be unlocked here.
    private func perform<R>(
        _ remote: () throws(VaultError) -> R, else here: (any VaultKeys) throws(VaultError) -> R
    ) throws(VaultError) -> R {
        if let local { return try here(local) }
        beforeRequest?()
        do {
            return try remote()
        } catch {
            guard agentGone(error) else { throw error }
            return try here(try unlockHere(after: error))
        }
    }

    package func nameHash(_ name: String) throws(VaultError) -> [UInt8] {
        try perform(
            { () throws(VaultError) in
                let answer: NameHashAnswer = try client.connection.answer(.nameHash(name))
                return answer.hash
            }, else: { keys throws(VaultError) in try keys.nameHash(name) })
    }

    package func seal(_ payload: Payload, id: [UInt8], version: UInt64, deleted: Bool, nameHash: [UInt8])
        throws(VaultError) -> StoredRecord
    {
        try perform(
            { () throws(VaultError) in
                let plain = try payload.sealedBytes()
                var raw = plain.unsafeCopyToArray()
                var message = AgentRequest.seal(
                    payload: raw, id: id, version: version, deleted: deleted, nameHash: nameHash
                ).message
                secureZero(&raw)
                let sealed: SealAnswer = try client.connection.answer(&message)
                return StoredRecord(
                    id: id, nameHash: nameHash, version: version, deleted: deleted, nonce: sealed.nonce,
                    ciphertext: sealed.ciphertext)
            },
            else: { keys throws(VaultError) in
                try keys.seal(payload, id: id, version: version, deleted: deleted, nameHash: nameHash)
            })
    }

    package func open(_ records: [StoredRecord], secrets: Bool) throws(VaultError) -> [Result<Payload, VaultError>] {
        try perform(
            { () throws(VaultError) in try openThroughAgent(records, secrets: secrets) },
            else: { keys throws(VaultError) in try keys.open(records, secrets: secrets) })
    }

    private func openThroughAgent(_ records: [StoredRecord], secrets: Bool) throws(VaultError)
        -> [Result<Payload, VaultError>]
    {
        var results: [Result<Payload, VaultError>] = []
        results.reserveCapacity(records.count)
        var start = 0
        while start < records.count {
            // Batches stay well under the message cap.
            var end = start
            var size = 0
            while end < records.count
                && (end == start || size + records[end].ciphertext.count < AgentProtocol.batchBytes)
            {
                size += records[end].ciphertext.count + 96
                end += 1
            }
            if start > 0 { beforeRequest?() }
            var r = try client.connection.call(AgentRequest.open(Array(records[start..<end])).message)
            for row in records[start..<end] {
                results.append(
                    try OpenAnswer.read(&r) { plain in
                        Result { () throws(VaultError) in try Payload(json: plain, label: row.label, secrets: secrets) }
                    })
            }
            try r.finish()
            start = end
        }
        return results
    }

    package func stateMAC(_ body: [UInt8]) throws(VaultError) -> [UInt8] {
        try perform(
            { () throws(VaultError) in
                let answer: MACAnswer = try client.connection.answer(.stateMAC(body))
                return answer.mac
            }, else: { keys throws(VaultError) in try keys.stateMAC(body) })
    }
}

/// Refresh coordination for a vault opened through the agent: the agent
/// refreshes (it holds the keys sync needs, and coordinates with other
/// machines), and this process reads the stored result.
///
/// With `here` set, an agent that locked or went away before answering
/// leaves the refresh to this process (when the vault's `AgentKeys` can
/// unlock it here), coordinated by `here`.
public struct AgentRefreshCoordinator: RefreshCoordinator {
    /// The agent that refreshes.
    public let client: AgentClient
    /// Coordinates a refresh done here once the agent went away.
    package var here: (any RefreshCoordinator)?

    /// Creates a coordinator that asks `client`.
    public init(client: AgentClient) { self.client = client }

    /// Creates a coordinator that asks `client`, and refreshes here with
    /// `here` once the agent went away.
    package init(client: AgentClient, here: any RefreshCoordinator) {
        self.client = client
        self.here = here
    }

    /// Asks the agent to refresh the grant in its own process, where other clients' refreshes are coordinated.
    public func refreshElsewhere(_ need: RefreshNeed, in vault: Vault) throws(VaultError) -> FreshGrant? {
        if let target = need.target {
            do {
                _ = try client.derivedToken(
                    need.name, target: target, minimumValidity: need.minimumValidity, forceRequest: need.force)
            } catch {
                // An agent that predates operation 12, or locked: asked for here.
                if error.code == .unsupported || error.code == .locked { return nil }
                throw error
            }
            return FreshGrant(grant: try vault.load(need.name), refreshed: true)
        }
        let keys = here == nil ? nil : vault.agentKeys
        if let keys, keys.unlockedHere { return nil }
        // The record's version tells whether the agent refreshed: it may
        // hand back the token it had, still valid, when it could not (the
        // sync store away while another machine holds the grant); and a
        // forced refresh counts on it to tell whether the agent refreshed
        // before a broken connection lost its answer.
        let before = try? vault.loadWithRow(need.name).0.version
        do {
            _ = try client.token(need.name, minimumValidity: need.minimumValidity, forceRefresh: need.force)
        } catch {
            guard let keys, keys.agentGone(error) else { throw error }
            _ = try keys.unlockHere(after: error)
            // The agent answered that it is locked: it did not refresh.
            // Otherwise it may have, and stored the result, before it went.
            if error.code != .locked, need.force, let before {
                let (row, grant) = try vault.loadWithRow(need.name)
                if row.version != before { return FreshGrant(grant: grant, refreshed: true) }
            }
            // Refreshed here under the grant's lock, which the agent shares:
            // a refresh it still has under way is waited for, and a grant it
            // made fresh is not refreshed again (unless forced).
            return nil
        }
        let (row, grant) = try vault.loadWithRow(need.name)
        return FreshGrant(grant: grant, refreshed: before.map { row.version != $0 } ?? true)
    }

    /// Like `here`, for a refresh done here.
    public func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision {
        try here?.prepare(need, grant: grant, in: vault) ?? .proceed
    }

    /// Like `here`, for a refresh done here.
    public func mayStillRefreshAlone(_ need: RefreshNeed, grant: Grant, in vault: Vault) -> Bool {
        here?.mayStillRefreshAlone(need, grant: grant, in: vault) ?? true
    }

    /// Like `here`, for a refresh done here.
    public func finish(_ need: RefreshNeed, refused: Bool, alone: Bool, in vault: Vault) -> RefusalVerdict {
        here?.finish(need, refused: refused, alone: alone, in: vault) ?? .dead
    }
}

/// A client of an agent on another machine, reached through a socket that
/// `ssh -R` forwarded here: it gets access tokens and what describes them,
/// nothing else (docs/agent.md, "Forwarding").
package final class ForwardedAgent {
    let connection: AgentConnection
    /// The forwarded socket.
    package let socket: String

    private init(connection: AgentConnection, socket: String) {
        self.connection = connection
        self.socket = socket
    }

    /// Connects to the forwarded socket at `path`: a socket of ours (sshd
    /// creates it as the user who logged in), in a directory nobody else
    /// may write to, served by our uid.
    package static func connect(socket path: String, timeout: Int = 150) throws(VaultError) -> ForwardedAgent {
        var st = stat()
        guard lstat(path, &st) == 0 else { throw VaultError(.notFound, "no forwarded agent socket at \(path)") }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            throw VaultError(.insecurePath, "\(path) is not a socket (symbolic links are refused)")
        }
        guard st.st_uid == geteuid() else { throw VaultError(.insecurePath, "\(path) belongs to another user") }
        let resolved = FileSystem.resolvingParent(path)
        let directory =
            resolved.lastIndex(of: "/").map { $0 == resolved.startIndex ? "/" : String(resolved[..<$0]) } ?? "."
        var dir = stat()
        guard lstat(directory, &dir) == 0 else {
            throw VaultError(.io, "cannot inspect \(directory): \(FileSystem.errnoText())")
        }
        // Another user who may write the directory could swap the socket.
        let sticky = dir.st_mode & S_ISVTX != 0
        guard dir.st_uid == geteuid() || dir.st_uid == 0, sticky || dir.st_mode & 0o022 == 0 else {
            throw VaultError(
                .insecurePath, "\(directory) is open to other users", remedy: .makeDirectoryPrivate(path: directory))
        }
        let connection = try AgentConnection.connect(
            socket: path, timeout: timeout,
            absent: "no agent answers at \(path) (is the ssh connection that forwards it open?)")
        return ForwardedAgent(connection: connection, socket: path)
    }

    /// A fresh access token of the grant `name` on the agent's machine, with
    /// the account, provider and scopes that describe it; `claims` tell
    /// the person there who asks.
    package func token(_ name: String, minimumValidity: TimeInterval, claims: RequesterClaims) throws(VaultError)
        -> Grant
    {
        try reached { () throws(VaultError) in
            try connection.grantToken(name, minimumValidity: minimumValidity, claims: claims)
        }
    }

    /// The OpenID Connect ID token of the grant `name` on the agent's
    /// machine and when it expires, refreshed there first when it has
    /// less than `minimumValidity` seconds left (operation 16).
    package func idToken(_ name: String, minimumValidity: TimeInterval, claims: RequesterClaims) throws(VaultError)
        -> (token: String, expiresAt: Date)
    {
        try reached { () throws(VaultError) in
            try connection.idToken(name, minimumValidity: minimumValidity, claims: claims)
        }
    }

    /// The header fields that authorize `method` on `url` with a fresh token
    /// of `name` on the agent's machine: for a DPoP-bound token, with a
    /// proof the agent signed there (operation 13).
    package func authorization(
        _ name: String, method: String, url: String?, nonce: String?, minimumValidity: TimeInterval,
        claims: RequesterClaims
    ) throws(VaultError) -> RequestAuthorization {
        try reached { () throws(VaultError) in
            try connection.authorization(
                name, method: method, url: url, nonce: nonce, minimumValidity: minimumValidity, claims: claims)
        }
    }

    /// `call`'s answer, or its error; a connection closed before a byte
    /// came back is sshd's forwarding finding no agent at the other
    /// machine's end (it stopped, as `vault lock` stops it): said as that
    /// agent being locked, with where to unlock it.
    private func reached<T>(_ call: () throws(VaultError) -> T) throws(VaultError) -> T {
        do { return try call() } catch {
            if error.code == .io && connection.broken && !connection.heardFrom {
                throw VaultError(
                    .locked,
                    "the agent on the machine this session came from is locked or not running: "
                        + "the forwarded socket \(socket) reached no agent",
                    remedy: .unlockForwardingAgent)
            }
            if error.code == .locked && error.remedy == nil {
                throw VaultError(.locked, error.reason, remedy: .unlockForwardingAgent)
            }
            throw error
        }
    }
}

/// The header fields an agent made for one request (operation 13).
package struct RequestAuthorization {
    /// True when the access token is bound to the grant's DPoP key and the
    /// fields carry a proof for the request.
    package let dpopBound: Bool
    /// `Authorization`, and `DPoP` for a bound token.
    package let fields: [(name: String, value: String)]
}

extension AgentClient {
    /// A fresh access token of `name` and what describes it, under the
    /// agent's policy (operation 11, as a forwarded client asks): what
    /// `env`, `exec`, `header` and `xoauth2` hand out.
    package func grantToken(_ name: String, minimumValidity: TimeInterval) throws(VaultError) -> Grant {
        try connection.grantToken(name, minimumValidity: minimumValidity, claims: .ofThisProcess())
    }

    /// The header fields that authorize `method` on `url` with a fresh
    /// token of `name`, under the agent's policy (operation 13): the agent
    /// signs the DPoP proof of a bound grant, so no command here needs to
    /// open the vault for it.
    package func authorization(
        _ name: String, method: String, url: String?, nonce: String?, minimumValidity: TimeInterval
    ) throws(VaultError) -> RequestAuthorization {
        try connection.authorization(
            name, method: method, url: url, nonce: nonce, minimumValidity: minimumValidity,
            claims: .ofThisProcess())
    }
}

extension AgentConnection {
    /// Operation 11: an access token and what describes it.
    func grantToken(_ name: String, minimumValidity: TimeInterval, claims: RequesterClaims) throws(VaultError)
        -> Grant
    {
        try GrantName.validate(name)
        let answer: GrantTokenAnswer = try answer(
            .grantToken(name: name, minimumValidity: AgentRequest.seconds(minimumValidity), claims: claims))
        return answer.grant
    }

    /// Operation 16: an ID token and when it expires.
    func idToken(_ name: String, minimumValidity: TimeInterval, claims: RequesterClaims) throws(VaultError)
        -> (token: String, expiresAt: Date)
    {
        try GrantName.validate(name)
        let answer: IDTokenAnswer = try answer(
            .idToken(name: name, minimumValidity: AgentRequest.seconds(minimumValidity), claims: claims))
        return (answer.idToken, Date(epochSeconds: answer.expiresAt))
    }

    /// Operation 13: the header fields for one request.
    func authorization(
        _ name: String, method: String, url: String?, nonce: String?, minimumValidity: TimeInterval,
        claims: RequesterClaims
    ) throws(VaultError) -> RequestAuthorization {
        try GrantName.validate(name)
        let answer: AuthorizationAnswer = try answer(
            .authorizeRequest(
                name: name, minimumValidity: AgentRequest.seconds(minimumValidity), method: method, url: url,
                nonce: nonce, claims: claims))
        return RequestAuthorization(dpopBound: answer.bound, fields: answer.fields.map { ($0.name, $0.value) })
    }

    /// Operation 12: a token narrowed to `target` and what describes it.
    func derivedToken(_ name: String, target: TokenTarget, minimumValidity: TimeInterval, force: Bool)
        throws(VaultError) -> Grant
    {
        try GrantName.validate(name)
        let answer: GrantTokenAnswer = try answer(
            .derivedToken(
                name: name, minimumValidity: AgentRequest.seconds(minimumValidity), force: force, target: target))
        return answer.grant
    }
}

extension AgentClient {
    /// A token of `name` narrowed to `target` (operation 12), obtained and
    /// cached by the agent under its policy, as
    /// `TokenRefresher.derivedToken` does: the token and what describes it.
    package func derivedToken(
        _ name: String, target: TokenTarget, minimumValidity: TimeInterval, forceRequest: Bool = false
    ) throws(VaultError) -> Grant {
        try connection.derivedToken(name, target: target, minimumValidity: minimumValidity, force: forceRequest)
    }
}
