import Foundation
import Testing
import VaultTestSupport

/// A service account added on one machine mints tokens on another after a
/// sync: the key travels inside the encrypted grant, and the store never
/// sees it (Apache WebDAV, authlib's RFC 7523 endpoint).
@Suite("machine grants travel by sync", .enabled(if: MachineSupport.authlib, "needs python3-authlib"))
final class MachineSyncTests {
    let dir = TemporaryDirectory()
    let a = Home()
    let b = Home()

    @Test("the service account's key reaches the other machine through the store, which never sees it")
    func serviceAccountSyncs() throws {
        try MachineSupport.keyPair(dir.path + "/sa")
        try MachineSupport.keyPair(dir.path + "/client")
        let tokens = try FixtureServer(
            script: "jwt_bearer_server.py", arguments: [dir.path + "/sa.pub", dir.path + "/client.pub"])
        let settings = try JSONSerialization.jsonObject(with: Data(tokens.firstLine.utf8)) as? [String: Any] ?? [:]
        let email = settings["sa_email"] as? String ?? ""
        let pem = try String(contentsOfFile: dir.path + "/sa.pem", encoding: .utf8)
        let key: [String: Any] = [
            "type": "service_account", "client_email": email, "private_key": pem,
            "private_key_id": settings["sa_key_id"] as? String ?? "", "token_uri": settings["token_endpoint"] ?? "",
        ]
        a.write(a.path + "/key.json", String(decoding: try JSONSerialization.data(withJSONObject: key), as: UTF8.self))

        let dav = try WebDAVStore(in: dir.path)
        let url = dav.url
        let password = dav.passwordFile
        try a.initKeyfileVault()
        b.extra["VAULT_KEYFILE"] = a.path + "/key"
        for home in [a, b] { home.extra["VAULT_AGENT"] = "off" }

        try #require(try a.run("add", "ci", "--service-account", a.path + "/key.json").status == 0)
        try FileManager.default.removeItem(atPath: a.path + "/key.json")
        let remote = try a.run("remote", "set", url, "--user", "vault", "--password-file", password)
        try #require(remote.status == 0, "\(remote.stderr)")
        try #require(try a.run("sync").status == 0)
        let joined = try b.run("join", url, "--user", "vault", "--password-file", password)
        try #require(joined.status == 0, "\(joined.stderr)")

        let minted = try b.run("refresh", "ci")
        #expect(minted.status == 0, "\(minted.stderr)")
        let log = try MachineSupport.json("http://127.0.0.1:\(settings["port"] as? Int ?? 0)/__log") as? [[String: Any]]
        #expect(log?.count == 2)
        #expect(try b.listed()["ci"]?["kind"] as? String == "service_account")

        let store = dav.files
        let body = String(pem.split(separator: "\n")[1])
        for name in try FileManager.default.contentsOfDirectory(atPath: store) {
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: store + "/" + name)), as: UTF8.self)
            #expect(!text.contains("PRIVATE KEY") && !text.contains(body) && !text.contains(email), "\(name)")
        }
    }
}
