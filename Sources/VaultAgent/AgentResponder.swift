internal import FoundationEssentials
internal import Glibc
import Synchronization
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// Answers one request from the key state: what each operation of the
/// protocol does (docs/agent.md). It knows nothing of sockets, so a test
/// drives it with request bodies; the connection threads share one and it
/// counts the requests under way, which the agent lets finish before it exits.
final class AgentResponder: Sendable {
    let keys: KeyState
    let listener: AgentListener
    let confirmer: Confirmer
    let audit: AuditLog
    /// Requests another machine can repeat at will, written as counted lines.
    let tally = AuditTally()
    private let inFlight = Mutex(0)

    init(keys: KeyState, listener: AgentListener) {
        self.keys = keys
        self.listener = listener
        let options = keys.environment.options
        let method: Confirmer.Method =
            if let command = options.confirmCommand, !command.isEmpty {
                .command(command)
            } else if options.confirmOnTerminal {
                .terminal
            } else {
                .none
            }
        confirmer = Confirmer(method: method, timeout: options.confirmTimeout)
        audit = AuditLog(directory: keys.environment.location.directory)
    }

    private var environment: AgentEnvironment { keys.environment }

    /// True while a request is being answered.
    var isBusy: Bool { inFlight.withLock { $0 > 0 } }

    /// Runs `body` (answering a request and sending the answer) counted as
    /// under way, so a stopping agent does not exit between storing what a
    /// refresh brought and telling the client: a client that lost the
    /// answer could not tell whether the refresh happened.
    func serving<R>(_ body: () -> R) -> R {
        inFlight.withLock { $0 += 1 }
        defer { inFlight.withLock { $0 -= 1 } }
        return body()
    }

    /// The response to one request body from `peer`; never throws, errors
    /// are answers.
    func answer(
        _ body: [UInt8], peer: AgentPeer = .thisUser, session: inout VaultSession?, connection: ConnectionRecord? = nil
    ) -> MessageWriter {
        inFlight.withLock { $0 += 1 }
        defer { inFlight.withLock { $0 -= 1 } }
        do throws(VaultError) {
            var request = try AgentRequest(parsing: body)
            defer { request.wipe() }
            // A forwarded peer gets access tokens and nothing else: no
            // record, no key, no lock, no sync.
            guard peer.origin == .local || AgentRequest.forwardable.contains(request.operation) else {
                throw VaultError(.denied, "a forwarded client may only ask for access tokens")
            }
            return try respond(to: request, peer: peer, session: &session, connection: connection)
        } catch {
            var w = MessageWriter(status: 1)
            w.error(peer.origin == .forwarded ? AgentResponder.forForwarded(error) : error)
            return w
        }
    }

    /// The answer to a parsed request; `session` is the asking connection's
    /// own connection to the vault, opened when first needed; `connection`
    /// what the agent keeps of the client connection it came on.
    func respond(
        to request: AgentRequest, peer: AgentPeer = .thisUser, session: inout VaultSession?,
        connection: ConnectionRecord? = nil
    ) throws(VaultError) -> MessageWriter {
        var w = MessageWriter(status: 0)
        switch request {
        case .hello(let id):
            let (matches, idle, hard) = keys.status(for: id)
            AgentProtocol.Status(unlocked: matches, pid: UInt32(getpid()), idleSecondsLeft: idle, hardSecondsLeft: hard)
                .write(into: &w)
            return w
        case .load(let id, let raw):
            if let held = keys.heldVaultID {
                guard held == id else {
                    throw VaultError(.alreadyExists, "the agent holds the keys of another vault")
                }
                keys.touch()
                return w
            }
            try keys.unlock(vaultID: id, masterKey: try Secure.copy(raw))
            return w
        case .lock:
            keys.lock("lock requested")
            session = nil
            // An agent that exits when locked stops listening before it
            // answers, so the next command finds no agent rather than one
            // about to close.
            if keys.isStopping { listener.removeSocket() }
            return w
        default:
            break
        }
        // The vault file must still be the one unlocked (not replaced by a
        // new vault at the same path since).
        keys.checkVaultFile()
        var grant: String?
        if case .token(let name, _, _) = request { grant = name }
        if case .grantToken(let name, _, _) = request { grant = name }
        if case .idToken(let name, _, _) = request { grant = name }
        if case .derivedToken(let name, _, _, _) = request { grant = name }
        if case .authorizeRequest(let name, _, _, _, _, _) = request { grant = name }
        // A token request counts as use, and its grant as one to keep fresh,
        // once it is answered; the other operations at once.
        guard let current = grant == nil ? keys.use(grant: nil) : keys.current() else {
            session = nil
            if let grant, (try? GrantName.validate(grant)) != nil {
                record(
                    grant, peer: peer, claims: peer.origin == .forwarded ? request.claims : nil, .failed,
                    reason: VaultError.Code.locked.rawValue, connection: connection)
            }
            throw VaultError(.locked, "the agent is locked")
        }
        try respond(to: request, with: current, peer: peer, session: &session, connection: connection, into: &w)
        return w
    }

