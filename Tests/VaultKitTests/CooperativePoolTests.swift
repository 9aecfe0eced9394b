import Foundation
import Testing
import VaultKit
import VaultTestSupport

/// How often a task that sleeps 10 ms at a time wakes while VaultKit works
/// for one waiting task per core: VaultKit's blocking work must leave
/// Swift's cooperative pool to the app's other tasks.
@Suite("VaultKit's blocking work leaves the cooperative pool to the app's other tasks", .serialized)
struct CooperativePoolTests {
    let dir = TemporaryDirectory()
    /// The waiting tasks: one per core, as many as the cooperative pool has threads.
    let width = ProcessInfo.processInfo.activeProcessorCount
    /// How many requests each waiting task has under way at once, as a
    /// server that refreshes many grants does: more blocked threads than
    /// Dispatch adds to its pool while the window lasts.
    static let each = 4
    /// How long the heartbeat is measured.
    static let window = Duration.milliseconds(1200)
    /// How long the token endpoint takes to answer: longer than the window.
    static let delay = 1.6

    /// The heartbeat's ticks per second over `window`, from the moment
    /// `work` is set going beside it; and whether every piece of `work` was
    /// still under way when the window was to close (else the measurement
    /// says nothing).
    static func heartbeat(beside work: [@Sendable () async throws -> Void]) async throws -> (
        rate: Double, coveredWindow: Bool
    ) {
        let clock = ContinuousClock()
        let start = clock.now
        let tasks = work.map { piece in
            Task {
                try await piece()
                return clock.now
            }
        }
        var ticks = 0
        while clock.now - start < window {
            try await Task.sleep(for: .milliseconds(10))
            ticks += 1
        }
        let end = clock.now
        var coveredWindow = true
        for task in tasks where try await task.value < start + window { coveredWindow = false }
        return (Double(ticks) / seconds(end - start), coveredWindow)
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// Measures `scenario` against an idle baseline taken right before it
    /// (the same number of tasks, waiting on a sleep): a round passes when
    /// the heartbeat keeps 90% of its idle rate. Up to four rounds, so that
    /// a burst of load from elsewhere on the machine (or other tests) is
    /// not taken for VaultKit; when no round could be measured (a baseline
    /// too slow, work that ended too soon), the test is cancelled, never
    /// passed.
    func expectSteadyHeartbeat(
        _ what: String, _ scenario: (_ round: Int) async throws -> [@Sendable () async throws -> Void]
    ) async throws {
        var failed: [(idle: Double, busy: Double)] = []
        var unmeasured: [String] = []
        for round in 0..<4 {
            let wait = Self.delay
            let idle = try await Self.heartbeat(
                beside: (0..<width).map { _ in { try await Task.sleep(for: .seconds(wait)) } })
            guard idle.rate >= 40 else {
                unmeasured.append("\(Int(idle.rate)) ticks/s idle, too few to measure against")
                continue
            }
            let busy = try await Self.heartbeat(beside: try await scenario(round))
            print("heartbeat \(what): idle \(Int(idle.rate)) ticks/s, busy \(Int(busy.rate)) ticks/s")
            // A round passes only when the work lasted the whole window;
            // one that ended inside it says nothing, unless it was slowed.
            if busy.rate < 0.9 * idle.rate {
                failed.append((idle.rate, busy.rate))
            } else if busy.coveredWindow {
                return
            } else {
                unmeasured.append("the work ended inside the window")
            }
        }
        guard !failed.isEmpty else {
            try Test.cancel("\(what): nothing could be measured (\(unmeasured.joined(separator: "; ")))")
        }
        let figures = failed.map { "\(Int($0.idle)), \(Int($0.busy))" }.joined(separator: "; ")
        Issue.record("\(what): the heartbeat fell below 90% of its idle rate (idle, busy ticks/s: \(figures))")
    }

    func expired(_ endpoint: String, _ n: Int) -> Grant {
        Grant(
            provider: "slow", accessToken: "access-\(n)", refreshToken: "refresh-\(n)",
            expiresAt: Date().addingTimeInterval(-10),
            providerConfiguration: ProviderConfiguration(tokenEndpoint: endpoint, clientID: "heartbeat"),
            createdAt: Date())
    }

    func session() async throws -> (TokenSession, FixtureServer) {
        let server = try FixtureServer(script: "slow_token_endpoint.py")
        let store = try await VaultGrantStore.create(
            at: dir.location, key: .keyfile(try TestKeys.keyfileSecret()), kdf: .minimum)
        return (TokenSession(store: store), server)
    }

    @Test("refreshes through TokenSession against a slow token endpoint")
    func refreshes() async throws {
        let (session, server) = try await session()
        let endpoint = server.base + "/delay/\(Self.delay)/token"
        try await expectSteadyHeartbeat("refresh") { round in
            var work: [@Sendable () async throws -> Void] = []
            for i in 0..<width {
                let names = (0..<Self.each).map { "grant-\(round)-\(i)-\($0)" }
                for name in names { try await session.store.save(expired(endpoint, i), as: name) }
                work.append {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for name in names {
                            group.addTask {
                                let fresh = try await session.freshGrant(name)
                                #expect(fresh.refreshed)
                            }
                        }
                        try await group.waitForAll()
                    }
                }
            }
            return work
        }
    }

    @Test("async sends of slow requests")
    func sends() async throws {
        let server = try FixtureServer(script: "slow_token_endpoint.py")
        var request = HTTPRequest(
            method: "POST", url: server.base + "/delay/\(Self.delay)/token",
            headers: [("Content-Type", "application/x-www-form-urlencoded")],
            body: try SecureBytes(copying: Array("grant_type=refresh_token&refresh_token=r".utf8)))
        request.timeout = 30
        let slow = request
        try await expectSteadyHeartbeat("send") { _ in
            (0..<width).map { _ in
                {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for _ in 0..<Self.each {
                            group.addTask {
                                let response = try await CurlTransport().send(slow)
                                #expect(response.status == 200)
                            }
                        }
                        try await group.waitForAll()
                    }
                }
            }
        }
    }

    @Test("1,000 tasks asking for one expired grant")
    func burst() async throws {
        let (session, server) = try await session()
        let endpoint = server.base + "/delay/\(Self.delay)/token"
        try await expectSteadyHeartbeat("burst") { round in
            let name = "burst-\(round)"
            try await session.store.save(expired(endpoint, round), as: name)
            return (0..<1000).map { _ in
                {
                    let fresh = try await session.freshGrant(name)
                    #expect(fresh.grant.accessToken != nil)
                }
            }
        }
    }
}
