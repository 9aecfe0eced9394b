import Foundation
import Testing
import VaultTestSupport

/// Every preset ships without a client: its first `vault add` says, in one
/// message, how to register one. Nothing here reaches the network.
@Suite("the first add of a preset without a client")
struct ClientRegistrationTests {
    let home = Home()

    init() throws { try home.initKeyfileVault() }

    static let presets = ["flickr", "github", "gitlab", "google", "linkedin", "microsoft", "trello", "twitter"]

    @Test(
        "the message names where to register, the redirect, scopes, the secret and how to give the client",
        arguments: presets)
    func message(preset: String) throws {
        let r = try home.run("add", preset)
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(
            lines.first?.hasPrefix(
                "vault: error: provider '\(preset)' has no client: vault needs an application registered with ")
                == true, "\(r.stderr)")
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("vault: hint: ") }, "\(r.stderr)")
        #expect(
            lines.contains { $0.hasPrefix("vault: hint: register an application with ") && $0.contains(" at https://") }
        )
        #expect(lines.contains { $0.hasPrefix("vault: hint: redirect URI: ") })
        #expect(lines.contains { $0.hasPrefix("vault: hint: client secret: ") })
        #expect(lines.last?.contains("then give vault the client: put {\"client_id\": ") == true)
        #expect(
            lines.last?.contains("\(home.path)/config/vault/providers/\(preset).json (mode 0600), or pass --client-id ")
                == true)
        let oauth1 = ["flickr", "trello", "twitter"].contains(preset)
        #expect(lines.contains { $0.hasPrefix("vault: hint: scopes: ") } == !oauth1)
        let device = ["github", "gitlab", "google", "microsoft"].contains(preset)
        #expect(lines.contains { $0.hasPrefix("vault: hint: device flow (--flow device): ") } == device)
        let listed = try home.run("list", "--json").stdout
        #expect((try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [Any])?.isEmpty == true, "\(listed)")
    }

    @Test("vault providers shows which presets still need a client, and one given in a file")
    func providersColumn() throws {
        let dir = home.path + "/config/vault/providers"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        home.write(dir + "/github.json", #"{"client_id": "Iv1.0123456789abcdef"}"#)
        let r = try home.run("providers")
        #expect(r.status == 0, "\(r.stderr)")
        let rows = r.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        for row in rows.dropFirst() {
            let expected = row[0] == "github" ? "set" : "needed"
            #expect(row[2] == Substring(expected), "\(row)")
        }
        let json = try home.run("providers", "--json")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(doc.first { $0["name"] as? String == "google" }?["needs_client"] as? Bool == true)
        #expect(doc.first { $0["name"] as? String == "github" }?["needs_client"] as? Bool == false)
    }

    @Test("one name that is neither a grant nor a provider says both were looked for")
    func neither() throws {
        let r = try home.run("add", "nosuch")
        #expect(r.status == 1)
        #expect(
            r.stderr.hasPrefix(
                "vault: error: no grant or provider named 'nosuch'\nvault: hint: 'vault list' shows the grants; providers: flickr, github"
            ), "\(r.stderr)")
    }

    @Test("a provider file's registration words reach the terminal escaped")
    func escaped() throws {
        try home.providerFile(
            "odd",
            [
                "authorization_endpoint": "https://id.example/auth", "token_endpoint": "https://id.example/token",
                "flows": ["browser"],
                "registration": [
                    "url": "https://id.example/apps\u{1b}[2J\nvault: error: forged", "client_secret": "no",
                ],
            ])
        let r = try home.run("add", "odd")
        #expect(r.status == 1)
        #expect(!r.stderr.unicodeScalars.contains { $0.value == 0x1b }, "\(r.stderr)")
        #expect(r.stderr.contains("https://id.example/apps\\u{1b}[2J\\u{a}vault: error: forged"), "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").filter { $0.hasPrefix("vault: error:") }.count == 1)
    }
}
