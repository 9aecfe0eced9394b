internal import FoundationEssentials
internal import Glibc
import Synchronization
internal import VaultCore

/// While the agent holds the keys, refreshes grants whose refresh token
/// would die of inactivity soon (what `vault keepalive` does from a timer
/// when no agent runs), on a thread of its own, through the same per-grant
/// lock and sync lease as every refresh. Each pass plans the next by the
/// grants' own deadlines: it wakes when the earliest of them is a lead
/// time away, and at least every `keepAliveInterval`; a change to the
/// vault file (an add, a sync, a refresh) makes it plan again.
final class KeepAliveRefresher: Sendable {
    struct State {
        var running = false
        var lastPass = Date(timeIntervalSince1970: 0)
        /// When the next pass is due; the first comes at once.
        var nextPass = Date(timeIntervalSince1970: 0)
        /// The keys the last pass used, and the vault file as it left it.
        var keys: ObjectIdentifier?
        var file: FileStamp?
    }

    /// The shortest time between passes, so that a tiny limit (or a grant
    /// whose deadline has passed) cannot make the agent spin; an interval
    /// set shorter than this wins.
    static let floor: TimeInterval = 10
    /// How soon a grant whose keep-alive refresh failed is tried again.
    static let retryAfterFailure: TimeInterval = 60

    let keys: KeyState
    private let state = Mutex(State())

    init(keys: KeyState) { self.keys = keys }

    private var environment: AgentEnvironment { keys.environment }

    /// True while a pass is under way.
    var isBusy: Bool { state.withLock { $0.running } }

    /// When the next pass is due (once the vault file is unchanged).
    var nextPass: Date { state.withLock { $0.nextPass } }

    /// When the pass at `now` plans the next: a lead time before the
    /// earliest deadline a refresh moves, no later than `interval` and no
    /// sooner than the floor; `failed`: a grant whose refresh just failed,
    /// tried again after `retryAfterFailure`.
    static func nextPass(
        after now: Date, deadlines: [RefreshTokenDeadline], lead: TimeInterval?, interval: TimeInterval,
        failed: Bool = false
    ) -> Date {
        var next = now.addingTimeInterval(interval)
        if let earliest = deadlines.filter(\.renewable).map({ $0.date.addingTimeInterval(-(lead ?? $0.defaultLead)) })
            .min()
        {
            next = min(next, earliest)
        }
        if failed { next = min(next, now.addingTimeInterval(retryAfterFailure)) }
        return max(next, now.addingTimeInterval(min(floor, interval)))
    }

    /// Starts a pass when one is due (planned, or the vault changed since
    /// the last, a floor's time ago) and none is under way.
    func start(now: Date) {
        let options = environment.options
        let interval = options.keepAliveInterval
        guard interval > 0, let current = keys.currentKeys else { return }
        let file = FileStamp(path: environment.location.databasePath)
        let due = state.withLock { s -> Bool in
            guard !s.running else { return false }
            let changed =
                s.keys != ObjectIdentifier(current)
                || (s.file != file && now.timeIntervalSince(s.lastPass) >= min(Self.floor, interval))
            guard changed || now >= s.nextPass else { return false }
            s.running = true
            s.lastPass = now
            s.keys = ObjectIdentifier(current)
            return true
        }
        guard due else { return }
        startThread { [self] in
            var next = now.addingTimeInterval(min(Self.retryAfterFailure, interval))
            // The file as this pass leaves it (its own refreshes included).
            defer {
                let file = FileStamp(path: environment.location.databasePath)
                state.withLock {
                    $0.nextPass = next
                    $0.file = file
                    $0.running = false
                }
            }
            var session: VaultSession?
            defer { session?.end() }
            guard let vault = try? keys.vault(current, session: &session),
                let listing = try? vault.list(secrets: false)
            else { return }
            let catalog = ProviderCatalog.load(configDirectory: environment.location.configDirectory)
            let keepAlive = KeepAlive(
                policy: { catalog.providers[$0.provider]?.refreshTokenPolicy }, lead: options.keepAliveLead)
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
            // The deadlines as they are now: a refreshed grant's new one; a
            // grant whose refresh failed is tried again on its own terms.
            var failed = false
            let deadlines = grants.compactMap { name, grant -> RefreshTokenDeadline? in
                switch outcomes.first(where: { $0.name == name })?.result {
                case .refreshed(let deadline): return deadline
                case .died: return nil
                case .failed:
                    failed = true
                    return nil
                case nil: return grant.refreshTokenDeadline(policy: keepAlive.policy(grant))
                }
            }
            next = Self.nextPass(
                after: now, deadlines: deadlines, lead: options.keepAliveLead, interval: interval, failed: failed)
            if let notifier = environment.notifier {
                let notices = keepAlive.expiring(
                    grants, outcomes: outcomes, now: now, notifyLead: options.notifyLead, in: vault)
                notices.forEach(notifier.notice)
            }
        }
    }
}

/// When a file and its SQLite write-ahead log were last changed, and their
/// sizes: what changes with every commit to the vault.
struct FileStamp: Equatable, Sendable {
    let file: [Int]
    let log: [Int]

    init(path: String) {
        func stamp(_ path: String) -> [Int] {
            var st = stat()
            guard stat(path, &st) == 0 else { return [] }
            return [Int(st.st_mtim.tv_sec), Int(st.st_mtim.tv_nsec), Int(st.st_size), Int(st.st_ino)]
        }
        file = stamp(path)
        log = stamp(path + "-wal")
    }
}
