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

    @Test("fish completes commands and options")
    func fish() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/fish") else { return }
        home.write(home.path + "/c.fish", try script("fish"))
        let r = try shell(
            "/usr/bin/fish",
            ["-c", "source \(home.path)/c.fish; complete -C 'vault xoa'; complete -C 'vault env --for'"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("xoauth2\t") && r.stdout.contains("--format\t"))
    }

    @Test("the zsh script is valid zsh")
    func zsh() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/zsh") else { return }
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
