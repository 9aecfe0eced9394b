public import FoundationEssentials
internal import Synchronization
public import VaultCore
public import VaultHTTP

/// What happened to a grant, for apps that watch (AppAuth's state-change
/// and error delegates). A `switch` over events should have a `default`:
/// later versions may add kinds.
public enum GrantEvent: Sendable, Equatable {
    /// This session refreshed the grant; `rotated` when the provider issued
    /// a new refresh token (already saved).
    case refreshed(name: String, rotated: Bool)
    /// The provider refused the grant; it is marked dead and kept.
    case refused(name: String, oauthError: String?)
    /// The stored grant's tokens are not those this session last saw:
    /// another session, process or machine refreshed or replaced it. Told
    /// when this session next reads the grant.
    case changedElsewhere(name: String)
    /// A refresh this session tried failed and changed nothing (the
    /// provider or the network away, a 429 with `error.retryAfter`, ...).
    case failed(name: String, error: VaultError)
    /// The grant this session handed out has a refresh token that dies at
    /// `deadline`, within the session's `expiringLead`, and no refresh will
    /// move it (a lifetime counted from the authorization, or the end the
    /// provider gave a token that does not rotate): only a new
    /// authorization will. Told once per grant and deadline.
    case expiring(name: String, deadline: Date)
}

/// Fresh tokens from a `GrantStore`: GTMAppAuth's
/// `performActionWithFreshTokens`, `authorizeRequest` and validity check.
///
/// The usual way in: open a `VaultGrantStore`, make one session over it,
/// and ask it for tokens from any task. Concurrent tasks asking for one
/// grant share one refresh (and the store makes that hold across
/// processes); `events` tells every observer when grants are refreshed,
/// refused, changed elsewhere or fail to refresh.
public final class TokenSession: Sendable {
    /// Where the grants are kept.
    public let store: any GrantStore
    /// How requests reach providers.
    public let transport: any HTTPTransport & Sendable
    /// Parameters and headers sent with every refresh this session makes,
    /// by the name of the grant's provider (`Grant.provider`). They are the
    /// app's, never kept in the vault: other programs refreshing the same
    /// grant (the `vault` command, another app) do not send them.
    public let refreshExtras: [String: TokenRequestExtras]
    /// How long before a grant's refresh token dies for good to tell
    /// `.expiring`; nil: never.
    public let expiringLead: TimeInterval?

    private let observers = Observers()
    /// What this session last saw of each grant's tokens (a hash, never
    /// the tokens), to tell a change made elsewhere.
    private let seen = Mutex([String: [UInt8]]())
    private let inFlight = InFlight()
    let gates = RefreshGates()
    /// The deadline each grant was last told `.expiring` for.
    private let toldExpiring = Mutex([String: Date]())

    /// Creates a session over `store`; `refreshExtras` are added to the
    /// refreshes of the grants of the providers they name; `expiringLead`
    /// (seconds) turns on `.expiring` events.
    public init(
        store: any GrantStore, transport: any HTTPTransport & Sendable = CurlTransport(),
        refreshExtras: [String: TokenRequestExtras] = [:], expiringLead: TimeInterval? = nil
    ) {
        self.store = store
        self.transport = transport
        self.refreshExtras = refreshExtras
        self.expiringLead = expiringLead
    }

    deinit { observers.finish() }

    /// Every event of this session's grants from now on, in a stream of
    /// the caller's own: each observer sees every event (the newest 256
    /// are kept for one that reads slowly). Ends when the session ends.
    public var events: AsyncStream<GrantEvent> { observers.subscribe() }

    /// Notes the tokens of `grant` as seen; true when they differ from
    /// those seen before (none seen before counts as no change).
    private func noteSeen(_ name: String, _ grant: Grant, refreshedHere: Bool) -> Bool {
        let print =
            (try? SHA256.hash(Array(((grant.refreshToken ?? "") + "\u{0}" + (grant.accessToken ?? "")).utf8))) ?? []
        let before = seen.withLock { $0.updateValue(print, forKey: name) }
        return !refreshedHere && before != nil && before != print
    }

    /// Tells the observers that `grant` changed elsewhere, when it did, and
    /// that its refresh token dies soon for good, when it does.
    private func observe(_ name: String, _ grant: Grant, refreshedHere: Bool = false) {
        if noteSeen(name, grant, refreshedHere: refreshedHere) { observers.yield(.changedElsewhere(name: name)) }
        if let deadline = expiringDeadline(name, grant) { observers.yield(.expiring(name: name, deadline: deadline)) }
    }

