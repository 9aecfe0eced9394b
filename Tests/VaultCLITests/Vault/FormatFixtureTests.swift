import Foundation
import Glibc
import Testing
import VaultHTTP
import VaultTestSupport

/// A committed format fixture (Tests/Fixtures/README.md): a vault file with
/// a passphrase slot and a key-file slot, and the sync store it was in step
/// with, written by an earlier release through Tools/fixtures/generate. The
/// bytes are used as they are, from copies; `manifest.json` says what that
/// release reported about them.
struct FormatFixture {
    struct Manifest: Decodable {
        struct WrittenBy: Decodable { let commit: String }
        struct Store: Decodable {
            let url: String
            let user: String
            let objects: [String]
        }
        struct Files: Decodable {
            let vault: String
            let key_file: String
            let passphrase: String
            let store_password: String
            let store: String
        }
        struct Answer: Decodable { let access_token: String }
        struct Mint: Decodable {
            struct JWTBearer: Decodable { let response: Answer }
            let client_credentials: Answer
            let jwt_bearer: JWTBearer
        }
        struct TokenEndpoint: Decodable {
            let refresh: [String: Answer]
            /// What the endpoint mints for grants for machines (fixtures with `later_fields`).
            let mint: Mint?
        }
        /// What a fixture written with `--later-fields` holds beyond the grants' shown fields.
        struct LaterFields: Decodable {
            struct Authorization: Decodable {
                let redirect_uri: String
                let authorization_params: [String: String]
            }
            /// Per grant, what `vault add NAME` must send to authorize it again.
            let authorize_again: [String: Authorization]
            /// Per grant for machines, the grant type it mints with (`client_credentials`, `jwt_bearer`).
            let minted: [String: String]
        }
        struct Conflict: Decodable {
            let name: String
            let current_access_token: String
            let other_access_token: String
        }
        let written_by: WrittenBy
        let port: Int
        let store: Store
        let files: Files
        let token_endpoint: TokenEndpoint
        let conflicts: [Conflict]
        let removed: [String]
        let sha256: [String: String]
        let later_fields: LaterFields?
    }

    let directory: String
    let manifest: Manifest
    /// Per grant, the fields of `vault show NAME --json --reveal` as the release printed them.
    let grants: [String: [String: Any]]
    /// `vault keyslot list --json` as the release printed it.
    let keyslots: [[String: Any]]

    /// Every committed fixture directory, with the commit that wrote it.
    static let written: [String: String] = [
        "v1": "f92dcca", "v1-b986ef6": "b986ef6", "v1-c7bcea6": "c7bcea6", "v1-114300f": "114300f",
        "v1-878e558": "878e558",
    ]
    /// The directories, oldest first: the tests run for each in turn.
    static let versions = ["v1", "v1-b986ef6", "v1-c7bcea6", "v1-114300f", "v1-878e558"]

    static func directory(_ version: String) -> String { FixtureServer.root.path + "/Tests/Fixtures/" + version }

    init(_ version: String) throws {
        directory = Self.directory(version)
        let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/manifest.json"))
        manifest = try JSONDecoder().decode(Manifest.self, from: data)
        let doc = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        grants = try #require(doc["grants"] as? [String: [String: Any]])
        keyslots = try #require(doc["keyslots"] as? [[String: Any]])
    }

    func path(_ relative: String) -> String { directory + "/" + relative }

    /// The fields of a grant that hold secrets: compared, never printed.
    static let secretFields: Set<String> = ["access_token", "refresh_token", "id_token", "token_secret"]

    /// Whether every fixture's fixed port can be bound on 127.0.0.1 now.
    static var portsAreFree: Bool { versions.allSatisfy(portIsFree) }