    /// What a forwarded peer is told of a failure: the code and a reason
    /// that names nothing of this machine (no path, no other grant's name,
    /// no provider text); the details are in the audit log and the agent's.
    static func forForwarded(_ error: VaultError) -> VaultError {
        switch error.code {
        case .denied, .locked, .unsupported, .dead, .transient, .busy:
            // The remedies about the request itself travel (they name
            // only the grant it asked for); none other (they can name this
            // machine's paths).
            let remedy: VaultError.Remedy? =
                switch error.remedy {
                case .signRequestWithKey, .allowOrAskForConfirmation, .waitForQuestionsOrAllow: error.remedy
                default: nil
                }
            return VaultError(error.code, error.reason, remedy: remedy).with(retryAfter: error.retryAfter)
        case .invalidInput where error.remedy == .giveRequestURL:
            return VaultError(error.code, error.reason, remedy: .giveRequestURL)
        default:
            return VaultError(error.code, "the agent could not hand out this token (\(error.code.rawValue))")
        }
    }

    static func signsItself(_ name: String, _ grant: Grant) -> VaultError {
        grant.isDPoPBound
            ? VaultError(
                .unsupported, "'\(name)' is bound to a DPoP key, which stays on its machine and signs each request",
                remedy: .signRequestWithKey(grant: name))
            : VaultError(
                .unsupported,
                "'\(name)' is an OAuth 1.0a grant, whose requests are signed with secrets that stay on its machine")
    }

    /// True for a grant whose requests are signed with secrets that never
    /// leave the vault (OAuth 1.0a, a DPoP key): an access token alone does
    /// not authorize them.
    static func signsItsOwnRequests(_ grant: Grant) -> Bool { grant.kind == .oauth1 || grant.isDPoPBound }

    /// What an asker can use of a grant whose requests are signed.
    enum Signing: Equatable {
        /// Anything: it asked for the bare token (operation 4).
        case byAsker
        /// Nothing: it gets an access token alone (operations 11 and 12).
        case none
        /// DPoP proofs the agent signs for it (operation 13), for a request
        /// whose URL it gave or not; not OAuth 1.0a.
        case dpopHere(knowsURL: Bool)

        func refuses(_ grant: Grant) -> Bool {
            switch self {
            case .byAsker: false
            case .none: AgentResponder.signsItsOwnRequests(grant)
            case .dpopHere: grant.kind == .oauth1
            }
        }
    }

    /// A DPoP proof names its request's URL: without one, a bound grant's
    /// token is not handed out.
    static func needsURL(_ name: String) -> VaultError {
        VaultError(
            .invalidInput, "'\(name)' is bound to a DPoP key: its proof is for one request, named by its URL",
            remedy: .giveRequestURL)
    }

    /// Why a forwarded peer's URL for a DPoP proof is refused: longer than
    /// `maxForwardedURL` bytes, or with dot segments (plain or
    /// percent-encoded), which make the request a proof is signed for
    /// another than the one a person reads. Nil when it is not.
    static func forwardedURLProblem(_ url: String) -> String? {
        guard url.utf8.count <= maxForwardedURL else {
            return "a request's URL from another machine is at most \(maxForwardedURL) bytes"
        }
        let path = url.split(maxSplits: 1, whereSeparator: { $0 == "?" || $0 == "#" }).first.map(String.init) ?? url
        let segments = path.lowercased().replacing("%2e", with: ".").split(
            separator: "/", omittingEmptySubsequences: false)
        guard !segments.dropFirst(3).contains(where: { $0 == "." || $0 == ".." }) else {
            return "a request's URL from another machine may not hold '.' or '..' segments"
        }
        return nil
    }

    /// The longest URL a forwarded peer may ask a DPoP proof for.
    static let maxForwardedURL = 512

    /// The most validity a forwarded request may ask for, in seconds.
    static let forwardedMinimumValidity: UInt32 = 120

