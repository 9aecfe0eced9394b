import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultHTTP

/// The sync store client against a real Apache WebDAV collection, and
/// through a fault-injecting proxy in front of it.
@Suite("the sync store client", .serialized)
final class ObjectStoreTests {
    let dir = TemporaryDirectory()
    let dav: FixtureServer
    let proxy: FixtureServer
    let davURL: String
    let password: SecureBytes

    init() throws {
        let file = dir.path + "/password"
        _ = FileManager.default.createFile(
            atPath: file, contents: Data("store password".utf8), attributes: [.posixPermissions: 0o600])
        password = try SecureBytes(copying: Array("store password".utf8))
        dav = try FixtureServer(script: "webdav.py", arguments: [dir.path + "/dav", file])
        let settings = try JSONSerialization.jsonObject(with: Data(dav.firstLine.utf8)) as! [String: Any]
        davURL = settings["url"] as! String
        let port = settings["port"] as! Int
        proxy = try FixtureServer(script: "store_proxy.py", arguments: ["http://127.0.0.1:\(port)"])
    }

    func store(viaProxy: Bool = false, password: String? = nil, attempts: Int = 5) throws -> WebDAVObjectStore {
        let url = viaProxy ? "http://127.0.0.1:\(proxy.port)/store/" : davURL
        let secret = try password.map { try SecureBytes(copying: Array($0.utf8)) } ?? self.password
        let s = try WebDAVObjectStore(baseURL: url, user: "vault", password: secret, transport: CurlTransport())
        s.maximumAttempts = attempts
        s.timeout = 5
        return s
    }

    func mode(_ m: String) throws {
        _ = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(proxy.port)/__\(m)"))
    }

    @Test("Apache honours the preconditions: create once, replace only the version read")
    func compareAndSwap() throws {
        let s = try store()
        #expect(try s.get("root") == nil)
        #expect(try s.put("root", [1, 2, 3], precondition: .absent) == .stored)
        #expect(try s.put("root", [9], precondition: .absent) == .preconditionFailed)
        let first = try #require(try s.get("root"))
        #expect(first.bytes == [1, 2, 3])
        let etag = try #require(first.etag, "FileETag Digest gives a strong ETag")
        #expect(try s.etag("root") == etag)
        #expect(try s.put("root", [4], precondition: .matches(etag)) == .stored)
        #expect(try s.put("root", [5], precondition: .matches(etag)) == .preconditionFailed, "a stale version")
        #expect(try s.get("root")?.bytes == [4])
        try s.delete("root")
        try s.delete("root")
        #expect(try s.get("root") == nil)
        #expect(try s.honoursPreconditions(probe: "probe"))
    }

    @Test("a store that ignores preconditions is recognised; the second writer silently wins there")
    func ignoredPreconditions() throws {
        let s = try store(viaProxy: true)
        try mode("mode/nocas")
        defer { try? mode("mode/pass") }
        #expect(try !s.honoursPreconditions(probe: "probe"))
        #expect(try s.put("root", [1], precondition: .absent) == .stored)
        #expect(try s.put("root", [2], precondition: .absent) == .stored)
        #expect(try s.get("root")?.bytes == [2])
    }

    @Test("wrong credentials, HTML pages, redirects and invalid names are clear errors")
    func refusals() throws {
        #expect(throws: ObjectStore.Failure(.unauthorized, "the store refused the credentials (HTTP 401)")) {
            try self.store(password: "wrong").get("root")
        }
        let s = try store(viaProxy: true)
        try mode("mode/html")
        #expect { try s.get("root") } throws: { ($0 as? ObjectStore.Failure)?.code == .badResponse }
        try mode("mode/redirect")
        #expect { try s.get("root") } throws: { ($0 as? ObjectStore.Failure)?.code == .badResponse }
        try mode("mode/pass")
        #expect { try s.get("../etc") } throws: { ($0 as? ObjectStore.Failure)?.code == .invalid }
        #expect { try WebDAVObjectStore(baseURL: "http://example.com/store/", transport: CurlTransport()) } throws: {
            ($0 as? ObjectStore.Failure)?.code == .invalid
        }
    }

    @Test("5xx answers are retried a bounded number of times with backoff")
    func retries() throws {
        var waits: [Double] = []
        let s = try WebDAVObjectStore(
            baseURL: "http://127.0.0.1:\(proxy.port)/store/", user: "vault", password: password,
            transport: CurlTransport(), sleep: { waits.append($0) })
        try mode("fail/2")
        #expect(try s.put("obj", [7]) == .stored)
        #expect(waits.count == 2 && waits.allSatisfy { $0 > 0 && $0 <= 5 })
        try mode("mode/500")
        defer { try? mode("mode/pass") }
        let before = s.requestCount
        #expect { try s.get("obj") } throws: { ($0 as? ObjectStore.Failure)?.code == .transient }
        #expect(s.requestCount - before == 5)
    }

    @Test("423 (an object locked by another writer's PUT, as rclone answers) is retried like 5xx")
    func lockedWhileWritten() throws {
        var waits: [Double] = []
        let fake = FakeTransport([(423, "", []), (423, "", []), (201, "", [])])
        let s = try WebDAVObjectStore(
            baseURL: "http://127.0.0.1:9/store/", transport: fake, sleep: { waits.append($0) })
        #expect(try s.put("vault-root", [7]) == .stored)
        #expect(fake.requests.count == 3 && waits.count == 2)
    }

    @Test("a stalled store times out instead of hanging")
    func stall() throws {
        let s = try store(viaProxy: true, attempts: 1)
        s.timeout = 2
        try mode("mode/stall")
        defer { try? mode("mode/pass") }
        let start = Date()
        #expect { try s.get("obj") } throws: { ($0 as? ObjectStore.Failure)?.code == .transient }
        #expect(Date().timeIntervalSince(start) < 15)
    }

    @Test("an oversized object is refused")
    func oversized() throws {
        let s = try store()
        try s.put("big", [UInt8](repeating: 7, count: 300_000))
        s.maximumObjectSize = 100_000
        #expect { try s.get("big") } throws: { ($0 as? ObjectStore.Failure)?.code == .badResponse }
    }
}
