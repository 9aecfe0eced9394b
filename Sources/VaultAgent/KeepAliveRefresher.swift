internal import FoundationEssentials
import Synchronization
internal import VaultCore

/// While the agent holds the keys, looks every `keepAliveInterval` for grants whose
/// refresh token would die of inactivity soon and refreshes them (what
/// `vault keepalive` does from a timer when no agent runs), on a thread of
/// its own, through the same per-grant lock and sync lease as every refresh.
final class KeepAliveRefresher: Sendable {
    struct State {
        var running = false
        var lastPass = Date(timeIntervalSince1970: 0)
    }

    let keys: KeyState
    private let state = Mutex(State())

    init(keys: KeyState) { self.keys = keys }

    private var environment: AgentEnvironment { keys.environment }

    /// True while a pass is under way.
    var isBusy: Bool { state.withLock { $0.running } }

    /// Starts a pass when the last one is an interval old and none is under way.
    func start(now: Date) {
        let interval = environment.options.keepAliveInterval
        guard interval > 0, let current = keys.currentKeys else { return }
        let due = state.withLock { s -> Bool in
            guard !s.running, now.timeIntervalSince(s.lastPass) >= interval else { return false }
            s.running = true
            s.lastPass = now
            return true
        }
        guard due else { return }
        startThread { [self] in
            defer { state.withLock { $0.running = false } }
            var session: VaultSession?
            defer { session?.end() }
            guard let vault = try? keys.vault(current, session: &session),
                let listing = try? vault.list(secrets: false)
            else { return }
            let catalog = ProviderCatalog.load(configDirectory: environment.location.configDirectory)
            let keepAlive = KeepAlive(
                policy: { catalog.providers[$0.provider]?.refreshTokenPolicy }, lead: environment.options.keepAliveLead)
            let refresher = environment.tokenRefresher(vault)
            let grants = listing.grants.map { ($0.name, $0.grant) }
            var outcomes: [KeepAlive.Outcome] = []
            for due in keepAlive.due(grants, now: now) {
                let outcome = keepAlive.refresh(due.name, grant: due.grant, deadline: due.deadline, with: refresher)
                outcomes.append(outcome)
                switch outcome.result {
                case .refreshed: environment.log("kept a grant alive ahead of its inactivity limit")
                case .died(let error): environment.log("a grant died at its keep-alive: \(error.reason)")
                case .failed(let error): environment.log("keep-alive refresh failed: \(error.reason)")
                }
            }
            if let notifier = environment.notifier {
                let notices = keepAlive.expiring(
                    grants, outcomes: outcomes, now: now, notifyLead: environment.options.notifyLead, in: vault)
                notices.forEach(notifier.notice)
            }
        }
    }
}
