import Foundation
import Testing
import VaultTestSupport

/// One `vault ... --json` run: the arguments, standard input, the exit status.
struct JSONRun: CustomTestStringConvertible, Sendable {
    let arguments: [String]
    var stdin: String? = nil
    var status: Int32 = 0

    init(_ arguments: String..., stdin: String? = nil, status: Int32 = 0) {
        (self.arguments, self.stdin, self.status) = (arguments, stdin, status)
    }

    var command: String { arguments[0] }
    var testDescription: String { "vault " + arguments.joined(separator: " ") }
}

/// Every command whose help offers `--json` prints exactly one JSON
/// document and a newline on stdout; every other command refuses `--json`.
/// The list of commands comes from the binary's own help (the command
/// table), so a new command cannot go untested.
@Suite("every command that takes --json prints one JSON document and a newline")
struct JSONOutputTests {
    /// Commands run against a vault on this machine only, in this order
    /// (each run may depend on the ones before).
    static let local: [JSONRun] = [
        JSONRun("import", "work", "--json", stdin: #"{"access_token":"a","provider":"p","expires_in":3600}"#),
        JSONRun("list", "--json"),
        JSONRun("show", "work", "--json"),
        JSONRun("token", "work", "--json"),
        JSONRun("keepalive", "--json"),
        JSONRun("env", "work", "--json"),
        JSONRun("env", "work", "--format", "json"),
        JSONRun("git-credential", "map", "--json"),
        JSONRun("git-credential", "map", "git.example.com", "work", "--json"),
        JSONRun("git-credential", "map", "git.example.com", "--remove", "--json"),
        JSONRun("rename", "work", "old", "--json"),
        JSONRun("remove", "old", "--json"),
        JSONRun("keyslot", "list", "--json"),
        JSONRun("keyslot", "add", "--new-keyfile", "KEY2", "--json"),
        JSONRun("keyslot", "remove", "2", "--json"),
        JSONRun("remote", "--json"),
        JSONRun("providers", "--json"),
        JSONRun("agent", "--status", "--json", status: 77),
        JSONRun("agent", "--json"),
        JSONRun("agent", "--status", "--json"),
        JSONRun("lock", "--json"),
        JSONRun("lock", "--json"),
        JSONRun("policy", "--json"),
        JSONRun("policy", "work", "--forwarded", "allow", "--json"),
        JSONRun("policy", "work", "--json"),
        JSONRun("log", "--json"),
        JSONRun("log", "work", "--limit", "1", "--json"),
    ]

    /// Commands that need the test provider or the WebDAV store.
    static let networked: [JSONRun] = [
        JSONRun("refresh", "live", "--json"),
        JSONRun("check", "live", "--json"),
        JSONRun("doctor", "live", "--json"),
        JSONRun("remote", "set", "STORE", "--user", "vault", "--password-file", "STORE-PASSWORD", "--json"),
        JSONRun("remote", "--json"),
        JSONRun("sync", "--json"),
        JSONRun("conflicts", "--json"),
    ]

    /// Commands whose `--json` run needs a second vault, a browser or a
    /// person, tested in their own suites.
    static let elsewhere: [String: String] = [
        "add": "AddFlowTests.issuerDiscovery parses 'add --json'",
        "join": "networkedCommands runs 'join --json' from a second home",
        "init": "every test here starts with 'init --json'",
        "test": "MailLoginTests.json and .refused parse 'test --json' against Dovecot",
    ]

    let home = Home()

    /// Checks that `r` printed exactly one JSON document and a newline.
    static func expectOneDocument(_ r: ProcessResult, _ run: String) {
        #expect(r.stdout.hasSuffix("\n"), "\(run): stdout does not end with a newline")
        let parsed = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8), options: [.fragmentsAllowed])
        #expect(parsed != nil, "\(run): stdout is not one JSON document: \(r.stdout)")
    }

    func initialize(_ home: Home) throws {
        let r = try home.run("init", "--keyfile", home.path + "/key", "--json")
        try #require(r.status == 0, "\(r.stderr)")
        Self.expectOneDocument(r, "vault init --json")
        home.extra["VAULT_KEYFILE"] = home.path + "/key"
        let runtime = home.path + "/run"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: runtime)
        home.extra["XDG_RUNTIME_DIR"] = runtime
    }

    func run(_ step: JSONRun, in home: Home, replacing words: [String: String] = [:]) throws {
        let args = step.arguments.map { words[$0] ?? ($0 == "KEY2" ? home.path + "/key2" : $0) }
        let r = try VaultProcess.run(args, environment: home.environment, stdin: step.stdin)
        #expect(r.status == step.status, "\(step.testDescription): \(r.stderr)")
        Self.expectOneDocument(r, step.testDescription)
    }

    @Test("commands on this machine")
    func localCommands() throws {
        try initialize(home)
        for step in Self.local { try run(step, in: home) }
        // An agent started above is gone after 'lock'.
        #expect(try home.run("agent", "--status").status == 77)
    }

    @Test(
        "commands that talk to the provider or the store",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/glewlwyd")
                && FileManager.default.isExecutableFile(atPath: "/usr/sbin/apache2"),
            "needs glewlwyd and apache2 (Tools/setup)"))
    func networkedCommands() throws {
        let dir = TemporaryDirectory()
        let dav = try WebDAVStore(in: dir.path)
        let store = dav.url
        let password = dav.passwordFile
        let provider = try CountedProvider()
        try initialize(home)
        home.extra["VAULT_AGENT"] = "off"
        try provider.importGrant("live", into: home)
        let words = ["STORE": store, "STORE-PASSWORD": password]
        for step in Self.networked { try run(step, in: home, replacing: words) }

        let other = Home()
        other.extra["VAULT_KEYFILE"] = home.path + "/key"
        other.extra["VAULT_AGENT"] = "off"
        let joined = try other.run("join", store, "--user", "vault", "--password-file", password, "--json")
        #expect(joined.status == 0, "\(joined.stderr)")
        Self.expectOneDocument(joined, "vault join --json")
    }

    /// The commands `vault help` lists, and whether each one's help offers --json.
    func commandTable() throws -> [(name: String, json: Bool)] {
        let overview = try home.run("help").stdout
        let names = overview.components(separatedBy: "COMMANDS:\n")[1].components(separatedBy: "\n\n")[0]
            .split(separator: "\n").map { String($0.split(separator: " ")[0]) }
        return try names.map { name in
            let help = try home.run("help", name).stdout
            return (name, help.contains("\n  --json "))
        }
    }

    @Test("the tables above cover every command that offers --json; the others refuse it")
    func coverage() throws {
        try home.initKeyfileVault()
        let table = try commandTable()
        #expect(table.count > 20)
        let covered = Set((Self.local + Self.networked).map(\.command)).union(Self.elsewhere.keys)
        for (name, json) in table {
            if json {
                #expect(covered.contains(name), "'vault \(name)' offers --json but no run here prints it")
            } else {
                #expect(!covered.contains(name), "'vault \(name)' is tested with --json but does not offer it")
                let r = try home.run(name, "--json")
                #expect(r.status == 64 && r.stdout.isEmpty, "'vault \(name) --json': \(r.stderr)")
            }
        }
        // The protocol git reads is never JSON.
        let r = try home.run("git-credential", "get", "--json", stdin: "protocol=https\nhost=x\n\n")
        #expect(r.status == 64 && r.stdout.isEmpty)
    }
}