    /// Whether the fixture's fixed port can be bound on 127.0.0.1 now. An
    /// unreadable manifest counts as free, so the tests run and fail on it.
    static func portIsFree(_ version: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: directory(version) + "/manifest.json"),
            let manifest = try? JSONDecoder().decode(Manifest.self, from: data)
        else { return true }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(manifest.port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A machine whose vault directory holds a copy of the committed vault
    /// file, with copies of its key file, passphrase and store password
    /// (mode 0600, as vault requires) beside it. Nothing unlocks it yet.
    func machine() throws -> Home {
        let home = Home()
        home.extra["VAULT_AGENT"] = "off"
        let fm = FileManager.default
        try fm.createDirectory(atPath: home.path + "/vault", withIntermediateDirectories: false)
        chmod(home.path + "/vault", 0o700)
        let copies = [
            (manifest.files.vault, home.vaultFile), (manifest.files.key_file, home.path + "/vault.key"),
            (manifest.files.passphrase, home.path + "/passphrase"),
            (manifest.files.store_password, home.path + "/store-password"),
        ]
        for (from, to) in copies {
            try fm.copyItem(atPath: path(from), toPath: to)
            chmod(to, 0o600)
        }
        return home
    }

    /// A new machine with the passphrase and the store's password, and no vault.
    func newMachine() throws -> Home {
        let home = Home()
        home.extra = ["VAULT_AGENT": "off", "VAULT_PASSPHRASE_FILE": home.path + "/passphrase"]
        for (from, to) in [
            (manifest.files.passphrase, "/passphrase"), (manifest.files.store_password, "/store-password"),
        ] {
            try FileManager.default.copyItem(atPath: path(from), toPath: home.path + to)
            chmod(home.path + to, 0o600)
        }
        return home
    }

    func join(_ home: Home) throws -> ProcessResult {
        try home.run(
            "join", manifest.store.url, "--user", manifest.store.user, "--password-file", home.path + "/store-password")
    }

    /// The access token a refresh with `refreshToken` gets from the fixture's token endpoint.
    func answer(to refreshToken: Any?) throws -> String {
        let token = try #require(refreshToken as? String)
        return try #require(manifest.token_endpoint.refresh[token]).access_token
    }
}

/// The committed store served again: the project's Apache WebDAV server
/// (Tools/testservers/webdav.py) holds copies of the committed objects, behind
/// the fixture's fixed port, which also answers the grants' token endpoint
/// (Tools/testservers/fixture_endpoints.py).
final class FixtureEndpoints {
    let dir = TemporaryDirectory()
    /// `http://127.0.0.1:PORT`, the fixture's fixed port.
    let base: String
    private var servers: [FixtureServer] = []

    init(_ fixture: FormatFixture) throws {
        let password = dir.path + "/store-password"
        try FileManager.default.copyItem(atPath: fixture.path(fixture.manifest.files.store_password), toPath: password)
        let dav = try FixtureServer(script: "webdav.py", arguments: [dir.path + "/dav", password])
        servers.append(dav)
        let settings = try #require(try JSONSerialization.jsonObject(with: Data(dav.firstLine.utf8)) as? [String: Any])
        let davPort = try #require(settings["port"] as? Int)
        let store = dir.path + "/dav/www/store"
        let www = try #require(getpwnam("www-data")).pointee
        for name in fixture.manifest.store.objects {
            try FileManager.default.copyItem(
                atPath: fixture.path(fixture.manifest.files.store + "/" + name), toPath: store + "/" + name)
            chown(store + "/" + name, www.pw_uid, www.pw_gid)
        }
        let endpoints = try FixtureServer(
            script: "fixture_endpoints.py",
            arguments: ["\(fixture.manifest.port)", "http://127.0.0.1:\(davPort)", fixture.path("manifest.json")])
        servers.append(endpoints)
        try #require(endpoints.port == fixture.manifest.port)
        base = endpoints.base
    }

    deinit {
        // Each server stops (by PID, through its script) before its directory goes.
        while !servers.isEmpty { servers.removeLast() }
    }

    /// Refreshes the token endpoint granted and refused so far.
    func counts() throws -> (refreshed: Int, refused: Int) {
        let doc = try allCounts()
        return (doc["refreshed"] ?? -1, doc["refused"] ?? -1)
    }

    /// Tokens the endpoint minted for grants for machines so far.
    func minted() throws -> Int { try allCounts()["minted"] ?? -1 }

    private func allCounts() throws -> [String: Int] {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: "\(base)/__counts"))
        return try #require(
            try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [String: Int])
    }
}

/// Every test runs for each fixture directory, one after the other: they
/// all serve the same fixed port, so no two may run at once.
@Suite("format fixtures: a vault and a store written by an earlier release keep working", .serialized)
struct FormatFixtureTests {

