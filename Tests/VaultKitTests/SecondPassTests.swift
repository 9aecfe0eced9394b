import Foundation
import Synchronization
import Testing
import VaultHTTP
import VaultTestSupport

@testable import VaultCore
@testable import VaultKit

/// What an app developer met writing a Swift 6 app from docs/library.md,
/// each now as the app expects it (GTMAppAuth's answers where it has one).
@Suite("VaultKit as an app uses it")
struct SecondPassTests {
    let library = LibraryTests()

    @Test("canAuthorize is false for a name that holds no grant, on a vault file and in memory")
    func canAuthorizeMissing() async throws {
        let vaultStore = try await library.vaultStore()
        for store in [vaultStore, InMemoryGrantStore()] as [any GrantStore] {
            #expect(try await store.canAuthorize("never-saved") == false)
        }
        let dir = TemporaryDirectory()
        let vault = try Vault.create(at: dir.location, key: .keyfile(try TestKeys.keyfileSecret()), kdf: .minimum)
        #expect(try vault.canAuthorize("never-saved") == false)
    }

    @Test("a 429's Retry-After is a field of the error, in seconds: as sent, or a date less the answer's Date")
    func retryAfterField() async throws {
        let cases: [([(String, String)], Double?)] = [
            ([("Retry-After", "120")], 120),
            ([("Retry-After", "Wed, 21 Oct 2026 07:28:30 GMT"), ("Date", "Wed, 21 Oct 2026 07:28:00 GMT")], 30),
            // A date with no Date to count from: only the message has it.
            ([("Retry-After", "Wed, 21 Oct 2026 07:28:30 GMT")], nil),
            ([], nil),
        ]
        for (headers, seconds) in cases {
            let store = InMemoryGrantStore()
            try await store.save(try library.expiredGrant(), as: "work")
            let session = TokenSession(store: store, transport: FakeTransport([(429, "", headers)]))
            do {
                _ = try await session.freshGrant("work")
                Issue.record("a 429 gave a token")
            } catch {
                #expect(error.code == .transient)
                #expect(error.retryAfter == seconds, "\(headers)")
            }
        }
    }

    @Test("check: a 401 to the token the provider just issued says the check failed and keeps the grant")
    func checkProbeFailed() async throws {
        let store = InMemoryGrantStore()
        try await store.save(try library.expiredGrant(), as: "work")
        let session = TokenSession(
            store: store, transport: FakeTransport([LibraryTests.rotated, (401, "", [])]))
        let events = Mutex<[GrantEvent]>([])
        let watcher = Task { for await e in session.events { events.withLock { $0.append(e) } } }
        do {
            _ = try await session.check("work")
            Issue.record("the check passed")
        } catch {
            #expect(error.code == .badResponse)
            #expect(error.reason.contains("the check failed, not the grant"))
        }
        let kept = try await store.retrieve("work")
        #expect(!kept.dead && kept.refreshToken == "new-refresh")
        #expect(try await store.canAuthorize("work"))
        try await Task.sleep(for: .milliseconds(50))
        watcher.cancel()
        #expect(events.withLock { $0 } == [.refreshed(name: "work", rotated: true)])
    }

    @Test("a task cancelled while it waits for a shared refresh is told the refresh goes on, and it does")
    func cancelledWhileWaiting() async throws {
        let store = InMemoryGrantStore()
        try await store.save(try library.expiredGrant(), as: "work")
        let gate = GatedTransport(answer: LibraryTests.rotated)
        let session = TokenSession(store: store, transport: gate)
        let first = Task { try await session.freshGrant("work") }
        while !gate.arrived { try await Task.sleep(for: .milliseconds(5)) }
        let waiting = Task { try await session.freshGrant("work") }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        do {
            _ = try await waiting.value
            Issue.record("the cancelled waiter got a token")
        } catch let error as VaultError {
            #expect(error.code == .cancelled)
            #expect(error.reason.contains("goes on"), "\(error.reason)")
        }
        gate.open()
        #expect(try await first.value.grant.accessToken == "new-access")
        #expect(try await store.retrieve("work").refreshToken == "new-refresh")
    }
}

