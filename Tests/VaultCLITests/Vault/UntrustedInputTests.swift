import Foundation
import Glibc
import Testing
import VaultTestSupport

/// Gives `path` to `nobody`, as if another local user had written it.
func giveToNobody(_ path: String) {
    precondition(chown(path, 65534, 65534) == 0, "chown \(path)")
}

@Suite("files another user could write")
struct UntrustedFileTests {
    @Test("a git mapping written by another user, or in a directory others can write, gives no token")
    func gitMappingFromOthers() throws {
        let home = Home()
        try home.initKeyfileVault()
        try home.run("import", "gh", stdin: Home.tokenJSON("gh-token-secret"))
        let config = home.path + "/config/vault"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        let map = config + "/git-credentials.json"
        home.write(map, #"{"evil.example":{"grant":"gh"}}"#)
        let request = "protocol=https\nhost=evil.example\n\n"
        // Positive control: our own private mapping serves the host.
        #expect(try home.run("git-credential", "get", stdin: request).stdout.contains("password=gh-token-secret"))

        chmod(map, 0o666)
        giveToNobody(map)
        let foreign = try home.run("git-credential", "get", stdin: request)
        #expect(foreign.status == 1)
        #expect(!foreign.stdout.contains("gh-token-secret"))
        #expect(foreign.stderr.contains("\(map) belongs to another user"), "\(foreign.stderr)")

        chown(map, 0, 0)
        let writable = try home.run("git-credential", "get", stdin: request)
        #expect(writable.status == 1 && !writable.stdout.contains("gh-token-secret"))
        #expect(writable.stderr.contains("\(map) is writable by group or others"), "\(writable.stderr)")
        #expect(writable.stderr.contains("chmod go-w \(map)"), "\(writable.stderr)")

        chmod(map, 0o600)
        chmod(config, 0o777)
        let openDirectory = try home.run("git-credential", "get", stdin: request)
        #expect(openDirectory.status == 1 && !openDirectory.stdout.contains("gh-token-secret"))
        #expect(openDirectory.stderr.contains("\(config), above \(map), is writable by other users"))
    }

    @Test("a provider file written by another user does not replace the preset's endpoints")
    func providerFileFromOthers() throws {
        let home = Home()
        let directory = home.path + "/config/vault/providers"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let file = directory + "/google.json"
        home.write(file, #"{"token_endpoint":"https://attacker.example/token"}"#)
        // Positive control: the user's own file overrides the preset.
        #expect(try home.run("providers", "--json").stdout.contains("attacker.example"))

        chmod(file, 0o666)
        giveToNobody(file)
        let r = try home.run("providers", "--json")
        #expect(r.status == 1)
        #expect(!r.stdout.contains("attacker.example"))
        #expect(r.stdout.contains("oauth2.googleapis.com"), "the preset stays usable")
        #expect(r.stderr.contains("\(file) belongs to another user"), "\(r.stderr)")
    }

    @Test("passphrase and key files of another user, or writable by others, are refused")
    func secretFilesFromOthers() throws {
        let home = Home()
        try home.initPassphraseVault("pass")
        let file = home.path + "/passphrase"
        #expect(try home.run("list").status == 0)
        chmod(file, 0o622)
        // File errors (exit 1), as for every file given to vault; 77 is a key that does not open it.
        let writable = try home.run("list")
        #expect(writable.status == 1)
        #expect(writable.stderr.contains("\(file) is writable by group or others"), "\(writable.stderr)")
        chmod(file, 0o600)
        giveToNobody(file)
        let foreign = try home.run("list")
        #expect(foreign.status == 1)
        #expect(foreign.stderr.contains("\(file) belongs to another user"), "\(foreign.stderr)")
    }
}

@Suite("the vault's own files")
struct VaultFileTests {
    @Test("a vault.db others can read is reported, not tightened quietly")
    func readableByOthers() throws {
        let home = Home()
        try home.initKeyfileVault()
        chmod(home.vaultFile, 0o644)
        let r = try home.run("list")
        #expect(r.status == 1)
        #expect(r.stderr.contains("\(home.vaultFile) is readable by group or others (mode 0644)"), "\(r.stderr)")
        #expect(r.stderr.contains("chmod 600 \(home.vaultFile)"))
        var st = stat()
        stat(home.vaultFile, &st)
        #expect(st.st_mode & 0o777 == 0o644, "left as found")
    }

    @Test("a hard-linked vault.db is refused")
    func hardLink() throws {
        let home = Home()
        try home.initKeyfileVault()
        #expect(try home.run("list").status == 0)
        link(home.vaultFile, home.path + "/copy.db")
        let r = try home.run("list")
        #expect(r.status == 1)
        #expect(r.stderr.contains("\(home.vaultFile) has 2 hard links"), "\(r.stderr)")
    }

    @Test("a vault under a directory others can write is refused; a sticky one (like /tmp) is not")
    func worldWritableParent() throws {
        let home = Home()
        let open = home.path + "/open"
        mkdir(open, 0o777)
        chmod(open, 0o777)
        home.extra["VAULT_HOME"] = open + "/vault"
        let r = try home.run("init", "--keyfile", home.path + "/key")
        #expect(r.status == 1)
        #expect(r.stderr.contains("\(open), above \(open)/vault, is writable by other users"), "\(r.stderr)")
        chmod(open, 0o1777)
        home.extra["VAULT_KEYFILE"] = home.path + "/key2"
        #expect(try home.run("init", "--keyfile", home.path + "/key2").status == 0)
        #expect(try home.run("list").status == 0)
        chmod(open, 0o777)
        let later = try home.run("list")
        #expect(later.status == 1 && later.stderr.contains("is writable by other users"), "\(later.stderr)")
    }

    @Test("VAULT_HOME under a symbolically linked parent works")
    func symlinkedParent() throws {
        let home = Home()
        mkdir(home.path + "/real", 0o700)
        symlink(home.path + "/real", home.path + "/link")
        home.extra["VAULT_HOME"] = home.path + "/link/vault"
        let created = try home.run("init", "--keyfile", home.path + "/key")
        #expect(created.status == 0, "\(created.stderr)")
        home.extra["VAULT_KEYFILE"] = home.path + "/key"
        #expect(try home.run("import", "g", stdin: Home.tokenJSON("t")).status == 0)
        let r = try home.run("list")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: home.path + "/real/vault/vault.db"))
        // The vault directory itself must still not be a link.
        symlink(home.path + "/real/vault", home.path + "/real/alias")
        home.extra["VAULT_HOME"] = home.path + "/link/alias"
        let linked = try home.run("list")
        #expect(linked.status == 1 && linked.stderr.contains("symbolic links are refused"), "\(linked.stderr)")
    }

