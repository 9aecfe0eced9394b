import Foundation
import Synchronization
import Testing

@testable import VaultCore

/// What the jobs of a test share.
private final class Tally: Sendable {
    let state = Mutex((now: 0, most: 0, done: 0, released: false))

    /// Waits up to 20 s until `count` jobs are done.
    func waitFor(_ count: Int) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while state.withLock({ $0.done }) < count {
            guard Date() < deadline else { return false }
            usleep(1000)
        }
        return true
    }
}

@Suite("VaultKit's threads: a bound on working threads, waits outside it")
struct WorkerThreadsTests {
    @Test("no more than the limit work at once; the rest queue and all run")
    func bound() {
        let threads = WorkerThreads(limit: 2)
        let tally = Tally()
        for _ in 0..<12 {
            threads.run {
                tally.state.withLock {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
                usleep(5000)
                tally.state.withLock {
                    $0.now -= 1
                    $0.done += 1
                }
            }
        }
        #expect(tally.waitFor(12))
        #expect(tally.state.withLock { $0.most } == 2)
    }

    @Test("every working thread waiting on work still queued: the waits let it start, no deadlock")
    func waitsDoNotHoldThePool() {
        let threads = WorkerThreads(limit: 2)
        let tally = Tally()
        for _ in 0..<2 {
            threads.run {
                threads.waiting {
                    let deadline = Date().addingTimeInterval(20)
                    while !tally.state.withLock({ $0.released }) && Date() < deadline { usleep(1000) }
                }
                tally.state.withLock { $0.done += 1 }
            }
        }
        // Queued behind the two waiters: it is what ends their wait.
        threads.run { tally.state.withLock { $0.released = true } }
        #expect(tally.waitFor(2))
        #expect(tally.state.withLock { $0.released })
    }
}
