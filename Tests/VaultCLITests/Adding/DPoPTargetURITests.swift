import Foundation
import Testing
import VaultTestSupport

/// The `htu` of a proof from `vault header --url` is the target URI of the
/// request a client such as curl makes for that URL (RFC 9449 section 4.2,
/// RFC 9110 section 7.1), so that a resource that rebuilds its own URI
/// accepts it.
extension DPoPFixtureTests {
    func boundGrant() throws -> String {
        let r = try home.addAtDPoPFixture("bound")
        try #require(r.status == 0, "\(r.stderr)")
        let show = try home.run("show", "bound", "--json")
        let g = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        return try #require(g["dpop_jkt"] as? String)
    }

    /// curl, like every HTTP client, requests `/` for a URL with an empty
    /// path (RFC 9110 section 4.2.3): the server's target URI ends in `/`.
    @Test("header --url for a URL with an empty path: htu ends in '/', the path curl requests")
    func emptyPathIsSlash() throws {
        let jkt = try boundGrant()
        let header = try home.run("header", "bound", "--url", server.base)
        #expect(header.status == 0, "\(header.stderr)")
        let verdicts = try checkedProofs([(header.stdout, "GET", server.base + "/", nil)], jkt: jkt)
        #expect(verdicts == ["ok ES256"], "\(verdicts)")
        let withQuery = try home.run("header", "bound", "--url", server.base + "?page=2")
        let second = try checkedProofs([(withQuery.stdout, "GET", server.base + "/?page=2", nil)], jkt: jkt)
        #expect(second == ["ok ES256"], "\(second)")
    }

    /// A URL scheme is case-insensitive (RFC 3986 section 3.1), and curl
    /// takes `HTTPS://`; the proof names it in lower case (section 6.2.2.1).
    @Test("header --url takes a scheme in capitals, as curl does, and names it in lower case")
    func schemeInCapitals() throws {
        let jkt = try boundGrant()
        let url = server.base + "/userinfo"
        let upper = "HTTP" + url.dropFirst("http".count)
        let header = try home.run("header", "bound", "--url", upper)
        #expect(header.status == 0, "\(header.stderr)")
        let verdicts = try checkedProofs([(header.stdout, "GET", url, nil)], jkt: jkt)
        #expect(verdicts == ["ok ES256"], "\(verdicts)")
    }
}