    /// Compares secrets without ever printing them.
    func same(_ printed: String, _ token: String) -> Bool { printed == token + "\n" }

    /// One value as canonical JSON (absent and null alike), to compare what two releases printed.
    static func canonical(_ value: Any?) -> String {
        guard let value, !(value is NSNull) else { return "null" }
        let data = try? JSONSerialization.data(withJSONObject: [value], options: [.sortedKeys])
        return data.map { String(decoding: $0, as: UTF8.self) } ?? "unencodable"
    }

    func showJSON(_ home: Home, _ name: String, reveal: Bool = false) throws -> [String: Any] {
        let r: ProcessResult
        if reveal {
            r = try home.run("show", name, "--json", "--reveal")
        } else {
            r = try home.run("show", name, "--json")
        }
        try #require(r.status == 0, "vault show \(name): \(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    @Test("every fixture directory is tested")
    func everyDirectory() throws {
        let root = FixtureServer.root.path + "/Tests/Fixtures"
        let found = try FileManager.default.contentsOfDirectory(atPath: root).filter { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: root + "/" + name, isDirectory: &isDirectory)
                && isDirectory.boolValue
        }
        #expect(Set(found) == Set(FormatFixture.versions))
        #expect(Set(FormatFixture.written.keys) == Set(FormatFixture.versions))
    }

