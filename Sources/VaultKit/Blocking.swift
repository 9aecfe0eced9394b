internal import Synchronization
internal import VaultCore

/// Runs blocking work (SQLite, Argon2id, libcurl) on one of VaultKit's own
/// threads (`WorkerThreads`), off Swift's cooperative pool, and resumes the
/// caller with its result. A task cancelled before the work starts (while
/// it waits for a thread, too) gets a `VaultError` of code `cancelled`, and
/// the work is not done; once started, it runs to its end.
func blocking<R: Sendable>(_ work: @escaping @Sendable () throws(VaultError) -> R) async throws(VaultError) -> R {
    if Task.isCancelled { throw VaultError.cancelled }
    let cancelled = CancelFlag()
    let result: Result<R, VaultError> = await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            WorkerThreads.shared.run {
                guard !cancelled.raised.load(ordering: .acquiring) else {
                    return continuation.resume(returning: .failure(VaultError.cancelled))
                }
                continuation.resume(returning: Result { () throws(VaultError) in try work() })
            }
        }
    } onCancel: {
        cancelled.raised.store(true, ordering: .releasing)
    }
    return try result.get()
}

/// Set when the task that handed work over is cancelled.
private final class CancelFlag: Sendable {
    let raised = Atomic(false)
}

extension VaultError {
    /// The task was cancelled before the work began; nothing changed.
    static var cancelled: VaultError { VaultError(.cancelled, "cancelled before it began; nothing changed") }
    /// The task was cancelled while it waited for a refresh that others
    /// share: the refresh goes on, and its tokens are stored when it ends.
    static var stoppedWaiting: VaultError {
        VaultError(
            .cancelled, "cancelled while waiting for a refresh that goes on; its new tokens are stored when it ends")
    }
}

/// A value that is not `Sendable`, handed to the one thread that uses it
/// until it is handed back: a key or an authorizer the caller passes to one
/// of VaultKit's threads and waits on, or a connection from `VaultGrantStore`'s
/// pool, which one thread checks out at a time. Connections opened from
/// one vault share only what is not changed after unlocking (location,
/// header, keys, clock, coordinator), and opening another connection from
/// the first (`sibling()`) reads only those, so it may run while another
/// thread has the first checked out. The compiler cannot follow that
/// hand-off, so the conformance is unchecked.
struct Handoff<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