/// An app's own store, as GTMAppAuth's `AuthSessionStore` is: save,
/// retrieve, remove and list, nothing about refreshing.
actor AppsOwnStore: GrantStore {
    private(set) var saved: [String: Grant] = [:]
    private(set) var saves = 0

    func save(_ grant: Grant, as name: String) throws(VaultError) {
        saved[name] = grant
        saves += 1
    }
    func retrieve(_ name: String) throws(VaultError) -> Grant {
        guard let g = saved[name] else { throw VaultError(.notFound, "no grant '\(name)'") }
        return g
    }
    func remove(_ name: String) throws(VaultError) {
        guard saved.removeValue(forKey: name) != nil else { throw VaultError(.notFound, "no grant '\(name)'") }
    }
    func names() -> [String] { saved.keys.sorted() }
}

@Suite("a store of the app's own: the session refreshes")
struct OwnStoreTests {
    let library = LibraryTests()

    @Test("eight tasks at once: one refresh, its rotated refresh token saved before any task uses it")
    func refreshAndSave() async throws {
        let store = AppsOwnStore()
        try await store.save(try library.expiredGrant(), as: "work")
        let fake = FakeTransport([LibraryTests.rotated])
        let session = TokenSession(store: store, transport: fake)
        let tokens = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<8 { group.addTask { try await session.freshGrant("work").grant.accessToken } }
            return try await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(Set(tokens) == ["new-access"])
        #expect(fake.requests.count == 1)
        #expect(try await store.retrieve("work").refreshToken == "new-refresh")
        #expect(await store.saves == 2)
    }

    @Test("callers with different needs at once (a longer validity, a forced refresh): one refresh token, sent once")
    func differentNeeds() async throws {
        let store = AppsOwnStore()
        try await store.save(try library.expiredGrant(), as: "work")
        let gate = GatedTransport(answer: LibraryTests.rotated)
        let session = TokenSession(store: store, transport: gate)
        let first = Task { try await session.freshGrant("work", minimumValidity: 60) }
        while !gate.arrived { try await Task.sleep(for: .milliseconds(5)) }
        let second = Task { try await session.freshGrant("work", minimumValidity: 300) }
        try await Task.sleep(for: .milliseconds(50))
        gate.open()
        #expect(try await first.value.grant.accessToken == "new-access")
        #expect(try await second.value.grant.accessToken == "new-access")
        #expect(gate.count == 1, "the refresh token went out once")
    }

    @Test("a grant the app replaced during a refresh is not overwritten by it")
    func replacedMeanwhile() async throws {
        let store = AppsOwnStore()
        try await store.save(try library.expiredGrant(), as: "work")
        let gate = GatedTransport(answer: LibraryTests.rotated)
        let session = TokenSession(store: store, transport: gate)
        let refresh = Task { try await session.freshGrant("work") }
        while !gate.arrived { try await Task.sleep(for: .milliseconds(5)) }
        // The person authorizes again meanwhile; the app saves the new grant.
        try await store.save(TestKeys.grant(token: "authorized-again"), as: "work")
        gate.open()
        _ = try await refresh.value
        #expect(try await store.retrieve("work").accessToken == "authorized-again")
    }