    @Test("a FIFO as VAULT_PASSPHRASE_FILE is refused at once")
    func fifoPassphrase() throws {
        let home = Home()
        try home.initPassphraseVault("pass")
        let fifo = home.path + "/fifo"
        mkfifo(fifo, 0o600)
        home.extra["VAULT_PASSPHRASE_FILE"] = fifo
        let r = try home.run("list")
        #expect(r.status == 1)
        #expect(r.stderr.contains("\(fifo) is not a regular file"), "\(r.stderr)")
    }

    @Test("a passphrase that is not UTF-8 is called that, not wrong")
    func invalidUTF8Passphrase() throws {
        let home = Home()
        try home.initPassphraseVault("pass")
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        // Only a shell can put invalid UTF-8 into a variable for us.
        let r = try VaultProcess.start(
            ["-c", "VAULT_PASSPHRASE=$(printf '\\377\\376') exec \"$0\" list", VaultProcess.binary],
            environment: home.environment, executable: "/bin/sh"
        ).wait()
        #expect(r.status == 77)
        #expect(r.stderr == "vault: error: the passphrase is not valid UTF-8 (from VAULT_PASSPHRASE)\n")
    }
}

/// A secret file given as a shell's process substitution, `<(command)`:
/// the path is a /dev/fd link to a pipe, which vault refuses, saying so.
@Suite("a pipe given as a secret file")
struct ProcessSubstitutionTests {
    /// `PIPE` in an argument or a variable becomes `<(printf %s "$S")`.
    struct Case: CustomTestStringConvertible, Sendable {
        let arguments: [String]
        var variable: String? = nil
        var vault = true
        var status: Int32 = 1
        var testDescription: String { variable.map { "\($0)=<(...)" } ?? arguments.joined(separator: " ") }
    }

