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

/// A transport whose one answer waits until `open()`; `arrived` once the
/// request is in.
final class GatedTransport: HTTPTransport, Sendable {
    private let state = Mutex((arrived: false, open: false))
    private let answer: (Int, String, [(String, String)])
    init(answer: (Int, String, [(String, String)])) { self.answer = answer }
    var arrived: Bool { state.withLock { $0.arrived } }
    func open() { state.withLock { $0.open = true } }
    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        state.withLock { $0.arrived = true }
        while !state.withLock({ $0.open }) { usleep(2_000) }
        return HTTPResponse(
            status: answer.0, headers: answer.2, body: (try? SecureBytes(copying: Array(answer.1.utf8)))!)
    }
}