    @Test("a refusal saves the grant as dead, kept; canAuthorize turns false")
    func refusal() async throws {
        let store = AppsOwnStore()
        try await store.save(try library.expiredGrant(), as: "work")
        let session = TokenSession(
            store: store, transport: FakeTransport([(400, #"{"error":"invalid_grant"}"#, [])]))
        await #expect(throws: VaultError.self) { try await session.freshGrant("work") }
        let kept = try await store.retrieve("work")
        #expect(kept.dead && kept.deadReason == "invalid_grant")
        #expect(try await store.canAuthorize("work") == false)
    }
}

extension SecondPassTests {
    /// The events `stream` delivers until `count` have come or a second passes.
    static func collect(_ stream: AsyncStream<GrantEvent>, _ count: Int) async -> [GrantEvent] {
        await withTaskGroup(of: [GrantEvent].self) { group in
            group.addTask {
                var got: [GrantEvent] = []
                for await e in stream {
                    got.append(e)
                    if got.count == count { break }
                }
                return got
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(1))
                return []
            }
            let first = await group.next() ?? []
            group.cancelAll()
            return first
        }
    }
}

@Suite("a session's events, for every observer")
struct SessionEventTests {
    let library = LibraryTests()

    /// An expired grant whose every refresh rotates.
    func rotating(_ n: Int) -> FakeTransport {
        FakeTransport(
            (0..<n).map { i in
                (
                    200,
                    #"{"access_token":"a\#(i)","refresh_token":"r\#(i)","expires_in":1,"token_type":"Bearer"}"#,
                    []
                )
            })
    }

    @Test("two observers, four refreshes: each observer sees all four")
    func broadcast() async throws {
        let store = InMemoryGrantStore()
        try await store.save(try library.expiredGrant(), as: "work")
        let session = TokenSession(store: store, transport: rotating(4))
        let one = session.events
        let two = session.events
        for _ in 0..<4 { _ = try await session.freshGrant("work", forceRefresh: true) }
        let expected = Array(repeating: GrantEvent.refreshed(name: "work", rotated: true), count: 4)
        #expect(await SecondPassTests.collect(one, 4) == expected)
        #expect(await SecondPassTests.collect(two, 4) == expected)
    }

    @Test("a refresh by another session over the same vault is told as a change made elsewhere")
    func changedElsewhere() async throws {
        let mine = try await library.vaultStore()
        try await mine.save(try library.expiredGrant(), as: "work")
        let session = TokenSession(store: mine, transport: rotating(1))
        _ = try await session.freshGrant("work")
        let watching = session.events
        // Another process (another store on the same file) refreshes it.
        let other = try await VaultGrantStore.open(
            at: library.dir.location, key: .keyfile(try TestKeys.keyfileSecret()))
        let elsewhere = TokenSession(store: other, transport: FakeTransport([LibraryTests.rotated]))
        _ = try await elsewhere.freshGrant("work", forceRefresh: true)
        #expect(try await session.freshGrant("work").grant.accessToken == "new-access")
        #expect(await SecondPassTests.collect(watching, 1) == [.changedElsewhere(name: "work")])
    }

    @Test("a refresh that fails and changes nothing is an event, with the provider's wait")
    func failure() async throws {
        let store = InMemoryGrantStore()
        try await store.save(try library.expiredGrant(), as: "work")
        let session = TokenSession(store: store, transport: FakeTransport([(503, "", [("Retry-After", "7")])]))
        let watching = session.events
        await #expect(throws: VaultError.self) { try await session.freshGrant("work") }
        let events = await SecondPassTests.collect(watching, 1)
        guard case .failed(let name, let error)? = events.first else {
            Issue.record("no failure event: \(events)")
            return
        }
        #expect(name == "work" && error.code == .transient && error.retryAfter == 7)
    }
}

/// A transport whose one answer waits until `open()`; `arrived` once the
/// request is in.
final class GatedTransport: HTTPTransport, Sendable {
    private let state = Mutex((arrived: false, open: false, count: 0))
    private let answer: (Int, String, [(String, String)])
    init(answer: (Int, String, [(String, String)])) { self.answer = answer }
    var arrived: Bool { state.withLock { $0.arrived } }
    /// Requests received.
    var count: Int { state.withLock { $0.count } }
    func open() { state.withLock { $0.open = true } }
    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        state.withLock {
            $0.arrived = true
            $0.count += 1
        }
        while !state.withLock({ $0.open }) { usleep(2_000) }
        return HTTPResponse(
            status: answer.0, headers: answer.2, body: (try? SecureBytes(copying: Array(answer.1.utf8)))!)
    }
}
