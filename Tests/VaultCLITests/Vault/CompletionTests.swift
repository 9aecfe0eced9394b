import Foundation
import Testing
import VaultTestSupport

@Suite("shell completions and the man page")
struct CompletionTests {
    let home = Home()

    init() throws {
        try home.initKeyfileVault()
        #expect(try home.run("import", "work-mail", stdin: #"{"access_token":"a","provider":"p"}"#).status == 0)
    }

    func script(_ shell: String) throws -> String {
        let r = try home.run("completion", shell)
        try #require(r.status == 0)
        return r.stdout
    }

    /// Runs a shell with vault on PATH and the test home's environment.
    func shell(_ program: String, _ args: [String]) throws -> ProcessResult {
        var env = home.environment
        env["PATH"] = URL(fileURLWithPath: VaultProcess.binary).deletingLastPathComponent().path + ":/usr/bin:/bin"
        return try VaultProcess.start(args, environment: env, executable: program).wait()
    }

    @Test("bash completes commands, options and grant names")
    func bash() throws {
        home.write(home.path + "/c.bash", try script("bash"))
        func complete(_ words: [String]) throws -> [String] {
            let list = words.map { "'\($0)'" }.joined(separator: " ")
            let r = try shell(
                "/bin/bash",
                [
                    "-c",
                    "source \(home.path)/c.bash; COMP_WORDS=(\(list)); COMP_CWORD=\(words.count - 1); _vault; printf '%s\\n' \"${COMPREPLY[@]}\"",
                ])
            #expect(r.status == 0, "\(r.stderr)")
            return r.stdout.split(separator: "\n").map(String.init)
        }
        #expect(try complete(["vault", "to"]) == ["token"])
        #expect(try complete(["vault", "token", "--fo"]) == ["--force-refresh"])
        #expect(try complete(["vault", "token", "wo"]) == ["work-mail"])
        #expect(try complete(["vault", "add", "git"]).sorted() == ["github", "gitlab"])
    }

    /// Word lists bash offers: the command line so far, the word being completed last.
    static let bashCases: [([String], [String])] = [
        (["env", "work-mail", "--format", ""], ["dotenv", "fish", "json", "sh"]),
        (["env", "--prefix", "X", "wo"], ["work-mail"]),
        (["conflicts", "resolve", "work-mail", "--keep", ""], ["current", "other"]),
        (["add", "google", "--flow", "d"], ["device"]),
        (["add", "api", "--flow", "cl"], ["client-credentials"]),
        (["git-credential", ""], ["erase", "get", "map", "store"]),
        (["git-credential", "map", "github.com", "w"], ["work-mail"]),
        (["completion", ""], ["bash", "fish", "zsh"]),
        (["conflicts", ""], ["resolve"]),
        (["conflicts", "resolve", ""], ["work-mail"]),
        (["keyslot", ""], ["add", "list", "remove"]),
        (["remote", ""], ["set"]),
        (["sign", "w"], ["work-mail"]),
        (["help", "ke"], ["keepalive", "keyslot"]),
        (["add", "work"], ["work-mail"]),
        (["token", "work-mail", ""], []),
    ]

    @Test("bash completes option values, subcommands and grant names where each belongs", arguments: bashCases)
    func bashTable(_ words: [String], _ expected: [String]) throws {
        home.write(home.path + "/c.bash", try script("bash"))
        let list = (["vault"] + words).map { "'\($0)'" }.joined(separator: " ")
        let r = try shell(
            "/bin/bash",
            [
                "-c",
                "source \(home.path)/c.bash; COMP_WORDS=(\(list)); COMP_CWORD=\(words.count); _vault; printf '%s\\n' \"${COMPREPLY[@]}\"",
            ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").map(String.init).sorted() == expected)
    }

    @Test("a file name where an option takes a file")
    func files() throws {
        let r = try home.run("completion", "candidates", "--", "init", "--keyfile", "")
        #expect(r.stdout == "files\n")
        for option in ["--service-account", "--client-key-file", "--client-secret-file"] {
            #expect(try home.run("completion", "candidates", "--", "add", "ci", option, "").stdout == "files\n")
        }
    }

    @Test("completion asks a running agent; on a locked vault it neither prompts nor waits")
    func locked() throws {
        let agentHome = AgentHome()
        let locked = agentHome.home
        _ = try agentHome.startWithGrant()
        let names = try locked.run("completion", "candidates", "--", "token", "")
        #expect(names.stdout == "words\ng\n", "\(names.stderr)")
        #expect(try locked.run("lock").status == 0)

        locked.write(locked.path + "/c.bash", try script("bash"))
        var env = locked.environment
        env["PATH"] = URL(fileURLWithPath: VaultProcess.binary).deletingLastPathComponent().path + ":/usr/bin:/bin"
        // On a terminal where an empty line is typed: a prompt would show,
        // read it and fail.
        func onTerminal(_ command: String) throws -> ProcessResult {
            try VaultProcess.start(
                ["-qec", command, "/dev/null"], environment: env, stdin: "\n", executable: "/usr/bin/script"
            ).wait()
        }
        let control = try onTerminal("vault list")
        #expect(control.stdout.contains("Passphrase"), "the positive control prompts: \(control.stdout)")
        let complete =
            "bash -c 'source \(locked.path)/c.bash; COMP_WORDS=(vault token \"\"); COMP_CWORD=2; _vault; echo \"offered ${#COMPREPLY[@]}\"'"
        let r = try onTerminal(complete)
        #expect(r.status == 0 && r.stdout.contains("offered 0") && !r.stdout.contains("Passphrase"), "\(r.stdout)")
    }

    @Test(
        "fish completes commands, options, option values, subcommands and grant names",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/fish")))
    func fish() throws {
        home.write(home.path + "/c.fish", try script("fish"))
        let r = try shell(
            "/usr/bin/fish",
            [
                "-c",
                "source \(home.path)/c.fish; complete -C 'vault xoa'; complete -C 'vault env --for'; complete -C 'vault env work-mail --format '; complete -C 'vault keyslot '; complete -C 'vault sign w'",
            ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("xoauth2\t") && r.stdout.contains("--format\t"))
        #expect(r.stdout.contains("\ndotenv\n") && r.stdout.contains("\nlist\n") && r.stdout.contains("work-mail"))
    }

    @Test("the zsh script is valid zsh", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/zsh")))
    func zsh() throws {
        home.write(home.path + "/_vault", try script("zsh"))
        let r = try shell("/usr/bin/zsh", ["-n", home.path + "/_vault"])
        #expect(r.status == 0, "\(r.stderr)")
    }

    @Test("docs/vault.1 is the man page the commands generate (vault completion man > docs/vault.1)")
    func manPage() throws {
        let committed = try String(
            contentsOf: FixtureServer.root.appendingPathComponent("docs/vault.1"), encoding: .utf8)
        #expect(committed == (try script("man")))
    }

    @Test("an unknown shell is a usage error")
    func unknown() throws {
        let r = try home.run("completion", "tcsh")
        #expect(r.status == 64)
    }
}
