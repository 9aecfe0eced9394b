import Foundation
import Testing
import VaultTestSupport

/// Runs the transcripts in Transcripts/*.txt against the built binary.
///
/// Format, one directive a line:
///   `# ...`              comment
///   `file PATH` ... `end` write the lines between into PATH (mode 0600)
///   `env K=V` / `unset K` set or drop a variable for the commands that follow
///   `< TEXT`             a line of standard input for the next command
///   `$ vault ARGS`       run the command (arguments split on spaces; 'single quotes' group)
///   `> TEXT` / `2> TEXT` an expected line of stdout / stderr; `{*}` matches any text
///   `? N`                the expected exit status (0 when absent)
/// `$HOME` stands for the transcript's private home directory everywhere.
struct Transcript {
    struct Step {
        var line: Int
        var arguments: [String]
        var stdin: [String] = []
        var stdout: [String] = []
        var stderr: [String] = []
        var status: Int32 = 0
        var environment: [String: String]
        var files: [(String, String)] = []
    }

    let name: String
    let steps: [Step]

    static func all() throws -> [Transcript] {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Transcripts")
        return try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".txt") }.sorted()
            .map { try Transcript(name: $0, text: String(contentsOf: dir.appendingPathComponent($0), encoding: .utf8)) }
    }

    init(name: String, text: String) throws {
        self.name = name
        var steps: [Step] = []
        var env: [String: String] = [:]
        var pendingStdin: [String] = []
        var pendingFiles: [(String, String)] = []
        var fileTarget: String? = nil
        var fileLines: [String] = []
        for (number, raw) in text.components(separatedBy: "\n").enumerated() {
            if let target = fileTarget {
                if raw == "end" {
                    pendingFiles.append((target, fileLines.joined(separator: "\n") + "\n"))
                    fileTarget = nil
                    fileLines = []
                } else {
                    fileLines.append(raw)
                }
                continue
            }
            if raw.isEmpty || raw.hasPrefix("#") { continue }
            if raw.hasPrefix("file ") {
                fileTarget = String(raw.dropFirst(5))
            } else if raw.hasPrefix("env ") {
                let pair = raw.dropFirst(4)
                let eq = pair.firstIndex(of: "=")!
                env[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
            } else if raw.hasPrefix("unset ") {
                env[String(raw.dropFirst(6))] = nil
            } else if raw.hasPrefix("< ") || raw == "<" {
                pendingStdin.append(String(raw.dropFirst(2)))
            } else if raw.hasPrefix("$ vault") {
                var step = Step(
                    line: number + 1, arguments: Transcript.split(String(raw.dropFirst(7))), environment: env)
                step.stdin = pendingStdin
                step.files = pendingFiles
                pendingStdin = []
                pendingFiles = []
                steps.append(step)
            } else if raw.hasPrefix("> ") || raw == ">" {
                steps[steps.count - 1].stdout.append(String(raw.dropFirst(2)))
            } else if raw.hasPrefix("2> ") {
                steps[steps.count - 1].stderr.append(String(raw.dropFirst(3)))
            } else if raw.hasPrefix("? ") {
                steps[steps.count - 1].status = Int32(raw.dropFirst(2))!
            } else {
                throw TranscriptError(message: "\(name):\(number + 1): cannot parse '\(raw)'")
            }
        }
        self.steps = steps
    }

    static func split(_ text: String) -> [String] {
        var out: [String] = []
        var current = ""
        var quoted = false
        var any = false
        for c in text {
            if c == "'" {
                quoted.toggle()
                any = true
            } else if c == " " && !quoted {
                if any || !current.isEmpty { out.append(current) }
                current = ""
                any = false
            } else {
                current.append(c)
            }
        }
        if any || !current.isEmpty { out.append(current) }
        return out
    }

    /// Matches a line against a pattern in which `{*}` stands for any text.
    static func matches(_ line: String, _ pattern: String) -> Bool {
        let parts = pattern.components(separatedBy: "{*}")
        guard parts.count > 1 else { return line == pattern }
        guard line.hasPrefix(parts[0]), line.hasSuffix(parts.last!) else { return false }
        var rest = line.dropFirst(parts[0].count)
        for part in parts.dropFirst().dropLast() {
            guard let r = rest.range(of: part) else { return false }
            rest = rest[r.upperBound...]
        }
        return rest.count >= parts.last!.count
    }
}

struct TranscriptError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

@Suite("CLI transcripts")
struct TranscriptTests {
    @Test("transcript", arguments: try Transcript.all().map(\.name))
    func run(name: String) throws {
        let transcript = try Transcript.all().first { $0.name == name }!
        let home = TemporaryDirectory()
        func expand(_ s: String) -> String { s.replacingOccurrences(of: "$HOME", with: home.path) }
        for step in transcript.steps {
            for (path, content) in step.files {
                let p = expand(path)
                try FileManager.default.createDirectory(
                    atPath: (p as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                _ = FileManager.default.createFile(
                    atPath: p, contents: Data(expand(content).utf8), attributes: [.posixPermissions: 0o600])
            }
            let env = VaultProcess.environment(home: home.path, extra: step.environment.mapValues(expand))
            let stdin = step.stdin.isEmpty ? nil : step.stdin.map(expand).joined(separator: "\n") + "\n"
            let result = try VaultProcess.run(step.arguments.map(expand), environment: env, stdin: stdin)
            let where_ = "\(name):\(step.line) vault \(step.arguments.joined(separator: " "))"
            #expect(result.status == step.status, "\(where_)\n\(result.stderr)")
            let out = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
            let err = result.stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
            let wantOut = step.stdout.map(expand)
            let wantErr = step.stderr.map(expand)
            #expect(
                out.count == wantOut.count && zip(out, wantOut).allSatisfy(Transcript.matches),
                "\(where_) stdout:\n\(result.stdout)")
            #expect(
                err.count == wantErr.count && zip(err, wantErr).allSatisfy(Transcript.matches),
                "\(where_) stderr:\n\(result.stderr)")
        }
    }
}
