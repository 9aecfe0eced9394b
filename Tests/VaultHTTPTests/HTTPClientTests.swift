import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@Suite("HTTP over libcurl")
struct HTTPClientTests {
    let server: FixtureServer
    let http = CurlTransport()

    init() throws { server = try FixtureServer(script: "http_fixture.py") }

    func text(_ r: HTTPResponse) -> String { r.body.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    func json(_ r: HTTPResponse) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as! [String: Any]
    }

    @Test("GET returns status, headers and body")
    func get() throws {
        let r = try http.send(HTTPRequest(method: "GET", url: server.base + "/echo"))
        #expect(r.status == 200)
        #expect(r.header("Content-Type") == "application/json")
        #expect(try json(r)["method"] as? String == "GET")
    }

    @Test("POST sends headers and a body from secure memory")
    func post() throws {
        let body = try SecureBytes(copying: Array("grant_type=refresh_token&refresh_token=abc".utf8))
        let r = try http.send(
            HTTPRequest(
                method: "POST", url: server.base + "/echo",
                headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
                body: body))
        let doc = try json(r)
        #expect(doc["body"] as? String == "grant_type=refresh_token&refresh_token=abc")
        let headers = doc["headers"] as! [String: String]
        #expect(headers["accept"] == "application/json")
        #expect(headers["expect"] == nil)
    }

    @Test("error statuses come back as responses", arguments: [400, 401, 404, 500, 503])
    func statuses(status: Int) throws {
        let r = try http.send(HTTPRequest(method: "GET", url: server.base + "/status/\(status)"))
        #expect(r.status == status)
        #expect(text(r) == "status \(status)")
    }

    @Test("redirects are not followed unless asked, and then only a few")
    func redirects() throws {
        let r = try http.send(HTTPRequest(method: "GET", url: server.base + "/redirect/1"))
        #expect(r.status == 302)
        var follow = HTTPRequest(method: "GET", url: server.base + "/redirect/2")
        follow.followRedirects = true
        // Redirects may only go to https: a plain-http hop is refused.
        #expect { try http.send(follow) } throws: { ($0 as? HTTPError)?.code == .redirect }
    }

    @Test("a body over the size cap is refused")
    func tooLarge() throws {
        var r = HTTPRequest(method: "GET", url: server.base + "/big/5000")
        r.maximumResponseSize = 4096
        #expect { try http.send(r) } throws: { ($0 as? HTTPError)?.code == .tooLarge }
        r.maximumResponseSize = 5000
        #expect(try http.send(r).body.count == 5000)
    }

    @Test("a stalled server times out as a transient network error")
    func timeout() throws {
        var r = HTTPRequest(method: "GET", url: server.base + "/slow/5")
        r.timeout = 0.5
        let started = Date()
        #expect { try http.send(r) } throws: { ($0 as? HTTPError)?.isTransient == true }
        #expect(Date().timeIntervalSince(started) < 4)
    }

    @Test("a dropped connection and a closed port are transient network errors")
    func networkErrors() throws {
        #expect { try http.send(HTTPRequest(method: "GET", url: server.base + "/drop")) } throws: {
            ($0 as? HTTPError)?.code == .network
        }
        // Port 1 on loopback: nothing listens there.
        #expect { try http.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:1/")) } throws: {
            ($0 as? HTTPError)?.code == .network
        }
    }

    @Test(
        "plain http to a non-loopback host and other schemes are refused before any request",
        arguments: [
            "http://example.com/token", "ftp://127.0.0.1/x", "file:///etc/passwd", "127.0.0.1/x", "http:///x",
            // WHATWG parsers send this to evil.example; ours read 127.0.0.1.
            #"http://evil.example\@127.0.0.1/x"#,
        ])
    func refusedURLs(url: String) throws {
        #expect { try http.send(HTTPRequest(method: "GET", url: url)) } throws: {
            ($0 as? HTTPError)?.code == .refusedURL
        }
    }

    @Test("loopback detection and redaction of URLs in messages")
    func policy() {
        #expect(
            URLPolicy.isLoopback("127.0.0.1") && URLPolicy.isLoopback("127.1.2.3") && URLPolicy.isLoopback("localhost"))
        #expect(URLPolicy.isLoopback("[::1]"))
        #expect(!URLPolicy.isLoopback("127.0.0.1.example.com") && !URLPolicy.isLoopback("10.0.0.1"))
        // User info and query go; the port, which tells stores apart, stays.
        #expect(URLPolicy.redacted("https://u:p@host:8443/token?code=secret#frag") == "https://host:8443/token")
        #expect(URLPolicy.redacted("http://u@127.0.0.1/dav/") == "http://127.0.0.1/dav/")
        #expect(URLPolicy.redacted("https://host/a?x=1") == "https://host/a")
    }
}
