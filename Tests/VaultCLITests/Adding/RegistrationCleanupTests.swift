import Foundation
import Glibc
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

/// `vault add --register` leaves no client behind when the grant is not
/// stored (RFC 7592 deletion on failure and on stop signals), `remove
/// --revoke` takes a client the provider no longer knows as deleted, and
/// `remove --json` has one shape; against the scriptable provider with
/// client registration on.
@Suite("registered clients: deleted when the grant is not stored, gone counts as deleted", .serialized)
struct RegistrationCleanupTests {
    /// The fixture, found by discovery as `plain`, with registration on.
    func scene(_ settings: [String: Any] = [:]) throws -> ProviderScene {
        try ProviderScene("rfc", settings: ["registration": true].merging(settings) { $1 })
    }

    /// `vault add plain work --register` with the scene's browser (or `browser`).
    func register(_ scene: ProviderScene, browser: String? = nil, _ extra: [String] = []) throws -> ProcessResult {
        var env = scene.home.environment
        if let browser { env["BROWSER"] = browser }
        return try VaultProcess.run(
            ["add", "plain", "work", "--register", "--timeout", "60"] + extra, environment: env)
    }

    /// The client ids the fixture still has registered.
    func registrations(_ scene: ProviderScene) throws -> [String] {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: scene.base + "/__registrations"))
        return try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [String] ?? []
    }

    /// What a `--json` run printed, as an object.
    func document(_ r: ProcessResult) throws -> [String: Any]? {
        try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
    }

    @Test("the person denies after the client was registered: the client is deleted, nothing stored")
    func deniedDeletes() throws {
        let scene = try scene()
        try scene.script(["authorize": [["deny": true]]])
        let r = try register(scene)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("vault: registered client 'vault-test'"), "\(r.stderr)")
        #expect(r.stderr.contains("the authorization was refused: access_denied"), "\(r.stderr)")
        #expect(r.stderr.contains("vault: deleted the client 'vault-test' registered for it"), "\(r.stderr)")
        #expect(try scene.log("register_delete").count == 1)
        #expect(try registrations(scene).isEmpty, "the client is left at the provider")
        #expect(try scene.home.run("show", "work").status == 1)
    }

    @Test("the deletion fails too: the person is told the client id and its registration URI, no secret")
    func deletionFails() throws {
        for answer: [String: Any] in [["status": 500, "body": ""], ["status": 403, "json": ["error": "x"]]] {
            let scene = try scene()
            try scene.script(["authorize": [["deny": true]], "register_delete": [answer]])
            let r = try register(scene)
            #expect(r.status == 1, "\(r.stderr)")
            #expect(
                r.stderr.contains(
                    "vault: warning: the client 'vault-test' registered for it stays at the provider (its "
                        + "registration: \(scene.base)/register/vault-test): deleting it failed"), "\(r.stderr)")
            #expect(r.stderr.contains("; delete it there"), "\(r.stderr)")
            #expect(!r.stderr.contains("rat-") && !r.stderr.contains("fixture-client-secret"), "\(r.stderr)")
            #expect(try registrations(scene) == ["vault-test"])
            #expect(try scene.home.run("show", "work").status == 1)
        }
    }

    @Test("SIGINT or SIGTERM while the browser is out: the client is deleted, vault ends by the signal")
    func stoppedDeletes() throws {
        for signal in [SIGINT, SIGTERM] {
            let scene = try scene()
            var env = scene.home.environment
            env["BROWSER"] = "/bin/true"  // the person never comes back
            let p = try VaultProcess.start(
                ["add", "plain", "work", "--register", "--timeout", "60"], environment: env)
            var registered = false
            for _ in 0..<200 where !registered {
                registered = try !registrations(scene).isEmpty && !scene.log("register").isEmpty
                if !registered { usleep(50_000) }
            }
            try #require(registered, "the client was never registered")
            // The registration's answer may still be on its way: the
            // signal then waits for it, and the client is deleted all the same.
            p.signal(signal)
            let r = p.wait(timeout: 30)
            #expect(r.status == 128 + signal, "\(r.stderr)")
            #expect(r.stderr.contains("before the grant was stored"), "\(r.stderr)")
            #expect(r.stderr.contains("deleted the client 'vault-test' registered for it"), "\(r.stderr)")
            #expect(try registrations(scene).isEmpty, "the client is left at the provider")
            #expect(try scene.home.run("show", "work").status == 1)
        }
    }

    @Test("a stored grant keeps its client: remove --revoke deletes it, --json with every key")
    func storedThenRemoved() throws {
        let scene = try scene()
        let r = try register(scene)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try registrations(scene) == ["vault-test"])
        let removed = try scene.home.run("remove", "work", "--revoke", "--json")
        #expect(removed.status == 0, "\(removed.stderr)")
        let doc = try document(removed)
        #expect(doc?["name"] as? String == "work")
        #expect(doc?["revoked"] as? String == "refresh_token")
        #expect(doc?["client_registration"] as? String == "deleted")
        #expect(try registrations(scene).isEmpty)
    }

    @Test("a DELETE answered 401 or 404: the registration is gone, which counts as deleted")
    func goneCountsAsDeleted() throws {
        for status in [401, 404] {
            let scene = try scene()
            #expect(try register(scene).status == 0)
            try scene.script(["register_delete": [["status": status, "body": ""]]])
            let removed = try scene.home.run("remove", "work", "--revoke", "--json")
            #expect(removed.status == 0, "\(status): \(removed.stderr)")
            let doc = try document(removed)
            #expect(doc?["client_registration"] as? String == "gone", "\(removed.stdout)")
            #expect(doc?["revoked"] as? String == "refresh_token")
            #expect(try scene.home.run("show", "work").status == 1, "the grant is removed")
        }
    }

    @Test("remove --json: the same keys, nulls included, whatever happened")
    func oneShape() throws {
        let scene = try scene()
        #expect(try register(scene).status == 0)
        // Kept: removed without --revoke.
        let kept = try scene.home.run("remove", "work", "--json")
        #expect(kept.status == 0, "\(kept.stderr)")
        let keptDoc = try document(kept)
        #expect(keptDoc?.keys.sorted() == ["client_registration", "name", "revoked"], "\(kept.stdout)")
        #expect(keptDoc?["client_registration"] as? String == "kept")
        #expect(keptDoc?["revoked"] is NSNull)
        // Failed: revoked, the deletion refused; the grant stays, exit 1.
        #expect(try register(scene).status == 0)
        try scene.script(["register_delete": [["status": 403, "json": ["error": "access_denied"]]]])
        let failed = try scene.home.run("remove", "work", "--revoke", "--json")
        #expect(failed.status == 1, "\(failed.stderr)")
        let failedDoc = try document(failed)
        #expect(failedDoc?["client_registration"] as? String == "failed", "\(failed.stdout)")
        #expect(failedDoc?["revoked"] as? String == "refresh_token")
        #expect(try scene.home.run("show", "work").status == 0, "the grant is kept")
        // A grant without a registered client: null.
        let plain = try ProviderScene("rfc")
        #expect(try plain.add().status == 0)
        let none = try plain.home.run("remove", "work", "--json")
        let noneDoc = try document(none)
        #expect(noneDoc?.keys.sorted() == ["client_registration", "name", "revoked"], "\(none.stdout)")
        #expect(noneDoc?["client_registration"] is NSNull && noneDoc?["revoked"] is NSNull)
    }
}

extension RegistrationCleanupTests {
    @Test(
        "while the browser is out, the registration's token is in vault's memory no more often than it is kept",
        .enabled(if: geteuid() == 0, "reading another process's memory needs root"))
    func registrationWiped() throws {
        let token = "rat-\(UUID().uuidString)-canary"
        let scene = try scene(["registration_access_token": token])
        var env = scene.home.environment
        env["BROWSER"] = "/bin/true"
        let p = try VaultProcess.start(
            ["add", "plain", "work", "--register", "--timeout", "60"], environment: env)
        defer {
            p.signal(SIGTERM)
            _ = p.wait(timeout: 30)
        }
        var registered = false
        for _ in 0..<200 where !registered {
            registered = try !registrations(scene).isEmpty
            if !registered { usleep(50_000) }
        }
        try #require(registered)
        usleep(1_000_000)  // the answer read, the listener waiting
        let count = try memoryCounts(pid: p.pid, [token])[token] ?? 0
        // One live copy (what deletes the client), maybe one more; 3 or more without the wipe.
        #expect(count <= 2, "\(count) copies")
    }
}
