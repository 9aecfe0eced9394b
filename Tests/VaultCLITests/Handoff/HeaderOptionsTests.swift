import Foundation
import Testing
import VaultTestSupport

/// `vault header`'s request options are checked before anything is spent,
/// and token files that name a DPoP token are refused by `vault import`.
@Suite("header's options and DPoP token files")
struct HeaderOptionsTests {
    let home = Home()

    init() throws { try home.initKeyfileVault() }

    /// An expired grant whose token endpoint is a closed port: a refresh
    /// would fail with exit 75, so a usage error proves none was tried.
    func importExpired(_ name: String) throws {
        let grant: [String: Any] = [
            "access_token": "old", "refresh_token": "r", "token_type": "Bearer",
            "expires_at": Int(Date().timeIntervalSince1970) - 60, "provider": "local",
            "provider_config": ["token_endpoint": "http://127.0.0.1:1/token", "client_id": "c"],
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let r = try home.run("import", name, stdin: json)
        try #require(r.status == 0, "\(r.stderr)")
    }

    @Test("--url, --method and --dpop-nonce are checked before the grant is refreshed")
    func checkedBeforeRefresh() throws {
        try importExpired("stale")
        for args in [
            ["--url", "ftp://x.example/"], ["--url", "https://x.example/a b"],
            ["--url", #"http://evil.example\@127.0.0.1/x"#],
            ["--url", "https://x.example/", "--method", "get"],
            ["--url", "https://x.example/", "--dpop-nonce", "a b"],
        ] {
            let r = try home.run(["header", "stale"] + args)
            #expect(r.status == 64, "\(args): \(r.stderr)")
            #expect(r.stdout.isEmpty)
        }
        // The options in order: the refresh is tried, and fails as it must.
        #expect(try home.run("header", "stale").status == 75)
    }

    @Test("a token file with token_type DPoP is refused, nothing stored")
    func dpopTokenFileRefused() throws {
        let json = #"{"provider":"local","access_token":"a","refresh_token":"r","token_type":"DPoP"}"#
        let r = try home.run("import", "bound", stdin: json)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("DPoP key"), "\(r.stderr)")
        #expect(r.stderr.contains("vault add local --dpop"), "\(r.stderr)")
        let (names, _) = try home.listedNames()
        #expect(names.isEmpty)
    }
}