    /// A fresh grant for a token request, after the policy (and the person,
    /// when it says to confirm) let it through; every outcome is logged.
    /// `signing`: what the caller can use of a grant whose requests are
    /// signed with secrets that stay here (OAuth 1.0a, a DPoP key).
    private func handOut(
        _ name: String, minimumValidity: UInt32, force: Bool, peer: AgentPeer, claims: RequesterClaims?,
        vault: Vault, signing: Signing, keysHeld: UnlockedKeys, connection: ConnectionRecord?,
        target: TokenTarget? = nil, request: String? = nil, idToken: Bool = false
    ) throws(VaultError) -> Grant {
        // A name that is not one is refused before anything, and not logged.
        try GrantName.validate(name)
        // A forwarded peer cannot make every request a refresh by asking
        // for more validity than a token has.
        let minimumValidity =
            peer.origin == .forwarded ? min(minimumValidity, AgentResponder.forwardedMinimumValidity) : minimumValidity
        // A bearer token serves any request to anyone: the question and the
        // log name the request only when a proof ties the token to it.
        var log = HandOutLog(logged: request, idToken: idToken)
        do throws(VaultError) {
            try permit(
                name, peer: peer, claims: claims, vault: vault, keysHeld: keysHeld, connection: connection,
                request: request, log: &log)
            if signing != .byAsker {
                let stored = try vault.load(name)
                if !stored.accessTokenIsDPoPBound { log.logged = nil }
                if signing.refuses(stored) { throw AgentResponder.signsItself(name, stored) }
                if signing == .dpopHere(knowsURL: false) && stored.accessTokenIsDPoPBound {
                    throw AgentResponder.needsURL(name)
                }
            }
            let refresher = environment.tokenRefresher(vault)
            let handed =
                if idToken {
                    try AgentResponder.freshIDToken(name, vault: vault, refresher: refresher, minimum: minimumValidity)
                } else if let target {
                    try refresher.derivedToken(
                        name, for: target, minimumValidity: TimeInterval(minimumValidity), forceRequest: force
                    ).narrowedGrant
                } else {
                    try refresher.freshGrant(name, minimumValidity: TimeInterval(minimumValidity), forceRefresh: force)
                        .grant
                }
            record(
                name, peer: peer, claims: claims, log.outcome, reason: nil,
                request: handed.accessTokenIsDPoPBound ? request : nil, token: log.token, connection: connection)
            _ = keys.use(grant: name)
            return handed
        } catch {
            if log.outcome == .allowed || log.outcome == .confirmed { log.outcome = .failed }
            record(
                name, peer: peer, claims: claims, log.outcome,
                reason: log.why ?? (error.code == .denied ? nil : error.code.rawValue), request: log.logged,
                token: log.token, connection: connection)
            throw error
        }
    }

    /// What the audit line of a token request says, as the request goes.
    private struct HandOutLog {
        var outcome = AuditEntry.Outcome.allowed
        /// Why the request the policy said to confirm was not confirmed:
        /// nobody was asked, or nobody could be, or the person said no.
        var why: String?
        /// The request a proof ties the token to, when the log may name it.
        var logged: String?
        /// True when the grant's ID token is asked for.
        var idToken = false

        /// What the audit line says was handed out, when not an access token.
        var token: String? { idToken ? "id" : nil }
    }

    /// The grant's ID token with more than `minimum` seconds left, as
    /// `TokenRefresher.freshGrantWithIDToken` gets it; a grant without one
    /// is not refreshed for nothing.
    static func freshIDToken(_ name: String, vault: Vault, refresher: TokenRefresher, minimum: UInt32)
        throws(VaultError) -> Grant
    {
        guard try vault.load(name).idTokenExpiry != nil else { throw holdsNoIDToken(name) }
        let grant = try refresher.freshGrantWithIDToken(name, minimumValidity: TimeInterval(minimum)).grant
        guard let expiry = grant.idTokenExpiry, expiry > vault.time.now() else {
            throw VaultError(
                .unsupported,
                "the provider sent no new ID token with the refresh of '\(name)', and the one it holds has expired")
        }
        return grant
    }

    static func holdsNoIDToken(_ name: String) -> VaultError {
        VaultError(.unsupported, "'\(name)' holds no ID token: it was authorized without the openid scope")
    }

