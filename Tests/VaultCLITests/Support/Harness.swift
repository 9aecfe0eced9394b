import Foundation
import Glibc
import VaultTestSupport

/// A private home for one test, with helpers to run the binary in it.
final class Home {
    let dir = TemporaryDirectory()
    var extra: [String: String] = [:]

    var path: String { dir.path }
    var vaultFile: String { path + "/vault/vault.db" }
    var environment: [String: String] { VaultProcess.environment(home: path, extra: extra) }

    @discardableResult
    func run(_ args: String..., stdin: String? = nil) throws -> ProcessResult {
        try VaultProcess.run(args, environment: environment, stdin: stdin)
    }

    /// `run` with the arguments in an array.
    @discardableResult
    func run(_ args: [String], stdin: String? = nil) throws -> ProcessResult {
        try VaultProcess.run(args, environment: environment, stdin: stdin)
    }

    func start(_ args: String..., stdin: String? = nil) throws -> RunningProcess {
        try VaultProcess.start(args, environment: environment, stdin: stdin)
    }

    /// Gives this home a private runtime folder (`XDG_RUNTIME_DIR`, mode
    /// 0700) where an agent can listen, and lets commands use one.
    func allowAgent() {
        let runtime = path + "/run"
        mkdir(runtime, 0o700)
        extra["XDG_RUNTIME_DIR"] = runtime
        extra["VAULT_AGENT"] = nil
    }

    /// A key-file vault, the cheap unlock used by tests that run many commands.
    func initKeyfileVault() throws {
        let r = try run("init", "--keyfile", path + "/key")
        precondition(r.status == 0, r.stderr)
        extra["VAULT_KEYFILE"] = path + "/key"
    }

    /// A passphrase vault at the minimum cost the format allows.
    func initPassphraseVault(_ passphrase: String) throws {
        write(path + "/passphrase", passphrase + "\n")
        extra["VAULT_PASSPHRASE_FILE"] = path + "/passphrase"
        let r = try run("init", "--kdf-memory", "64", "--kdf-passes", "2")
        precondition(r.status == 0, r.stderr)
    }

    /// Writes $XDG_CONFIG_HOME/vault/providers/NAME.json (mode 0600) with
    /// `fields` and the name (unless `fields` names one of its own).
    func providerFile(_ name: String, _ fields: [String: Any]) throws {
        let dir = path + "/config/vault/providers"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var object = fields
        object["name"] = fields["name"] ?? name
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        _ = FileManager.default.createFile(
            atPath: dir + "/\(name).json", contents: data, attributes: [.posixPermissions: 0o600])
    }

    func write(_ file: String, _ text: String) {
        _ = FileManager.default.createFile(
            atPath: file, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
    }

    /// Every file under the home with its bytes, to prove nothing changed.
    func snapshot(_ sub: String = "/vault") -> [String: Data] {
        var out: [String: Data] = [:]
        let root = path + sub
        for name in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
            out[name] = FileManager.default.contents(atPath: root + "/" + name)
        }
        return out
    }

    static func tokenJSON(_ token: String, provider: String = "test") -> String {
        #"{"access_token":"\#(token)","refresh_token":"r-\#(token)","expires_in":3600,"provider":"\#(provider)"}"#
    }

    /// Names `vault list --json` reports, or nil if it failed.
    func listedNames() throws -> (names: Set<String>, result: ProcessResult) {
        let r = try run("list", "--json")
        guard r.status == 0, let data = r.stdout.data(using: .utf8),
            let array = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]]
        else { return ([], r) }
        return (Set(array.compactMap { $0["name"] as? String }), r)
    }
}