    /// The deadline to tell `.expiring` for, once: what the grant itself
    /// records of its refresh token's end (the provider's
    /// `refresh_token_expires_in`, or the documented lifetime kept at its
    /// authorization), when no refresh moves it and it is within the lead.
    private func expiringDeadline(_ name: String, _ grant: Grant) -> Date? {
        guard let expiringLead, let d = grant.refreshTokenDeadline(policy: nil), !d.renewable,
            d.date.timeIntervalSinceNow <= expiringLead
        else { return nil }
        let told = toldExpiring.withLock { $0.updateValue(d.date, forKey: name) }
        return told == d.date ? nil : d.date
    }

    /// A grant with more than `minimumValidity` seconds of access token left,
    /// refreshed first when needed. Tasks asking for the same grant at once
    /// share one refresh; a cancelled task stops waiting, while the refresh
    /// others share goes on (a refresh token once sent must be stored).
    public func freshGrant(
        _ name: String, minimumValidity: Double = Grant.freshnessMargin, forceRefresh: Bool = false
    ) async throws(VaultError) -> FreshGrant {
        if Task.isCancelled { throw VaultError.cancelled }
        // Most calls end here: the grant is fresh enough, and no refresh
        // needs sharing.
        if !forceRefresh, let usable = try await store.usableGrant(name, minimumValidity: minimumValidity) {
            observe(name, usable)
            return FreshGrant(grant: usable, refreshed: false)
        }
        let key = InFlight.Key(name: name, minimumValidity: minimumValidity, force: forceRefresh)
        let task = await inFlight.task(for: key) { [store, transport, observers, gates, refreshExtras] in
            let before = try? await store.retrieve(name)
            if let before { self.observe(name, before) }
            // Most calls end here, at the cost of one load: the stored grant
            // is fresh enough, as the store would find it too.
            if !forceRefresh, let before, before.isUsable(minimumValidity: minimumValidity, at: Date()) {
                return .success(FreshGrant(grant: before, refreshed: false))
            }
            let result = await Result(catching: { () async throws(VaultError) in
                try await TokenSession.refresh(
                    name, in: store, minimumValidity: minimumValidity, force: forceRefresh, transport: transport,
                    gates: gates, extras: refreshExtras, provider: before?.provider)
            })
            switch result {
            case .success(let fresh) where fresh.refreshed:
                let rotated = before?.refreshToken.map { $0 != fresh.grant.refreshToken } ?? false
                self.observe(name, fresh.grant, refreshedHere: true)
                observers.yield(.refreshed(name: name, rotated: rotated))
            case .success(let fresh):
                self.observe(name, fresh.grant)
            // Refused now, not dead from before: some providers refuse with
            // a bare 400 and no OAuth error code (glewlwyd does).
            case .failure(let error) where error.code == .dead && (error.oauthError != nil || before?.dead == false):
                observers.yield(.refused(name: name, oauthError: error.oauthError))
            case .failure(let error) where error.code != .dead && error.code != .notFound:
                observers.yield(.failed(name: name, error: error))
            default:
                break
            }
            return result
        }
        // Wait for the shared refresh, or stop waiting when this task is
        // cancelled: the refresh itself goes on for the others.
        let waiter = Waiter()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<FreshGrant, VaultError>, Never>) in
                waiter.wait(continuation)
                Task { waiter.resume(await task.value) }
            }
        } onCancel: {
            waiter.resume(.failure(VaultError.stoppedWaiting))
        }
        await inFlight.finished(key, task)
        return try result.get()
    }

    /// A refresh of `name`: by the store when it coordinates refreshes itself
    /// (`RefreshingGrantStore`), else here, one at a time per grant in this
    /// session whatever the callers asked (`gates`), saving the new tokens
    /// before they are used (a rotated refresh token must be kept) and a
    /// refused grant as dead, each only over the grant it started from.
    static func refresh(
        _ name: String, in store: any GrantStore, minimumValidity: Double, force: Bool,
        transport: any HTTPTransport & Sendable, gates: RefreshGates, extras: [String: TokenRequestExtras] = [:],
        provider: String? = nil
    ) async throws(VaultError) -> FreshGrant {
        if let refreshing = store as? any RefreshingGrantStore {
            return try await refreshing.freshGrant(
                name, minimumValidity: minimumValidity, forceRefresh: force, transport: transport,
                extras: provider.flatMap { extras[$0] } ?? .none)
        }
        await gates.enter(name)
        let result = await Result(catching: { () async throws(VaultError) in
            try await refreshHere(
                name, in: store, minimumValidity: minimumValidity, force: force, transport: transport, extras: extras)
        })
        await gates.leave(name)
        return try result.get()
    }

    /// `refresh` of a plain store's grant, holding its gate.
    private static func refreshHere(
        _ name: String, in store: any GrantStore, minimumValidity: Double, force: Bool,
        transport: any HTTPTransport & Sendable, extras: [String: TokenRequestExtras]
    ) async throws(VaultError) -> FreshGrant {
        let grant = try await store.retrieve(name)
        if !force, grant.isUsable(minimumValidity: minimumValidity, at: Date()) {
            return FreshGrant(grant: grant, refreshed: false)
        }
        if grant.dead { throw TokenRefresher.deadError(name, grant) }
        let outcome = await Result(catching: { () async throws(VaultError) in
            try await blocking { () throws(VaultError) in
                try TokenRefresher.refreshed(
                    grant, name: name, transport: transport, now: { Date() }, extras: extras[grant.provider] ?? .none)
            }
        })
        // The app may have replaced the grant meanwhile (authorized again):
        // what is saved goes only over the grant this refresh started from.
        func unchanged() async -> Bool {
            (try? await store.retrieve(name))?.refreshToken == grant.refreshToken
        }
        switch outcome {
        case .success(let next):
            if await unchanged() { try await store.save(next, as: name) }
            return FreshGrant(grant: next, refreshed: true)
        case .failure(let error) where error.code == .refused:
            var dead = grant
            dead.dead = true
            dead.deadReason = error.oauthError ?? "refused"
            if await unchanged() { try await store.save(dead, as: name) }
            throw TokenRefresher.deadError(name, dead, cause: error)
        case .failure(let error):
            throw error
        }
    }

    /// GTMAppAuth's `authorizeRequest`: adds `Authorization: Bearer` with a
    /// fresh token of `name`, or for a grant bound to a DPoP key
    /// `Authorization: DPoP` and a `DPoP` proof for this request's method
    /// and URL (RFC 9449), with `dpopNonce` when the server asked for one
    /// (its `DPoP-Nonce` header). Refuses to send a token over plain http
    /// to anything but a loopback address.
    public func authorize(_ request: inout HTTPRequest, with name: String, dpopNonce: String? = nil)
        async throws(VaultError)
    {
        do { try URLPolicy.check(request.url) } catch { throw VaultError(.invalidInput, error.reason) }
        if let dpopNonce, !DPoPKey.isNonce(dpopNonce) {
            throw VaultError(.invalidInput, "the DPoP nonce has characters RFC 9449 does not allow in one")
        }
        let grant = try await freshGrant(name).grant
        guard grant.accessToken != nil, grant.kind != .oauth1 else {
            throw VaultError(.invalidInput, "grant '\(name)' holds no OAuth 2.0 access token")
        }
        let headers = try grant.authorizationHeaders(
            method: request.method, url: request.url, nonce: dpopNonce, at: Date())
        request.headers.removeAll { ["authorization", "dpop"].contains($0.name.lowercased()) }
        request.headers += headers
    }

    /// GTMAppAuth's validity check: calls the provider's userinfo endpoint
    /// with a fresh token. A 401 to a stored token leads to one refresh and
    /// a retry; a 401 to the token just issued says the check failed
    /// (`badResponse`) and keeps the grant. Network errors and 5xx change
    /// nothing. A machine grant (client credentials, service account) is
    /// checked by one token request with its credentials, as its refresh.
    public func check(_ name: String) async throws(VaultError) -> GrantCheck {
        var fresh = try await freshGrant(name)
        if fresh.grant.kind.mintsTokens {
            if !fresh.refreshed { fresh = try await freshGrant(name, forceRefresh: true) }
            return .live(account: fresh.grant.account)
        }
        guard let endpoint = fresh.grant.providerConfiguration?.userinfoEndpoint else {
            throw VaultError(.invalidInput, "grant '\(name)' has no userinfo endpoint to check it against")
        }
        while true {
            let grant = fresh.grant
            let status = try await blocking { [transport] () throws(VaultError) in
                try TokenRefresher.userinfoStatus(endpoint, grant: grant, transport: transport)
            }
            switch status {
            case 200..<300:
                return .live(account: fresh.grant.account)
            case 401 where !fresh.refreshed:
                fresh = try await freshGrant(name, forceRefresh: true)
            case 401:
                throw TokenRefresher.probeRefused(name)
            case 500...599, 429:
                throw VaultError(.transient, "the userinfo endpoint answered HTTP \(status)")
            default:
                throw VaultError(.badResponse, "the userinfo endpoint answered HTTP \(status)")
            }
        }
    }
}

