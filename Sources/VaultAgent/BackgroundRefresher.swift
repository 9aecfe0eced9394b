internal import FoundationEssentials
import Synchronization
internal import VaultCore

/// Refreshes grants asked for since unlocking whose tokens are about to
/// expire, through the same per-grant lock as every CLI process. One thread
/// looks (a pass at a time); each grant that is due is refreshed on a thread
/// of its own, so a stalled provider holds up only its grant.
final class BackgroundRefresher: Sendable {
    struct State {
        /// A pass is looking for grants that are due.
        var checking = false
        /// Grants being refreshed now.
        var refreshing: Set<String> = []
    }

    /// Whether a grant's token should be refreshed now.
    enum Due: Equatable {
        /// It has nothing to refresh with, or never expires: stop watching it.
        case never
        case notYet
        /// Refresh it so at least this many seconds are left.
        case now(margin: Double)
    }

    let keys: KeyState
    private let state = Mutex(State())

    init(keys: KeyState) { self.keys = keys }

    private var environment: AgentEnvironment { keys.environment }

    /// True while a grant is being refreshed.
    var isBusy: Bool { state.withLock { !$0.refreshing.isEmpty } }

    /// Starts a pass over the grants asked for since unlocking, unless one
    /// is under way.
    func start(now: Date) {
        guard
            let busy = state.withLock({ state -> Set<String>? in
                guard !state.checking else { return nil }
                state.checking = true
                return state.refreshing
            })
        else { return }
        guard let (current, names) = keys.refreshCandidates(now: now, excluding: busy) else {
            state.withLock { $0.checking = false }
            return
        }
        startThread { [self] in
            var session: VaultSession?
            defer { session?.end() }
            for name in names {
                guard case .now(let margin) = due(name, keys: current, session: &session, now: now) else { continue }
                let claimed = state.withLock { $0.refreshing.insert(name).inserted }
                guard claimed else { continue }
                startThread { [self] in
                    var own: VaultSession?
                    defer { own?.end() }
                    refresh(name, margin: margin, keys: current, session: &own, now: now)
                    state.withLock { _ = $0.refreshing.remove(name) }
                }
            }
            state.withLock { $0.checking = false }
        }
    }

    /// Whether `name` is due now; one that cannot be refreshed is forgotten.
    private func due(_ name: String, keys current: UnlockedKeys, session: inout VaultSession?, now: Date) -> Due {
        guard let vault = try? keys.vault(current, session: &session), let grant = try? vault.load(name) else {
            keys.forget(name)
            return .never
        }
        let due = BackgroundRefresher.due(grant, refreshBefore: environment.options.refreshBefore, now: now)
        if due == .never { keys.forget(name) }
        return due
    }

    /// Whether `grant` is due at `now` when tokens are refreshed
    /// `refreshBefore` seconds ahead of their expiry.
    static func due(_ grant: Grant, refreshBefore: TimeInterval, now: Date) -> Due {
        guard !grant.dead, grant.refreshToken != nil || grant.kind.mintsTokens, let expires = grant.expiresAt else {
            return .never
        }
        // Short-lived tokens are refreshed at half their life, not
        // continuously.
        let issued = grant.refreshedAt ?? grant.createdAt
        let lifetime = max(0, expires.timeIntervalSince(issued))
        let margin = min(refreshBefore, lifetime / 2)
        return expires.timeIntervalSince(now) <= margin ? .now(margin: margin) : .notYet
    }

    /// When to try a grant again after a refresh handed back `fresh`: nil
    /// (at the next check, when due) once it was refreshed here or by
    /// another process; 20 to 40 seconds on when it came back as it was and
    /// still due (another machine holds the grant and the store is away),
    /// rather than at every check.
    static func retry(after fresh: FreshGrant, margin: Double, now: Date) -> Date? {
        guard !fresh.refreshed, case .now = due(fresh.grant, refreshBefore: margin, now: now) else { return nil }
        return now.addingTimeInterval(Double.random(in: 20...40))
    }

    private func refresh(
        _ name: String, margin: Double, keys current: UnlockedKeys, session: inout VaultSession?, now: Date
    ) {
        guard let vault = try? keys.vault(current, session: &session) else { return }
        do {
            let fresh = try environment.tokenRefresher(vault).freshGrant(name, minimumValidity: margin)
            if let later = BackgroundRefresher.retry(after: fresh, margin: margin, now: now) {
                environment.log("a grant could not be refreshed now; it keeps its valid token for the moment")
                keys.retry(name, after: later)
                return
            }
            environment.log(
                fresh.refreshed ? "refreshed a grant ahead of its expiry" : "a grant was refreshed by another process")
            keys.retry(name, after: nil)
        } catch {
            switch error.code {
            case .dead, .notFound:
                environment.log("stopped refreshing a grant: \(error.reason)")
                keys.forget(name)
            default:
                environment.log("background refresh failed: \(error.reason)")
                keys.retry(name, after: now.addingTimeInterval(Double.random(in: 20...40)))
            }
        }
    }
}