    /// Lets a token request through the agent's policy, asking the person
    /// when it says to confirm; throws `.denied` (or `.locked`, when the
    /// agent locked while the person was asked) with `log` saying why.
    private func permit(
        _ name: String, peer: AgentPeer, claims: RequesterClaims?, vault: Vault, keysHeld: UnlockedKeys,
        connection: ConnectionRecord?, request: String?, log: inout HandOutLog
    ) throws(VaultError) {
        let policy: AgentPolicy
        do throws(VaultError) {
            policy = try AgentPolicy.load(configDirectory: environment.location.configDirectory)
        } catch {
            // Fail closed, and so that no command falls back to opening
            // the vault itself around the policy.
            log.outcome = .denied
            environment.log("agent policy: \(error.reason)")
            // The path is this machine's business, not another's.
            throw VaultError(
                .denied,
                peer.origin == .forwarded
                    ? "the agent's policy file cannot be used"
                    : "the agent's policy file cannot be used: \(error.reason)")
        }
        switch policy.rule(for: name, origin: peer.origin) {
        case .allow:
            return
        case .deny:
            log.outcome = .denied
            throw VaultError(.denied, "the agent's policy refuses '\(name)' to \(peer.origin.rawValue) requests")
        case .confirm:
            // A local peer could list the grants anyway: nobody is asked
            // about one that is not there. A forwarded peer learns
            // nothing of which grants exist before the person said yes.
            if peer.origin == .local { _ = try vault.load(name) }
            // Read without a word to the asker, and only when someone is
            // asked (a grant that is not there is asked about as a bound
            // one), so a forwarded peer learns nothing of which exist.
            if request != nil, confirmer.method != .none,
                (try? vault.load(name))?.accessTokenIsDPoPBound == false
            {
                log.logged = nil
            }
            let question = ConfirmationQuestion(
                grant: name, peer: peer, claims: claims, request: log.logged, idToken: log.idToken)
            switch confirmer.ask(question, connection: connection) {
            case .yes:
                log.outcome = .confirmed
            case .no(let why):
                log.outcome = .notConfirmed
                log.why = why
                // Nobody could be asked: the remedy is the policy or a way
                // to ask. A person's no has none.
                let remedy: VaultError.Remedy? =
                    confirmer.method == .none
                    ? .allowOrAskForConfirmation(grant: name, forwarded: peer.origin == .forwarded) : nil
                throw VaultError(.denied, "the request for '\(name)' was not confirmed: \(why)", remedy: remedy)
            case .notAsked(let why):
                // Logged as counted lines, so that a flood of them
                // fills neither the log nor the disk.
                log.outcome = .notAsked
                log.why = why
                throw VaultError(
                    .denied, "the request for '\(name)' was not confirmed: \(why)",
                    remedy: .waitForQuestionsOrAllow(grant: name, forwarded: peer.origin == .forwarded))
            }
            // The agent may have locked while the person was asked.
            guard keys.current() === keysHeld else {
                log.outcome = .failed
                throw VaultError(.locked, "the agent is locked")
            }
        }
    }

    /// Logs one request's outcome: at once, or, on a connection that
    /// defers its audit lines, right after its answer is sent
    /// (`writeDeferredAudit`).
    private func record(
        _ grant: String, peer: AgentPeer, claims: RequesterClaims?, _ outcome: AuditEntry.Outcome, reason: String?,
        request: String? = nil, token: String? = nil, connection: ConnectionRecord?
    ) {
        let entry = AuditEntry(
            time: environment.time.now(), grant: grant, peer: peer, claimed: claims, outcome: outcome, reason: reason,
            request: request, token: token)
        let lines = AuditTally.counts(entry) ? tally.add(entry, now: Monotonic.seconds()) : [entry]
        if let connection, connection.defersAudit {
            connection.deferAudit(lines)
        } else {
            for line in lines { write(line) }
        }
    }

    /// Writes the audit lines `connection` kept while its answer was sent.
    func writeDeferredAudit(_ connection: ConnectionRecord) {
        for line in connection.takeDeferredAudit() { write(line) }
    }

    private func write(_ entry: AuditEntry) {
        if let failure = audit.append(entry) { environment.log("audit log: \(failure.reason)") }
    }

    /// Writes the counts that are due (all of them when the agent stops).
    func writeCounts(all: Bool = false) {
        for line in tally.due(now: Monotonic.seconds(), all: all) { write(line) }
    }

