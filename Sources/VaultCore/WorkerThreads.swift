internal import Glibc
internal import Synchronization

/// The threads VaultKit runs blocking work on for async callers: SQLite,
/// Argon2id, libcurl transfers, and waits for a refresh another thread,
/// process or machine performs. Swift's cooperative pool has one thread per
/// core, and on Linux Dispatch's global queues are served by those same
/// threads, so blocking work on either holds up every other task of the
/// app; these threads are the library's own.
///
/// At most `limit` threads work at once, and work beyond that queues, first
/// come first served: a burst of a thousand tasks makes no more threads.
/// A thread in `waiting(_:)` (sleeping until another's refresh ends) does
/// not count while it waits, and queued work starts on another thread
/// meanwhile: waits never fill the pool, so the work that would end them,
/// or that has nothing to do with them, never queues behind them. Threads
/// start when work needs them and end after `idleSeconds` without work.
package final class WorkerThreads: Sendable {
    /// One unit of work.
    package typealias Job = @Sendable () -> Void

    /// The process's threads for VaultKit's blocking work: 16, or one per
    /// processor on a machine with more. The work mostly waits on the
    /// network or the disk rather than computing, so the bound is how many
    /// exchanges may be under way at once, not the number of cores.
    package static let shared = WorkerThreads(limit: max(16, usableProcessors))

    /// Seconds a thread stays without work before it ends.
    static let idleSeconds = 10

    /// The most threads working at once, not counting those waiting.
    package let limit: Int
    private let state = Mutex(State())

    private struct State {
        /// Work not started yet: taken from `outgoing`, which is refilled
        /// from `incoming` reversed, so that both ends cost O(1).
        var incoming: [Job] = []
        var outgoing: [Job] = []
        /// Threads without work, each parked until work is handed to it.
        var idle: [Parked] = []
        /// Threads running work, not counting those in `waiting(_:)`.
        var working = 0

        /// The next job when a thread may start one now, counted as working.
        mutating func next(limit: Int) -> Job? {
            guard working < limit else { return nil }
            if outgoing.isEmpty {
                outgoing = incoming.reversed()
                incoming = []
            }
            guard let job = outgoing.popLast() else { return nil }
            working += 1
            return job
        }

        /// `job` handed to an idle thread, or to a new one.
        mutating func start(_ job: @escaping Job) -> Start {
            if let thread = idle.popLast() { return .wake(thread, job) }
            return .spawn(job)
        }
    }

    /// How a job that may start now gets a thread, done outside the lock.
    private enum Start {
        case wake(Parked, Job)
        case spawn(Job)
    }

    package init(limit: Int) { self.limit = limit }

    /// Runs `job` on one of the threads, now or once fewer than `limit` work.
    package func run(_ job: @escaping Job) {
        let start = state.withLock { s -> Start? in
            s.incoming.append(job)
            return s.next(limit: limit).map { s.start($0) }
        }
        if let start { begin(start) }
    }

    /// Runs `body`, a wait for work another thread, process or machine does
    /// (the lock of a grant being refreshed, another machine's lease, a
    /// person at a browser), without counting this thread against the
    /// limit meanwhile: queued work may start on another thread.
    package func waiting<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        let start = state.withLock { s -> Start? in
            s.working -= 1
            return s.next(limit: limit).map { s.start($0) }
        }
        if let start { begin(start) }
        defer { state.withLock { $0.working += 1 } }
        return try body()
    }

    private func begin(_ start: Start) {
        switch start {
        case .wake(let thread, let job): thread.hand(job)
        // No thread can be made: the work runs on the caller's thread
        // rather than never.
        case .spawn(let job): startThread { self.work(first: job) }
        }
    }

    /// A thread's life: `first`, then queued work, parked in between,
    /// until it has had nothing to do for `idleSeconds`.
    private func work(first: @escaping Job) {
        let parked = Parked()
        var job = first
        while true {
            job()
            let next = state.withLock { s -> Job? in
                s.working -= 1
                if let next = s.next(limit: limit) { return next }
                s.idle.append(parked)
                return nil
            }
            if let next {
                job = next
            } else if let handed = parked.take(within: Self.idleSeconds) ?? stayOrEnd(parked) {
                job = handed
            } else {
                return
            }
        }
    }

    /// After a parked thread's time ran out: nil when it was still idle
    /// (it ends), else the job a caller took it for as the time ran out.
    private func stayOrEnd(_ parked: Parked) -> Job? {
        let left = state.withLock { s -> Bool in
            guard let i = s.idle.firstIndex(where: { $0 === parked }) else { return false }
            s.idle.remove(at: i)
            return true
        }
        return left ? nil : parked.take(within: nil)
    }
}

/// A thread parked without work, and the job handed to it: a POSIX
/// semaphore that the hand posts and the thread waits on.
private final class Parked: Sendable {
    private let job = Mutex<WorkerThreads.Job?>(nil)
    /// Allocated once and never moved, as POSIX semaphores must be.
    private nonisolated(unsafe) let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init() { sem_init(semaphore, 0, 0) }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func hand(_ work: @escaping WorkerThreads.Job) {
        job.withLock { $0 = work }
        sem_post(semaphore)
    }

    /// The job handed over, waiting for it up to `seconds` (nil: for as
    /// long as it takes); nil when none came in time.
    func take(within seconds: Int?) -> WorkerThreads.Job? {
        if let seconds {
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            deadline.tv_sec += seconds
            while sem_timedwait(semaphore, &deadline) != 0 {
                guard errno == EINTR else { return nil }
            }
        } else {
            while sem_wait(semaphore) != 0 {}
        }
        return job.withLock { w in
            defer { w = nil }
            return w
        }
    }
}