/// One refresh at a time per grant name, for the grants of stores that the
/// session refreshes itself: callers asking with different needs (a longer
/// validity, a forced refresh) never send one refresh token twice.
actor RefreshGates {
    private var busy: Set<String> = []
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]

    /// Waits until no refresh of `name` is under way, then holds its gate.
    func enter(_ name: String) async {
        if busy.insert(name).inserted { return }
        await withCheckedContinuation { waiting[name, default: []].append($0) }
    }

    /// Hands the gate of `name` to the next waiter, or frees it.
    func leave(_ name: String) {
        guard var queue = waiting[name], !queue.isEmpty else {
            busy.remove(name)
            return
        }
        let next = queue.removeFirst()
        waiting[name] = queue.isEmpty ? nil : queue
        next.resume()
    }
}

/// The observers of a session's events: a stream each, every event to all.
private final class Observers: Sendable {
    private let streams = Mutex(
        (next: 0, continuations: [Int: AsyncStream<GrantEvent>.Continuation](), finished: false))

    func subscribe() -> AsyncStream<GrantEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: GrantEvent.self, bufferingPolicy: .bufferingNewest(256))
        let id = streams.withLock { s -> Int? in
            guard !s.finished else { return nil }
            s.next += 1
            s.continuations[s.next] = continuation
            return s.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.streams.withLock { _ = $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func yield(_ event: GrantEvent) {
        for c in streams.withLock({ Array($0.continuations.values) }) { c.yield(event) }
    }

    func finish() {
        let all = streams.withLock { s -> [AsyncStream<GrantEvent>.Continuation] in
            s.finished = true
            defer { s.continuations = [:] }
            return Array(s.continuations.values)
        }
        for c in all { c.finish() }
    }
}

/// One waiter's continuation, resumed once: by the result or by
/// cancellation, whichever comes first.
private final class Waiter: Sendable {
    typealias Outcome = Result<FreshGrant, VaultError>

    private struct State {
        var continuation: CheckedContinuation<Outcome, Never>?
        /// A result that came before the waiter began to wait.
        var early: Outcome?
        var done = false
    }

    private let state = Mutex(State())

    func wait(_ c: CheckedContinuation<Outcome, Never>) {
        let ready = state.withLock { (s: inout State) -> Outcome? in
            if let early = s.early {
                s.done = true
                return early
            }
            s.continuation = c
            return nil
        }
        if let ready { c.resume(returning: ready) }
    }

    func resume(_ result: Outcome) {
        let c = state.withLock { (s: inout State) -> CheckedContinuation<Outcome, Never>? in
            guard !s.done else { return nil }
            guard let c = s.continuation else {
                if s.early == nil { s.early = result }
                return nil
            }
            s.done = true
            s.continuation = nil
            return c
        }
        c?.resume(returning: result)
    }
}

/// The refreshes under way in one session, so that concurrent tasks share
/// them.
private actor InFlight {
    struct Key: Hashable {
        var name: String
        var minimumValidity: Double
        var force: Bool
    }

    private var tasks: [Key: Task<Result<FreshGrant, VaultError>, Never>] = [:]

    func task(
        for key: Key, start: @escaping @Sendable () async -> Result<FreshGrant, VaultError>
    ) -> Task<Result<FreshGrant, VaultError>, Never> {
        if let running = tasks[key] { return running }
        let task = Task { await start() }
        tasks[key] = task
        return task
    }

    func finished(_ key: Key, _ task: Task<Result<FreshGrant, VaultError>, Never>) {
        if tasks[key] == task { tasks[key] = nil }
    }
}