    /// Writes the answer to an operation that needs the keys.
    private func respond(
        to request: AgentRequest, with current: UnlockedKeys, peer: AgentPeer, session: inout VaultSession?,
        connection: ConnectionRecord?, into w: inout MessageWriter
    ) throws(VaultError) {
        let recordKeys = current.keys
        switch request {
        case .token(let name, let minimum, let force):
            let vault = try keys.vault(current, session: &session)
            let grant = try handOut(
                name, minimumValidity: minimum, force: force, peer: peer, claims: nil, vault: vault,
                signing: .byAsker, keysHeld: current, connection: connection)
            TokenAnswer(grant).write(into: &w)
        case .grantToken(let name, let minimum, let claims):
            try grantToken(
                name, minimum: minimum, claims: claims, current: current, peer: peer, session: &session,
                connection: connection, into: &w)
        case .idToken(let name, let minimum, let claims):
            try idToken(
                name, minimum: minimum, claims: claims, current: current, peer: peer, session: &session,
                connection: connection, into: &w)
        case .derivedToken(let name, let minimum, let force, let target):
            let vault = try keys.vault(current, session: &session)
            let stored = try vault.load(name)
            if AgentResponder.signsItsOwnRequests(stored) { throw AgentResponder.signsItself(name, stored) }
            let grant = try handOut(
                name, minimumValidity: minimum, force: force, peer: peer, claims: nil, vault: vault,
                signing: .none, keysHeld: current, connection: connection, target: target)
            GrantTokenAnswer(grant).write(into: &w)
        case .authorizeRequest(let name, let minimum, let method, let url, let nonce, let claims):
            try authorizeRequest(
                name, minimum: minimum, method: method, url: url, nonce: nonce, claims: claims, current: current,
                peer: peer, session: &session, connection: connection, into: &w)
        case .nameHash(let name):
            NameHashAnswer(hash: try recordKeys.nameHash(name)).write(into: &w)
        case .seal(let raw, let id, let version, let deleted, let hash):
            let plain = try Secure.copy(raw)
            let record = try recordKeys.cipher.seal(
                payload: plain, id: id, version: version, deleted: deleted, nameHash: hash)
            SealAnswer(nonce: record.nonce, ciphertext: record.ciphertext).write(into: &w)
        case .open(let rows):
            try AgentResponder.open(rows, with: recordKeys, into: &w)
        case .stateMAC(let body):
            MACAnswer(mac: try recordKeys.stateMAC(body)).write(into: &w)
        case .sync, .syncReport:
            var engine = SyncEngine(
                vault: try keys.vault(current, session: &session), transport: environment.transport,
                storeTimeout: environment.options.storeTimeout)
            // The client waits `syncWait` for the answer: a store that does
            // not answer is said before then, with the store's reason.
            engine.storeDeadline = ObjectStoreSession.now() + AgentClient.syncDeadline
            let report = try engine.sync()
            if case .syncReport = request { FullSyncReport(report).write(into: &w) } else { report.write(into: &w) }
        case .storeCheck(let timeout, let names):
            let engine = SyncEngine(
                vault: try keys.vault(current, session: &session), transport: environment.transport)
            AgentResponder.storeCheck(engine, probeTimeout: timeout, names: names).write(into: &w)
        case .conflicts:
            let engine = SyncEngine(
                vault: try keys.vault(current, session: &session), transport: environment.transport)
            NamesAnswer(engine.isConfigured ? try engine.conflictNames() : []).write(into: &w)
        case .hello, .load, .lock:
            break
        }
    }

    /// Answers `grantToken`: a grant's access token and what goes with it,
    /// for a command that sends it itself.
    private func grantToken(
        _ name: String, minimum: UInt32, claims: RequesterClaims, current: UnlockedKeys, peer: AgentPeer,
        session: inout VaultSession?, connection: ConnectionRecord?, into w: inout MessageWriter
    ) throws(VaultError) {
        let vault = try keys.vault(current, session: &session)
        // A local command signs OAuth 1.0a and DPoP requests itself: no need to
        // log a refusal it falls back from.
        if peer.origin == .local {
            let stored = try vault.load(name)
            if AgentResponder.signsItsOwnRequests(stored) { throw AgentResponder.signsItself(name, stored) }
        }
        let grant = try handOut(
            name, minimumValidity: minimum, force: false, peer: peer,
            claims: peer.origin == .forwarded ? claims : nil, vault: vault, signing: .none,
            keysHeld: current, connection: connection)
        GrantTokenAnswer(grant).write(into: &w)
    }

