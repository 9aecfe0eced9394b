import Foundation
import Glibc
import Testing
import VaultKit
import VaultTestSupport

/// Long-lived processes (an app keeping its store open, the agent) beside
/// many short ones. Closing any descriptor of vault.db drops every POSIX
/// lock the process holds on it, SQLite's included; a short process could
/// then checkpoint and reset the WAL under the long-lived one, which went
/// on reading a frozen snapshot and writing where no one else looked.
@Suite("long-lived processes beside short ones")
struct LongLivedProcessTests {
    /// `PRAGMA integrity_check` of a vault file, by Debian's sqlite3.
    static func integrity(_ file: String) throws -> String {
        let r = try VaultProcess.start(
            [file, "PRAGMA integrity_check"], environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/sqlite3"
        ).wait()
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) + r.stderr
    }

    static let hasSQLiteShell = FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3")

    @Test(
        "an app's open store sees every write of other processes, and they see every save of the app",
        .enabled(if: hasSQLiteShell, "needs Debian's sqlite3 to check the file's integrity"))
    func appBesideCommands() async throws {
        let home = Home()
        home.extra["VAULT_AGENT"] = "off"
        try home.initKeyfileVault()
        let provider = try CountedProvider()
        try provider.importGrant("g", into: home)
        let location = VaultLocation(directory: home.path + "/vault", configDirectory: home.path + "/config")
        let keyText = try SecureBytes(copying: Array(Data(contentsOf: URL(fileURLWithPath: home.path + "/key"))))
        let key = KeySource.keyfile(try Keyfile.decode(keyText))
        let store = try await VaultGrantStore.open(at: location, key: key)

        // One refresh at the provider, however many ask at once: the app
        // and three commands.
        async let fromApp = store.freshGrant("g", minimumValidity: 60, forceRefresh: false, transport: CurlTransport())
        let commands = try (0..<3).map { _ in try home.start("token", "g") }
        let appToken = try await fromApp.grant.accessToken
        for c in commands {
            let r = c.wait()
            #expect(r.status == 0 && r.stdout == appToken.map { $0 + "\n" }, "\(r.stderr)")
        }
        #expect(try provider.refreshes() == 1)

        for i in 0..<12 {
            // The app saves; a second handle of the app's own is opened and
            // closed (another thread's connection, or a reopened store).
            try await store.save(TestKeys.grant(token: "app-\(i)"), as: "app")
            _ = try Vault.open(at: location, key: key)
            // A short process reads what the app saved...
            let read = try home.run("token", "app")
            #expect(read.status == 0 && read.stdout == "app-\(i)\n", "round \(i): \(read.stdout) \(read.stderr)")
            // ...and writes what the app must see.
            let imported = try home.run("import", "cli-\(i)", stdin: Home.tokenJSON("cli-\(i)"))
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(try await store.retrieve("cli-\(i)").accessToken == "cli-\(i)", "round \(i)")
            #expect(try await store.retrieve("app").accessToken == "app-\(i)", "round \(i)")
            _ = try home.run("list")
        }
        #expect(try await store.names().count == 14)
        #expect(try provider.refreshes() == 1)
        _ = consume store
        #expect(try Self.integrity(home.vaultFile) == "ok")
    }

    @Test(
        "an agent serving requests beside direct commands reads every import, and loses none at lock",
        .enabled(if: hasSQLiteShell, "needs Debian's sqlite3 to check the file's integrity"))
    func agentBesideDirectCommands() throws {
        let a = AgentHome()
        _ = try a.startWithGrant()
        let home = a.home
        // The same vault opened directly, beside the agent.
        var direct = home.extra
        direct["VAULT_AGENT"] = "off"
        direct["VAULT_PASSPHRASE_FILE"] = home.path + "/passphrase"
        func runDirect(_ args: String..., stdin: String? = nil) throws -> ProcessResult {
            try VaultProcess.run(
                args, environment: VaultProcess.environment(home: home.path, extra: direct), stdin: stdin)
        }
        for i in 0..<21 {
            let name = "p\(i % 7)"
            let imported = try home.run("import", name, "--replace", stdin: Home.tokenJSON("t\(i)"))
            #expect(imported.status == 0, "\(imported.stderr)")
            // A short process opens and closes the file directly.
            let listed = try runDirect("list")
            #expect(listed.status == 0, "\(listed.stderr)")
            let viaAgent = try home.run("token", name)
            #expect(viaAgent.status == 0 && viaAgent.stdout == "t\(i)\n", "round \(i): \(viaAgent.stderr)")
            let viaFile = try runDirect("token", name)
            #expect(viaFile.stdout == "t\(i)\n", "round \(i): \(viaFile.stderr)")
            if i % 5 == 4 {
                #expect(try runDirect("import", "d\(i)", stdin: Home.tokenJSON("d\(i)")).status == 0)
                #expect(try home.run("token", "d\(i)").stdout == "d\(i)\n", "round \(i)")
                #expect(try home.run("remove", "d\(i)").status == 0)
                #expect(try runDirect("token", "d\(i)").status == 1, "round \(i): removed through the agent")
            }
        }
        #expect(try home.run("lock").status == 0)
        let names = try VaultProcess.run(
            ["list", "--json"], environment: VaultProcess.environment(home: home.path, extra: direct))
        for i in 0..<7 { #expect(names.stdout.contains(#""p\#(i)""#), "\(names.stdout)") }
        #expect(try runDirect("token", "p6").stdout == "t20\n")
        #expect(try Self.integrity(home.vaultFile) == "ok")
    }
}
