import Foundation

/// The simulation's time and its one thread of control.
///
/// Every machine's operation runs on a thread of its own (an `Actor`), but
/// only one thread runs at a time: the scheduler hands the baton to an
/// actor, which runs until it reaches a point where a real process could
/// be overtaken (a request to the store or the provider, a pause) and
/// parks there, handing the baton back. Which actor runs next is the
/// schedule's choice, so one schedule replays the same interleaving every
/// time. Nothing here is touched by two threads at once; the semaphores
/// order every hand-over.
final class World: @unchecked Sendable {
    /// True time, in seconds since 1970: the provider and the store go by
    /// it; each machine's clock is it plus the machine's skew.
    var now: Double
    private let back = DispatchSemaphore(value: 0)
    /// Told every request and its answer, when the schedule is traced
    /// (`VAULT_SIM_TRACE=1`).
    var trace: ((String) -> Void)?

    init(start: Double) { now = start }

    /// On an actor's thread: gives the baton back and waits until the
    /// scheduler resumes this actor, no earlier than `wake`.
    func park(_ actor: Actor, until wake: Double) {
        trace?("    [park \(actor.label) at \(now - 1_900_000_000) until \(wake - 1_900_000_000)]")
        actor.wake = wake
        actor.state = .parked
        back.signal()
        actor.go.wait()
        actor.state = .running
    }

    /// On the scheduler's thread: lets `actor` run until it parks again or
    /// its operation ends. Time moves to the actor's wake-up first.
    func resume(_ actor: Actor) {
        precondition(actor.state == .parked || actor.state == .starting)
        if actor.wake > now { now = actor.wake }
        actor.go.signal()
        back.wait()
    }

    /// Starts `body` as `actor` on a new thread and runs it until it first
    /// parks or ends.
    func start(_ actor: Actor, _ body: @escaping @Sendable () -> Void) {
        let back = self.back
        let thread = Thread {
            actor.go.wait()
            actor.state = .running
            body()
            actor.state = .done
            back.signal()
        }
        thread.stackSize = 8 << 20
        thread.start()
        actor.wake = now
        resume(actor)
    }
}

/// One operation of one machine, on a thread of its own (one process).
final class Actor: @unchecked Sendable {
    enum State { case starting, running, parked, done }

    let go = DispatchSemaphore(value: 0)
    var state = State.starting
    /// When a parked actor may run again (a pause ends, an answer arrives).
    var wake: Double = 0
    /// The process was killed: every request and pause from now on fails
    /// at once, and its vault handles take no more writes.
    var crashed = false
    /// The refresh coordinator let this process refresh without the store
    /// (it was away): the holder of a standing lease, or a grant whose
    /// refresh token does not rotate.
    var refreshedAlone = false
    /// The provider answered a refresh of this process.
    var spentRefreshToken = false
    /// A request of this process to the store failed (cut off, dropped,
    /// answered 5xx) after it had spent a refresh token: the new tokens may
    /// not have reached the store before the lease ran out.
    var cutOff = false
    /// The process stored the outcome of its refresh (the coordinator's
    /// `finish` runs after that).
    var storedAnswer = false
    /// What it runs, for the schedule's report.
    let label: String

    init(label: String) { self.label = label }
}
