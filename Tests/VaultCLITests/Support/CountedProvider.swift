import Foundation
import Glibc
import Testing
import VaultHTTP
import VaultTestSupport

/// The shared provider (one-use refresh tokens) behind a counting proxy of
/// one test's own, so the test counts the refreshes its homes send and can
/// hold them at the door; and grants from it imported into test homes.
final class CountedProvider {
    let oidc: OIDCProvider
    let proxy: FixtureServer

    init() throws {
        oidc = try OIDCProvider.shared.get()
        proxy = try FixtureServer(script: "counting_proxy.py", arguments: [oidc.settings.base])
    }

    var proxied: String { "http://127.0.0.1:\(proxy.port)/api/oidc" }

    /// Tokens from a whole code flow run outside vault, imported into
    /// `home` as NAME, refreshed through the proxy; `expiresIn` < 0 makes
    /// the grant expired. Returns the access token it was imported with.
    @discardableResult
    func importGrant(_ name: String, into home: Home, expiresIn: Int = -10) throws -> String {
        let s = oidc.settings
        let r = try codeFlow()
        try #require(r.status == 0, "\(r.stderr)")
        let tokens = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let access = try #require(tokens["access_token"] as? String)
        let grant: [String: Any] = [
            "access_token": access, "refresh_token": tokens["refresh_token"]!,
            "expires_at": Int(Date().timeIntervalSince1970) + expiresIn, "provider": "local", "account": s.email,
            "provider_config": [
                "token_endpoint": proxied + "/token", "userinfo_endpoint": proxied + "/userinfo",
                "client_id": s.public_client,
            ],
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let imported = try home.run("import", name, "--replace", stdin: json)
        try #require(imported.status == 0, "\(imported.stderr)")
        return access
    }

    /// A token response from a whole code flow run outside vault, for the
    /// public client.
    func tokens() throws -> [String: Any] {
        let r = try codeFlow()
        try #require(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    /// The provider's code flow for the public client (glewlwyd.py retries
    /// the provider's occasional 5xx itself).
    private func codeFlow() throws -> ProcessResult {
        try VaultProcess.start(
            [
                "\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "tokens", oidc.directory,
                oidc.settings.public_client,
            ],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
    }

    /// Refresh requests that reached the proxy (counted on arrival).
    func refreshes() throws -> Int {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(proxy.port)/__counts"))
        let doc = try #require(
            try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [String: Any])
        return (doc["grant_types"] as? [String: Int])?["refresh_token"] ?? 0
    }

    /// Sends a control request (`/__hold`, `/__release`, ...).
    func control(_ path: String) throws {
        _ = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(proxy.port)\(path)"))
    }
}

/// Polls `condition` every 50 ms until it holds or `seconds` pass (a
/// generous bound against a hang, never a measure of speed).
func eventually(within seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}

extension RunningProcess {
    /// True while the child has not exited (a zombie not yet waited for
    /// has exited).
    var isRunning: Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].split(separator: " ").first != "Z"
    }
}