    /// Answers `idToken`: the grant's ID token and its expiry, handed out
    /// as a token request is (policy, question, audit line).
    private func idToken(
        _ name: String, minimum: UInt32, claims: RequesterClaims, current: UnlockedKeys, peer: AgentPeer,
        session: inout VaultSession?, connection: ConnectionRecord?, into w: inout MessageWriter
    ) throws(VaultError) {
        let vault = try keys.vault(current, session: &session)
        let grant = try handOut(
            name, minimumValidity: minimum, force: false, peer: peer,
            claims: peer.origin == .forwarded ? claims : nil, vault: vault, signing: .byAsker,
            keysHeld: current, connection: connection, idToken: true)
        guard let token = grant.idToken, let expiry = grant.idTokenExpiry else {
            throw AgentResponder.holdsNoIDToken(name)
        }
        IDTokenAnswer(idToken: token, expiresAt: expiry.epochSeconds).write(into: &w)
    }

    /// Answers `storeCheck`: whether `engine` syncs, where to, the store's
    /// answer to a probe of `probeTimeout` seconds (none when 0), and who
    /// may refresh each of `names`.
    private static func storeCheck(_ engine: SyncEngine, probeTimeout timeout: UInt32, names: [String])
        -> StoreCheckAnswer
    {
        var answer = StoreCheckAnswer()
        guard engine.isConfigured else { return answer }
        answer.configured = true
        answer.place = (try? engine.remoteDescription().url) ?? ""
        if timeout > 0 {
            do throws(VaultError) {
                answer.probe = .success(try engine.probeStore(timeout: Double(timeout)))
            } catch {
                answer.probe = .failure(error)
            }
        }
        answer.rights = names.map { try? engine.refreshRight(of: $0) }
        return answer
    }

    /// Answers `authorizeRequest`: the Authorization (and DPoP) fields of
    /// one request, the proof signed here so that the key never leaves.
    private func authorizeRequest(
        _ name: String, minimum: UInt32, method: String, url: String?, nonce: String?, claims: RequesterClaims?,
        current: UnlockedKeys, peer: AgentPeer, session: inout VaultSession?, connection: ConnectionRecord?,
        into w: inout MessageWriter
    ) throws(VaultError) {
        if peer.origin == .forwarded, let url, let problem = AgentResponder.forwardedURLProblem(url) {
            throw VaultError(.invalidInput, problem)
        }
        let vault = try keys.vault(current, session: &session)
        // A local command signs OAuth 1.0a requests itself: no need to
        // log a refusal it falls back from.
        let signing = Signing.dpopHere(knowsURL: url != nil)
        if peer.origin == .local {
            let stored = try vault.load(name)
            if signing.refuses(stored) { throw AgentResponder.signsItself(name, stored) }
        }
        let grant = try handOut(
            name, minimumValidity: minimum, force: false, peer: peer,
            claims: peer.origin == .forwarded ? claims : nil, vault: vault, signing: signing,
            keysHeld: current, connection: connection, request: url.map { method + " " + DPoPKey.target($0) })
        // A refresh may have brought a bound token where a bearer one was.
        if url == nil && grant.accessTokenIsDPoPBound { throw AgentResponder.needsURL(name) }
        // The proof is signed here: the key never leaves the agent. A
        // bearer token's field names no URL.
        let fields = try grant.authorizationHeaders(
            method: method, url: url ?? "", nonce: nonce, at: environment.time.now())
        AuthorizationAnswer(
            bound: grant.accessTokenIsDPoPBound,
            fields: fields.map { AuthorizationAnswer.HeaderField(name: $0.name, value: $0.value) }
        ).write(into: &w)
    }

    /// Answers `open`: each row's plaintext, or why it did not open.
    private static func open(_ rows: [StoredRecord], with recordKeys: LocalKeys, into w: inout MessageWriter)
        throws(VaultError)
    {
        try recordKeys.withScratch(for: rows) { (scratch: SecureBuffer) -> Void in
            for row in rows {
                do throws(VaultError) {
                    var bytes = try recordKeys.openChecked(row, scratch: scratch) { plain, _ throws(VaultError) in
                        Array(plain)
                    }
                    OpenAnswer.write(opened: bytes, into: &w)
                    secureZero(&bytes)
                } catch {
                    OpenAnswer.write(failed: error, into: &w)
                }
            }
        }
    }
}

extension AgentRequest {
    /// What the asker says about itself, for the requests that carry it.
    var claims: RequesterClaims? {
        if case .grantToken(_, _, let claims) = self { return claims }
        if case .idToken(_, _, let claims) = self { return claims }
        if case .authorizeRequest(_, _, _, _, _, let claims) = self { return claims }
        return nil
    }
}