    static let cases: [Case] = [
        Case(arguments: ["add", "google", "--client-secret-file", "PIPE"]),
        Case(arguments: ["import", "work", "--client-secret-file", "PIPE"]),
        Case(arguments: [
            "add", "google", "m", "--flow", "client-credentials", "--client-id", "c", "--client-secret-file", "PIPE",
        ]),
        Case(arguments: [
            "add", "google", "m", "--flow", "client-credentials", "--client-id", "c", "--client-key-file", "PIPE",
        ]),
        Case(arguments: ["add", "google", "m", "--service-account", "PIPE"]),
        Case(arguments: ["passwd", "--new-passphrase-file", "PIPE"]),
        Case(arguments: ["remote", "set", "https://127.0.0.1:9/dav", "--user", "u", "--password-file", "PIPE"]),
        // A file an unlock cannot read is a file error too (docs/cli.md, "Exit status").
        Case(arguments: ["list", "--keyfile", "PIPE"]),
        Case(arguments: ["list"], variable: "VAULT_PASSPHRASE_FILE"),
        Case(arguments: ["list"], variable: "VAULT_KEYFILE"),
        Case(
            arguments: [
                "join", "https://127.0.0.1:9/dav", "--user", "u", "--password-file", "$HOME/passphrase",
                "--pairing-code-file", "PIPE",
            ],
            vault: false),
    ]

    @Test(
        "every option that reads a secret from a file calls a pipe not a regular file, says why, and what to do",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/bin/bash"), "needs bash for <(...)"),
        arguments: cases)
    func refused(_ c: Case) throws {
        let home = Home()
        let secret = "s3cret-through-a-pipe"
        if c.vault {
            try home.initPassphraseVault("pass")
        } else {
            home.write(home.path + "/passphrase", "store password\n")
        }
        // Only a shell makes a process substitution; the secret reaches
        // printf (a builtin) through the environment, never an argv.
        let substitution = #"<(printf %s "$S")"#
        let words = c.arguments.map {
            $0 == "PIPE" ? substitution : "'\($0.replacingOccurrences(of: "$HOME", with: home.path))'"
        }
        let assignment = c.variable.map { "\($0)=\(substitution) " } ?? ""
        var environment = home.environment
        environment["S"] = secret
        let r = try VaultProcess.start(
            ["-c", "\(assignment)exec \"$0\" \(words.joined(separator: " ")) </dev/null", VaultProcess.binary],
            environment: environment, executable: "/bin/bash"
        ).wait()
        #expect(r.status == c.status, "\(r.stderr)")
        #expect(
            r.stderr.range(
                of: #"vault: error: /dev/fd/\d+ is not a regular file \(a pipe or a device could block or change\)"#,
                options: .regularExpression) != nil, "\(r.stderr)")
        #expect(!r.stderr.contains("no such file or directory"), "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: hint: write the secret to a file, or give a command's output through a *_COMMAND variable"),
            "\(r.stderr)")
        #expect(!r.stdout.contains(secret) && !r.stderr.contains(secret))
    }
}

/// A grant name that is not found: the stored names near it are suggested.
@Suite("names near one that is not found")
struct NearGrantNameTests {
    /// Every command that takes a grant name, given `wrok`.
    static let commands: [[String]] = [
        ["token", "wrok"], ["env", "wrok"], ["exec", "wrok", "--", "/bin/true"], ["header", "wrok"],
        ["xoauth2", "wrok"], ["show", "wrok"], ["refresh", "wrok"], ["check", "wrok"], ["rename", "wrok", "job"],
        ["remove", "wrok"], ["remove", "wrok", "--revoke"], ["sign", "wrok", "--url", "https://example.com/"],
        ["git-credential", "map", "git.example.com", "wrok"], ["add", "wrok"],
    ]

    @Test("through the agent too: the agent's keys open the names it suggests")
    func throughTheAgent() throws {
        let agent = AgentHome()
        // The passphrase is withheld from here on: only the agent opens the vault.
        _ = try agent.startWithGrant()
        #expect(try agent.home.run("import", "work", stdin: Home.tokenJSON("token-two")).status == 0)
        for arguments in Self.commands {
            let r = try VaultProcess.run(arguments, environment: agent.home.environment)
            #expect(r.status == 1, "\(arguments): \(r.stderr)")
            #expect(r.stderr.contains("vault: hint: did you mean 'work'?\n"), "\(arguments): \(r.stderr)")
        }
        // The agent held the keys: nothing asked for a passphrase.
        #expect(try agent.agentPID() != nil)
    }
}
