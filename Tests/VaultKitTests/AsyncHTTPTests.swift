import Foundation
import Synchronization
import Testing
import VaultKit
import VaultKitURLSession
import VaultTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A transport whose sends block until `width` of them are under way at
/// once (or 20 s pass): if sends ran on Swift's cooperative pool, which
/// has one thread per core, the later ones would never start.
final class GatheringTransport: HTTPTransport, Sendable {
    let width: Int
    private let arrived = Mutex(0)
    private let answer: String

    init(width: Int, answer: String = "{}") {
        self.width = width
        self.answer = answer
    }

    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        arrived.withLock { $0 += 1 }
        let deadline = Date().addingTimeInterval(20)
        while arrived.withLock({ $0 }) < width {
            guard Date() < deadline else { throw HTTPError(.network, "the other sends never started") }
            usleep(1000)
        }
        return HTTPResponse(
            status: 200, headers: [("content-type", "application/json")],
            body: try! SecureBytes(copying: Array(answer.utf8)))
    }
}

/// Takes any `Sendable` value: the build fails when a type loses it.
func requireSendable<T: Sendable>(_ value: T) -> T { value }

/// Tokens from a whole code flow at the real provider (glewlwyd.py
/// tokens), as the token endpoint answered them.
func providerTokens(_ oidc: OIDCProvider, client: String, secret: String? = nil) throws -> String {
    let r = try VaultProcess.start(
        ["\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "tokens", oidc.directory, client]
            + (secret.map { [$0] } ?? []),
        environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
    ).wait()
    try #require(r.status == 0, "\(r.stderr)")
    return r.stdout
}

@Suite("VaultKit from Swift 6 async code: sendable messages, async send and discovery, URLRequest")
struct AsyncHTTPTests {
    @Test("requests and responses cross tasks; an async send reaches a real server and its answer comes back")
    func asyncSendRealServer() async throws {
        let server = try FixtureServer(script: "http_fixture.py")
        var request = HTTPRequest(
            method: "POST", url: server.base + "/echo", headers: [("X-Probe", "async")],
            body: try SecureBytes(copying: Array("a=1".utf8)))
        request.timeout = 10
        let sent = requireSendable(request)
        let responses = try await withThrowingTaskGroup(of: HTTPResponse.self) { group in
            for _ in 0..<4 { group.addTask { try await CurlTransport().send(sent) } }
            var all: [HTTPResponse] = []
            for try await r in group { all.append(requireSendable(r)) }
            return all
        }
        #expect(responses.count == 4)
        for response in responses {
            #expect(response.status == 200)
            let echo = try JSONSerialization.jsonObject(with: response.body.withUnsafeBytes { Data($0) })
            let fields = try #require(echo as? [String: Any])
            #expect(fields["body"] as? String == "a=1")
            #expect((fields["headers"] as? [String: String])?["x-probe"] == "async")
        }
        // One response's secure body read from many tasks at once.
        let shared = responses[0]
        let lengths = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<16 { group.addTask { shared.body.withUnsafeBytes { $0.count } } }
            return await group.reduce(into: Set<Int>()) { $0.insert($1) }
        }
        #expect(lengths == [shared.body.count])
    }

    @Test("async sends and discoveries run off the cooperative pool: more at once than there are cores")
    func offThePool() async throws {
        let width = ProcessInfo.processInfo.activeProcessorCount * 2 + 4
        let transport = GatheringTransport(width: width)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<width {
                group.addTask { try await transport.send(HTTPRequest(method: "GET", url: "https://x.example/")).status }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: width))

        let document =
            #"{"issuer":"https://id.example","authorization_endpoint":"https://id.example/auth","token_endpoint":"https://id.example/token"}"#
        let discovery = GatheringTransport(width: width, answer: document)
        let endpoints = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<width {
                group.addTask {
                    try await Discovery.provider(name: "id", issuer: "https://id.example", transport: discovery)
                        .tokenEndpoint
                }
            }
            return try await group.reduce(into: Set<String?>()) { $0.insert($1) }
        }
        #expect(endpoints == ["https://id.example/token"])
    }

    @Test("a task cancelled before its send starts gets cancelled, and nothing is sent")
    func cancelledBeforeSend() async throws {
        let fake = FakeTransport([(200, "", [])])
        let task = Task { () async throws(VaultError) -> HTTPResponse in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await fake.send(HTTPRequest(method: "GET", url: "https://x.example/"))
        }
        do {
            _ = try await task.value
            Issue.record("a cancelled send was made")
        } catch let error as VaultError {
            #expect(error.code == .cancelled)
        }
        #expect(fake.requests.isEmpty)
        // A network failure is transient, with the transport's reason.
        do {
            _ = try await FakeTransport([]).send(HTTPRequest(method: "GET", url: "https://x.example/"))
            Issue.record("no answer gave a response")
        } catch {
            #expect(error.code == .transient)
        }
    }

    @Test("async discovery at the real provider")
    func asyncDiscovery() async throws {
        let oidc = try OIDCProvider.shared.get()
        let provider = try await Discovery.provider(
            name: "glewlwyd", issuer: oidc.settings.issuer, transport: CurlTransport())
        #expect(provider.tokenEndpoint == oidc.settings.issuer + "/token")
    }

    @Test("a URLRequest authorized with a fresh token is accepted by the real provider's userinfo endpoint")
    func urlRequestRealProvider() async throws {
        let oidc = try OIDCProvider.shared.get()
        let json = try providerTokens(oidc, client: oidc.settings.public_client)
        let tokens = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let access = try #require(tokens["access_token"] as? String)
        let store = InMemoryGrantStore()
        try await store.save(TestKeys.grant(token: access), as: "work")
        let session = TokenSession(store: store)
        var request = URLRequest(url: URL(string: oidc.settings.issuer + "/userinfo")!)
        try await session.authorize(&request, with: "work")
        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer \(access)")
        let (_, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)

        // Without the header the provider refuses: the header did the work.
        var bare = request
        bare.setValue(nil, forHTTPHeaderField: "Authorization")
        let (_, refused) = try await URLSession.shared.data(for: bare)
        #expect((refused as? HTTPURLResponse)?.statusCode == 401)
    }

    @Test("a URLRequest over plain http to another host, or another scheme, is refused before any token is read")
    func urlRequestRefusals() async throws {
        let store = InMemoryGrantStore()
        var expired = TestKeys.grant(token: "old")
        expired.expiresAt = Date().addingTimeInterval(-10)
        try await store.save(expired, as: "work")
        let fake = FakeTransport([LibraryTests.rotated])
        let session = TokenSession(store: store, transport: fake)
        for url in [
            "http://api.example.com/me", "http://127.0.0.1@api.example.com/me", "ftp://127.0.0.1/me",
            "http://127.0.0.1.example.com/me", "file:///etc/passwd",
        ] {
            var request = URLRequest(url: URL(string: url)!)
            do {
                try await session.authorize(&request, with: "work")
                Issue.record("a token was added for \(url)")
            } catch {
                #expect(error.code == .invalidInput, "\(url)")
            }
            #expect(request.value(forHTTPHeaderField: "Authorization") == nil, "\(url)")
        }
        #expect(fake.requests.isEmpty, "a refresh was made for a refused request")

        // https, and plain http to loopback, get the token (refreshed first).
        for url in ["https://api.example.com/me", "http://127.0.0.1:8080/me", "http://[::1]/me"] {
            var request = URLRequest(url: URL(string: url)!)
            request.setValue("Bearer stale", forHTTPHeaderField: "Authorization")
            try await session.authorize(&request, with: "work")
            #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer new-access", "\(url)")
        }
        #expect(fake.requests.count == 1)
    }
}

@Suite("both transport calls reachable from async code: the async send and the blocking one")
struct TransportCallTests {
    @Test("from async code, `await send` and `sendBlocking` (on the caller's thread) both reach a real server")
    func bothForms() async throws {
        let server = try FixtureServer(script: "http_fixture.py")
        var request = HTTPRequest(method: "GET", url: server.base + "/echo")
        request.timeout = 10
        let transport: any HTTPTransport & Sendable = CurlTransport()
        let viaAwait = try await transport.send(request)
        #expect(viaAwait.status == 200)
        let blocking = try transport.sendBlocking(request)
        #expect(blocking.status == 200)
        // A transport that is not Sendable: the blocking call only.
        let plain: any HTTPTransport = CurlTransport()
        #expect(try plain.sendBlocking(request).status == 200)
    }

    @Test("the blocking call throws the transport's HTTPError, the async one a transient VaultError")
    func errors() async throws {
        let request = HTTPRequest(method: "GET", url: "https://x.example/")
        #expect(throws: HTTPError.self) { try FakeTransport([]).sendBlocking(request) }
        do {
            _ = try await FakeTransport([]).send(request)
            Issue.record("no answer gave a response")
        } catch {
            #expect(error.code == .transient)
        }
    }
}
