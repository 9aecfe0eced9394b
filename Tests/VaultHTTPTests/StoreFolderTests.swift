import Testing
import VaultTestSupport

@testable import VaultHTTP

/// `remote set` on a folder that does not exist yet: PROPFIND, then MKCOL
/// down from the first missing parent; a store without MKCOL gets a named
/// problem rather than a bare status.
@Suite("the store's folder")
struct StoreFolderTests {
    func store(_ url: String, _ answers: [(Int, String, [(String, String)])]) throws -> (
        WebDAVObjectStore, FakeTransport
    ) {
        let transport = FakeTransport(answers)
        return (try WebDAVObjectStore(baseURL: url, transport: transport), transport)
    }

    @Test("a missing folder and its missing parents are created, top down after the 409s")
    func createsParents() throws {
        let (s, t) = try store(
            "http://127.0.0.1:9/dav/a/b",
            [(404, "", []), (409, "", []), (409, "", []), (201, "", []), (201, "", []), (201, "", [])])
        #expect(
            try s.createFolder() == [
                "the folder http://127.0.0.1:9/dav/", "the folder http://127.0.0.1:9/dav/a/",
                "the folder http://127.0.0.1:9/dav/a/b/",
            ])
        #expect(
            t.requests.map { "\($0.method) \($0.url)" } == [
                "PROPFIND http://127.0.0.1:9/dav/a/b/", "MKCOL http://127.0.0.1:9/dav/a/b/",
                "MKCOL http://127.0.0.1:9/dav/a/", "MKCOL http://127.0.0.1:9/dav/",
                "MKCOL http://127.0.0.1:9/dav/a/", "MKCOL http://127.0.0.1:9/dav/a/b/",
            ])
        #expect(t.requests[0].headers["depth"] == "0")
    }

    @Test("a folder that is there is left alone")
    func existing() throws {
        let (s, t) = try store("http://127.0.0.1:9/dav/", [(207, "<multistatus/>", [])])
        #expect(try s.createFolder().isEmpty)
        #expect(t.requests.count == 1)
    }

    @Test("a store without WebDAV: 501 is not retried, and a PUT into the missing folder names it")
    func plainStore() throws {
        let (s, t) = try store("http://127.0.0.1:9/x/", [(501, "", []), (501, "", []), (409, "", [])])
        #expect(try s.createFolder().isEmpty)
        #expect(t.requests.count == 2, "one PROPFIND, one MKCOL")
        #expect {
            try s.put("probe-1", [1])
        } throws: {
            let failure = $0 as? ObjectStore.Failure
            return failure?.code == .missingFolder
                && failure?.reason == "the store has no folder http://127.0.0.1:9/x/ (PUT probe-1 answered HTTP 409)"
        }
    }

    @Test("user info in the store's URL is never repeated in what is reported, and 403 to WebDAV is left to the probe")
    func userInfoAndForbidden() throws {
        let (s, _) = try store("http://vault:hunter2@127.0.0.1:9/dav/", [(404, "", []), (201, "", [])])
        #expect(try s.createFolder() == ["the folder http://127.0.0.1:9/dav/"])
        // A store that forbids PROPFIND and MKCOL but takes PUT: nothing
        // created, no error; the write that follows decides.
        let (plain, t) = try store(
            "http://vault:hunter2@127.0.0.1:9/x/", [(403, "", []), (403, "", []), (409, "", [])])
        #expect(try plain.createFolder().isEmpty)
        #expect(t.requests.count == 2)
        #expect {
            try plain.put("probe-1", [1])
        } throws: {
            let reason = ($0 as? ObjectStore.Failure)?.reason ?? ""
            return reason.contains("http://127.0.0.1:9/x/") && !reason.contains("hunter2")
        }
    }
}
