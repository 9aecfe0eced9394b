import Foundation
import Testing
import VaultTestSupport

/// Docker Compose's env_file syntax, as its documentation states it
/// (docs.docker.com/compose/environment-variables/env-file/, "Syntax"), for
/// checking `vault env --format dotenv` without Docker. Compose itself is
/// not run: what the page does not state is refused here, never guessed.
///
/// - Each line is one `VAR=VAL` pair; lines starting with `#` and blank
///   lines are ignored.
/// - Single-quoted values are used literally; `\'` is a quote.
/// - Double-quoted values decode `\n`, `\r`, `\t`, `\\` and `\"`, and are
///   interpolated (`$VAR`, `${VAR}`).
/// - A comment after a quoted value follows the closing quote.
/// - Unquoted values are interpolated and end at ` #`.
enum ComposeEnvFile {
    struct Unreadable: Error, CustomStringConvertible {
        let description: String
    }

    static func read(_ text: String) throws -> [String: String] {
        var out: [String: String] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let eq = line.firstIndex(of: "=") else { throw Unreadable(description: "no '=' in \(line)") }
            let key = String(line[..<eq])
            out[key] = try value(Array(line[line.index(after: eq)...]), key: key)
        }
        return out
    }

    private static func value(_ chars: [Character], key: String) throws -> String {
        guard let quote = chars.first, quote == "'" || quote == "\"" else {
            // Unquoted values are interpolated; vault never writes them.
            throw Unreadable(description: "\(key): unquoted value")
        }
        var result = ""
        var i = 1
        while i < chars.count {
            let c = chars[i]
            if c == quote { break }
            if c == "\\" && i + 1 < chars.count {
                let next = chars[i + 1]
                if quote == "'" {
                    if next == "'" {
                        result.append("'")
                        i += 2
                        continue
                    }
                } else {
                    let decoded: [Character: Character] = ["n": "\n", "r": "\r", "t": "\t", "\\": "\\", "\"": "\""]
                    guard let d = decoded[next] else {
                        throw Unreadable(description: "\(key): undocumented escape \\\(next)")
                    }
                    result.append(d)
                    i += 2
                    continue
                }
            }
            if quote == "\"" && c == "$" { throw Unreadable(description: "\(key): '$' is interpolated") }
            result.append(c)
            i += 1
        }
        guard i < chars.count else { throw Unreadable(description: "\(key): no closing quote") }
        let rest = String(chars[(i + 1)...]).trimmingCharacters(in: .whitespaces)
        guard rest.isEmpty || rest.hasPrefix("#") else { throw Unreadable(description: "\(key): text after the quote") }
        return result
    }
}

/// One grant whose values need quoting.
struct DotenvCase: CustomTestStringConvertible, Sendable {
    let label: String
    let token: String
    let account: String
    let scope: String
    var testDescription: String { label }
}

@Suite("vault env --format dotenv reads back byte for byte")
struct DotenvTests {
    static let cases: [DotenvCase] = [
        DotenvCase(label: "dollars and backticks", token: "tok$1`x`$(id)", account: "o'brien \"q\" #x", scope: "a b"),
        DotenvCase(label: "${HOME} and spaces", token: "${HOME}$HOME", account: "sp ace # hash", scope: "${X:-y}"),
        DotenvCase(label: "lone backslashes", token: "a\\b\\$c", account: "\\n\\t \\ x", scope: "x y"),
        DotenvCase(label: "doubled and trailing backslashes", token: "a\\\\b", account: "it\\'s end\\", scope: "end"),
        DotenvCase(label: "line breaks and quotes", token: "q\"'`", account: "line\nbreak\r", scope: "#"),
    ]

    /// Values no quoting serves for both readers.
    static let refused: [DotenvCase] = [
        DotenvCase(label: "'$' and a line break", token: "t", account: "$A\nB", scope: ""),
        DotenvCase(label: "'$' and a doubled backslash", token: "$x\\\\y", account: "a", scope: ""),
    ]

    /// A python3 that has python-dotenv (Tools/setup installs it with pip).
    static let python: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = ["/usr/bin/python3"] + path.split(separator: ":").map { "\($0)/python3" }
        return candidates.first { candidate in
            guard FileManager.default.isExecutableFile(atPath: candidate),
                let p = try? VaultProcess.start(
                    ["-c", "import dotenv"], environment: ["PATH": path], executable: candidate)
            else { return false }
            return p.wait().status == 0
        }
    }()

    let home = Home()

    init() throws {
        try home.initKeyfileVault()
    }

    func importGrant(_ c: DotenvCase) throws {
        let object = ["access_token": c.token, "account": c.account, "scope": c.scope, "provider": "test"]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
        let r = try home.run("import", "work", "--replace", stdin: json)
        try #require(r.status == 0, "\(r.stderr)")
    }

    /// The values as `vault env --format json` gives them.
    func expected() throws -> [String: String] {
        let r = try home.run("env", "work", "--format", "json")
        try #require(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: String])
    }

    /// python-dotenv's reading of `file`: (interpolate=False, the default).
    func pythonDotenv(_ file: String, python: String) throws -> (literal: [String: String], default: [String: String]) {
        let script = """
            import json, sys
            from dotenv import dotenv_values
            print(json.dumps([dotenv_values(sys.argv[1], interpolate=False), dotenv_values(sys.argv[1])]))
            """
        let r = try VaultProcess.start(
            ["-c", script, file], environment: ["HOME": home.path, "PATH": "/usr/bin:/bin"], executable: python
        ).wait()
        try #require(r.status == 0, "\(r.stderr)")
        let both = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: String]])
        return (both[0], both[1])
    }

    func dotenv() throws -> (ProcessResult, String) {
        let r = try home.run("env", "work", "--format", "dotenv")
        let file = home.path + "/work.env"
        home.write(file, r.stdout)
        return (r, file)
    }

    @Test("Docker Compose's documented env_file rules read the values back", arguments: cases)
    func compose(_ c: DotenvCase) throws {
        try importGrant(c)
        let (r, _) = try dotenv()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try ComposeEnvFile.read(r.stdout) == (try expected()))
    }

    @Test(
        "python-dotenv reads the values back", .enabled(if: python != nil, "needs python-dotenv (Tools/setup)"),
        arguments: cases)
    func pythonDotenv(_ c: DotenvCase) throws {
        try importGrant(c)
        let (r, file) = try dotenv()
        #expect(r.status == 0, "\(r.stderr)")
        let want = try expected()
        let read = try pythonDotenv(file, python: try #require(Self.python))
        #expect(read.literal == want)
        // python-dotenv expands ${NAME} in any value; vault says so exactly then.
        let expands = want.values.contains { $0.contains("${") && $0.contains("}") }
        #expect((read.default == want) == !expands)
        #expect(r.stderr.contains("which python-dotenv expands") == expands, "\(r.stderr)")
    }

    @Test("a value no quoting serves for both readers is refused", arguments: refused)
    func refusal(_ c: DotenvCase) throws {
        try importGrant(c)
        let (r, _) = try dotenv()
        #expect(r.status == 1 && r.stdout.isEmpty)
        #expect(r.stderr.contains("no dotenv quoting reads back the same"))
    }
}