    @Test("the committed files are the bytes the release wrote", arguments: FormatFixture.versions)
    func committedBytes(version: String) throws {
        let fixture = try FormatFixture(version)
        let names = fixture.manifest.sha256.keys.sorted()
        let r = try VaultProcess.start(
            ["--"] + names.map(fixture.path), environment: ["PATH": "/usr/bin:/bin"],
            executable: "/usr/bin/sha256sum"
        ).wait()
        try #require(r.status == 0, "\(r.stderr)")
        var found: [String: String] = [:]
        for line in r.stdout.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            let file = String(parts[1].drop { $0 == " " || $0 == "*" })
            found[String(file.dropFirst(fixture.directory.count + 1))] = String(parts[0])
        }
        let changed = names.filter { found[$0] != fixture.manifest.sha256[$0] }
        #expect(changed.isEmpty, "committed fixture files changed (fixtures are never rewritten): \(changed)")
        let store = try FileManager.default.contentsOfDirectory(atPath: fixture.path(fixture.manifest.files.store))
        #expect(store.sorted() == fixture.manifest.store.objects.sorted())
        let commit = try #require(FormatFixture.written[version])
        #expect(fixture.manifest.written_by.commit.hasPrefix(commit))
    }

    @Test(
        "the committed vault opens with its key file, and with its passphrase from a file or a command",
        arguments: FormatFixture.versions)
    func unlocks(version: String) throws {
        let fixture = try FormatFixture(version)
        let home = try fixture.machine()
        let expected = Set(fixture.grants.keys)
        func listed(_ how: String) throws {
            let (names, r) = try home.listedNames()
            #expect(r.status == 0 && r.stderr.isEmpty, "\(how): \(r.stderr)")
            #expect(names == expected, "\(how)")
        }
        home.extra["VAULT_KEYFILE"] = home.path + "/vault.key"
        try listed("key file")
        home.extra["VAULT_KEYFILE"] = nil
        home.extra["VAULT_PASSPHRASE_FILE"] = home.path + "/passphrase"
        try listed("passphrase file")
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        home.extra["VAULT_PASSPHRASE_COMMAND"] = "cat '\(home.path)/passphrase'"
        try listed("passphrase command")
        home.extra["VAULT_PASSPHRASE_COMMAND"] = nil

        // The passphrase holds a composed é; spelled decomposed it is the
        // same passphrase (both are hashed in NFC).
        let composed = [UInt8](try #require(FileManager.default.contents(atPath: home.path + "/passphrase")))
        var decomposed: [UInt8] = []
        var i = 0
        while i < composed.count {
            if i + 1 < composed.count && composed[i] == 0xC3 && composed[i + 1] == 0xA9 {
                decomposed += [0x65, 0xCC, 0x81]
                i += 2
            } else {
                decomposed.append(composed[i])
                i += 1
            }
        }
        try #require(decomposed != composed, "the fixture passphrase has a composed character")
        _ = FileManager.default.createFile(
            atPath: home.path + "/decomposed", contents: Data(decomposed), attributes: [.posixPermissions: 0o600])
        home.extra["VAULT_PASSPHRASE_FILE"] = home.path + "/decomposed"
        try listed("decomposed passphrase")

        home.write(home.path + "/wrong", "not the fixture passphrase\n")
        home.extra["VAULT_PASSPHRASE_FILE"] = home.path + "/wrong"
        let wrong = try home.run("list")
        #expect(wrong.status == 77, "\(wrong.stderr)")

        // Both slots, with the cost they were made with.
        home.extra["VAULT_PASSPHRASE_FILE"] = home.path + "/passphrase"
        let slots = try home.run("keyslot", "list", "--json")
        #expect(slots.status == 0, "\(slots.stderr)")
        let now = try JSONSerialization.jsonObject(with: Data(slots.stdout.utf8)) as? [[String: Any]]
        #expect(Self.canonical(now) == Self.canonical(fixture.keyslots))
    }

    @Test(
        "list, show, token, header and conflicts give what the release stored, without a network",
        arguments: FormatFixture.versions)
    func readsGrants(version: String) throws {
        let fixture = try FormatFixture(version)
        let home = try fixture.machine()
        home.extra["VAULT_KEYFILE"] = home.path + "/vault.key"

        let listing = try home.run("list", "--json")
        #expect(listing.status == 0 && listing.stderr.isEmpty, "\(listing.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]])
        #expect(Set(rows.compactMap { $0["name"] as? String }) == Set(fixture.grants.keys))
        for row in rows {
            let name = try #require(row["name"] as? String)
            let stored = try #require(fixture.grants[name])
            for key in ["provider", "kind", "account", "state", "expires_at", "scopes"] {
                #expect(Self.canonical(row[key]) == Self.canonical(stored[key]), "list: '\(name)' \(key)")
            }
        }

        for (name, stored) in fixture.grants.sorted(by: { $0.key < $1.key }) {
            let shown = try showJSON(home, name, reveal: true)
            for (key, value) in stored.sorted(by: { $0.key < $1.key }) {
                let (now, then) = (Self.canonical(shown[key]), Self.canonical(value))
                if FormatFixture.secretFields.contains(key) {
                    // A Bool, so that a failure does not print the values.
                    let equal = now == then
                    #expect(equal, "show: '\(name)' \(key) differs")
                } else {
                    #expect(now == then, "show: '\(name)' \(key)")
                }
            }
        }
        for name in fixture.manifest.removed {
            let r = try home.run("show", name)
            #expect(r.status == 1 && r.stderr.contains("not found"), "'\(name)' was removed or renamed: \(r.stderr)")
        }

        // Fresh grants give their stored token; no endpoint is running.
        var fresh = ["forever", "renamed", "second", "legacy"]
        if fixture.manifest.later_fields != nil {
            fresh += ["own-config", "from-provider-file", "refreshed", "machine-client", "machine-account"]
        }
        for name in fresh {
            let r = try home.run("token", name)
            #expect(r.status == 0, "token \(name): \(r.stderr)")
            #expect(same(r.stdout, try #require(fixture.grants[name]?["access_token"] as? String)), "token \(name)")
        }
        let dead = try home.run("token", "revoked")
        #expect(dead.status == 2 && dead.stdout.isEmpty, "\(dead.stderr)")

        // The OAuth 1.0a grant still signs with its consumer and token.
        let header = try home.run("header", "legacy", "--method", "GET", "--url", "https://api.example.com/photos")
        #expect(header.status == 0, "\(header.stderr)")
        for part in [
            "Authorization: OAuth ", #"oauth_consumer_key="\#(version)-consumer-key""#,
            #"oauth_signature_method="HMAC-SHA1""#,
            "oauth_signature=",
        ] {
            #expect(header.stdout.contains(part), "header lacks \(part)")
        }

        // The sync settings open: the store the release synced with.
        let remote = try home.run("remote")
        #expect(remote.status == 0 && remote.stdout.contains(fixture.manifest.store.url), "\(remote.stderr)")

        // The conflict the release kept, and its other side.
        let conflicts = try home.run("conflicts", "--json")
        let listed = try JSONSerialization.jsonObject(with: Data(conflicts.stdout.utf8)) as? [[String: Any]]
        #expect(Set(listed?.compactMap { $0["name"] as? String } ?? []) == Set(fixture.manifest.conflicts.map(\.name)))
        for conflict in fixture.manifest.conflicts {
            #expect(same(try home.run("token", conflict.name).stdout, conflict.current_access_token))
            let resolved = try home.run("conflicts", "resolve", conflict.name, "--keep", "other")
            #expect(resolved.status == 0, "\(resolved.stderr)")
            #expect(same(try home.run("token", conflict.name).stdout, conflict.other_access_token))
        }
    }

    @Test(
        "an expired fixture grant refreshes at the token endpoint it stored, and the new tokens reach the store",
        .enabled(if: FormatFixture.portsAreFree, "the fixtures' fixed port on 127.0.0.1 is in use"),
        arguments: FormatFixture.versions)
    func refreshes(version: String) throws {
        let fixture = try FormatFixture(version)
        let servers = try FixtureEndpoints(fixture)
        let home = try fixture.machine()
        home.extra["VAULT_KEYFILE"] = home.path + "/vault.key"
        let stale = try #require(fixture.grants["stale"])
        #expect(try showJSON(home, "stale")["state"] as? String == "refreshable")

        let first = try fixture.answer(to: stale["refresh_token"])
        let r = try home.run("token", "stale")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(same(r.stdout, first), "vault token printed another token than the endpoint gave")
        #expect(try servers.counts() == (1, 0))
        let shown = try showJSON(home, "stale")
        #expect(shown["state"] as? String == "fresh")
        #expect(shown["refreshed_at"] as? Int != nil)
        #expect(try home.run("token", "stale").status == 0)
        #expect(try servers.counts() == (1, 0), "a fresh token needs no refresh")

        // The rotated refresh token was stored and is the one sent next.
        let refreshed = try showJSON(home, "stale", reveal: true)
        let second = try fixture.answer(to: refreshed["refresh_token"])
        let again = try home.run("refresh", "stale")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try servers.counts() == (2, 0))
        #expect(same(try home.run("token", "stale").stdout, second))
        #expect(try home.run("token", "revoked").status == 2)
        #expect(try servers.counts() == (2, 0), "a dead grant is not refreshed")

        // The refresh was synced: a machine joining now gets the new token.
        let other = try fixture.newMachine()
        let joined = try fixture.join(other)
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(same(try other.run("token", "stale").stdout, second))
        #expect(try servers.counts() == (2, 0))
    }

    @Test(
        "the committed store takes a new machine, and changes travel both ways with the committed vault",
        .enabled(if: FormatFixture.portsAreFree, "the fixtures' fixed port on 127.0.0.1 is in use"),
        arguments: FormatFixture.versions)
    func syncs(version: String) throws {
        let fixture = try FormatFixture(version)
        let servers = try FixtureEndpoints(fixture)
        let a = try fixture.machine()
        a.extra["VAULT_PASSPHRASE_FILE"] = a.path + "/passphrase"
        func sync(_ home: Home) throws -> [String: Any] {
            let r = try home.run("sync", "--json")
            #expect(r.status == 0, "\(r.stderr)")
            return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any] ?? [:]
        }
        // In step with the store, as the release left them.
        let idle = try sync(a)
        #expect(idle["pulled"] as? Int == 0 && idle["pushed"] as? Int == 0, "\(idle)")

        let c = try fixture.newMachine()
        let joined = try fixture.join(c)
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(try c.listedNames().names == Set(fixture.grants.keys))
        let forever = try #require(fixture.grants["forever"]?["access_token"] as? String)
        #expect(same(try c.run("token", "forever").stdout, forever))

        // From the new machine to the committed vault.
        #expect(try c.run("import", "from-new-machine", stdin: Home.tokenJSON("new-machine-token")).status == 0)
        #expect(try c.run("remove", "renamed").status == 0)
        _ = try sync(c)
        let pulled = try sync(a)
        #expect(pulled["pulled"] as? Int == 2, "\(pulled)")
        var names = Set(fixture.grants.keys).subtracting(["renamed"]).union(["from-new-machine"])
        #expect(try a.listedNames().names == names)
        #expect(same(try a.run("token", "from-new-machine").stdout, "new-machine-token"))

        // And back.
        #expect(try a.run("import", "from-fixture-vault", stdin: Home.tokenJSON("fixture-vault-token")).status == 0)
        #expect(try a.run("rename", "second", "second-renamed").status == 0)
        _ = try sync(a)
        _ = try sync(c)
        names = names.subtracting(["second"]).union(["from-fixture-vault", "second-renamed"])
        #expect(try c.listedNames().names == names)
        #expect(same(try c.run("token", "from-fixture-vault").stdout, "fixture-vault-token"))
        let second = try #require(fixture.grants["second"]?["access_token"] as? String)
        #expect(same(try c.run("token", "second-renamed").stdout, second))
        #expect(try servers.counts() == (0, 0), "no refresh was needed")
    }

    /// The fixtures written with `--later-fields` (Tests/Fixtures/README.md).
    static let withLaterFields = ["v1-b986ef6", "v1-c7bcea6", "v1-114300f", "v1-878e558"]

    @Test(
        "a grant authorized again goes with the redirect_uri and authorization_params the release stored",
        arguments: withLaterFields)
    func authorizesAgain(version: String) throws {
        let fixture = try FormatFixture(version)
        let later = try #require(fixture.manifest.later_fields, "\(version) was written with --later-fields")
        let home = try fixture.machine()
        home.extra["VAULT_KEYFILE"] = home.path + "/vault.key"
        try #require(!later.authorize_again.isEmpty)
        func query(_ value: String) -> String {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
        }
        for (name, sent) in later.authorize_again.sorted(by: { $0.key < $1.key }) {
            let before = try showJSON(home, name, reveal: true)
            // The paste flow prints the address, then finds nothing pasted
            // on stdin: nothing is stored, and no network is needed.
            let r = try home.run("add", name, "--flow", "paste", stdin: "")
            #expect(r.status == 1, "add \(name): \(r.stderr)")
            let printed = r.stdout + r.stderr
            let address = try #require(
                printed.split(whereSeparator: \.isNewline).first { $0.contains("response_type=code") },
                "add \(name) printed no authorization address: \(r.stderr)")
            #expect(address.contains("redirect_uri=" + query(sent.redirect_uri)), "add \(name): \(address)")
            for (key, value) in sent.authorization_params.sorted(by: { $0.key < $1.key }) {
                #expect(address.contains("&\(key)=\(query(value))"), "add \(name) lacks \(key): \(address)")
            }
            let after = try showJSON(home, name, reveal: true)
            #expect(Self.canonical(after) == Self.canonical(before), "add \(name) changed the grant")
        }
    }

    @Test(
        "grants for machines mint again at the endpoint, with the secret or key the release stored",
        .enabled(if: FormatFixture.portsAreFree, "the fixtures' fixed port on 127.0.0.1 is in use"),
        arguments: withLaterFields)
    func mints(version: String) throws {
        let fixture = try FormatFixture(version)
        let later = try #require(fixture.manifest.later_fields, "\(version) was written with --later-fields")
        let mint = try #require(fixture.manifest.token_endpoint.mint)
        let servers = try FixtureEndpoints(fixture)
        let home = try fixture.machine()
        home.extra["VAULT_KEYFILE"] = home.path + "/vault.key"
        try #require(Set(later.minted.values) == ["client_credentials", "jwt_bearer"])
        var minted = 0
        for (name, grantType) in later.minted.sorted(by: { $0.key < $1.key }) {
            let r = try home.run("refresh", name)
            #expect(r.status == 0, "refresh \(name): \(r.stderr)")
            minted += 1
            #expect(try servers.minted() == minted, "refresh \(name) minted no token")
            let expected =
                grantType == "client_credentials"
                ? mint.client_credentials.access_token : mint.jwt_bearer.response.access_token
            #expect(same(try home.run("token", name).stdout, expected), "token \(name)")
            let shown = try showJSON(home, name)
            #expect(shown["state"] as? String == "fresh", "\(name)")
        }
        #expect(try servers.counts() == (0, 0), "no refresh token was sent")
    }
}
