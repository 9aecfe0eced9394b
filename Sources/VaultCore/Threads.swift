internal import CPlatform
internal import Glibc

/// The body of a thread, handed to `pthread_create` as its argument.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// Starts `body` on a new thread: its handle, or nil, without running
/// `body`, when no thread could be made.
private func spawn(_ body: @escaping @Sendable () -> Void) -> pthread_t? {
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(
        &thread, nil,
        { raw in
            Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context)
    guard started == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        return nil
    }
    return thread
}

/// Starts `body` on a new detached thread; false, without running it,
/// when no thread could be made.
package func tryStartThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    guard let thread = spawn(body) else { return false }
    pthread_detach(thread)
    return true
}

/// Starts `body` on a new detached thread; when no thread can be made, runs
/// it here rather than drop it.
package func startThread(_ body: @escaping @Sendable () -> Void) {
    if !tryStartThread(body) { body() }
}

/// Runs `part(0)` to `part(count - 1)` at once: the first on the calling
/// thread, each other on a thread of its own (or, when none can be made,
/// on the calling thread after the first), and returns when all have.
package func runInParallel(_ count: Int, _ part: @escaping @Sendable (Int) -> Void) {
    var threads: [pthread_t] = []
    var here: [Int] = []
    for i in 1..<max(count, 1) {
        if let thread = spawn({ part(i) }) { threads.append(thread) } else { here.append(i) }
    }
    if count > 0 { part(0) }
    for i in here { part(i) }
    for thread in threads { pthread_join(thread, nil) }
}

/// `body` over `0..<count` cut into consecutive ranges, run at once, one
/// per processor (at most `maxParts`, each of at least `minimumPart`
/// positions): the answers in the order of the ranges. `body` must only
/// read what it shares with the other parts.
package func inParts<R>(_ count: Int, minimumPart: Int, _ body: (Range<Int>) -> R) -> [R] {
    let most = min(maxParts, count / max(minimumPart, 1))
    let parts = most > 1 ? min(most, usableProcessors) : 1
    guard parts > 1 else { return [body(0..<count)] }
    let size = (count + parts - 1) / parts
    let answers = UnsafeMutableBufferPointer<R>.allocate(capacity: parts)
    defer { answers.deallocate() }
    withoutActuallyEscaping(body) { body in
        nonisolated(unsafe) let (body, answers) = (body, answers)
        runInParallel(parts) { part in
            (answers.baseAddress! + part).initialize(to: body((part * size)..<min(count, (part + 1) * size)))
        }
    }
    defer { _ = answers.deinitialize() }
    return Array(answers)
}

/// `work` over each item `produce` hands over, each on a thread of its
/// own while `produce` goes on (at most one per processor at once, beside
/// the producing thread, which mostly waits for them). An item is started
/// only when the next one is handed over, so the last item, and a lone
/// one (a short list), are worked on by the calling thread with no thread
/// made; so is every item with `concurrent` false, on a single processor,
/// or when no thread can be made. The answers come in the order the items
/// were handed over. Reading rows and opening them overlap this way. When
/// `produce` throws, the work already started is waited for and the error
/// rethrown.
package func pipelined<Item, Answer>(
    concurrent: Bool, _ produce: (_ hand: (Item) -> Void) throws(VaultError) -> Void, work: (Item) -> Answer
) throws(VaultError) -> [Answer] {
    var slots: [AnswerSlot<Answer>] = []
    let most = concurrent && usableProcessors > 1 ? usableProcessors : 0
    try withoutActuallyEscaping(work) { (work) throws(VaultError) in
        nonisolated(unsafe) let work = work
        var running: [pthread_t] = []
        var waiting: (item: Item, slot: AnswerSlot<Answer>)?
        // Every thread is waited for before `work` goes out of reach.
        defer { for thread in running { pthread_join(thread, nil) } }
        try produce { item in
            let slot = AnswerSlot<Answer>()
            slots.append(slot)
            guard let (earlier, earlierSlot) = waiting else {
                waiting = (item, slot)
                return
            }
            waiting = (item, slot)
            if running.count == most, !running.isEmpty { pthread_join(running.removeFirst(), nil) }
            nonisolated(unsafe) let (started, startedSlot) = (earlier, earlierSlot)
            if most > 0, let thread = spawn({ startedSlot.answer = work(started) }) {
                running.append(thread)
            } else {
                startedSlot.answer = work(started)
            }
        }
        if let (item, slot) = waiting { slot.answer = work(item) }
    }
    return slots.map { $0.answer! }
}

/// Where one thread of `pipelined` leaves its answer: written by that
/// thread alone, read only after it was joined.
private final class AnswerSlot<Answer> {
    var answer: Answer?
}

/// At most this many parts run at once (`inParts`).
private let maxParts = 4

/// The processors this process may run on.
package var usableProcessors: Int { Int(vault_usable_processors()) }
