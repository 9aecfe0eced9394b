import Foundation
import Testing
import VaultTestSupport

@testable import VaultCLI

/// Each command's usage line comes from its declarations and names every
/// option it documents; docs/cli.md's headings are those lines, written by
/// `Tools/docs/usage`.
@Suite("usage lines: from the declarations, in help and in docs/cli.md")
struct UsageLineTests {
    @Test("every command's usage line names each option of its own (the shared ones are in every command's help)")
    func everyOptionInUsage() {
        for command in Commands.all {
            let usage = command.usage
            let expected = command.documentedOptions.map { "--" + $0.name }
            let missing = expected.filter { option in
                !usage.split(whereSeparator: { " []|.\n".contains($0) }).contains { $0 == option }
            }
            #expect(missing.isEmpty, "vault \(command.name)'s usage line leaves out \(missing): \(usage)")
        }
    }

    /// The `### \`vault ...\`` headings of docs/cli.md, each a list of
    /// usage lines in code spans.
    static func headings() throws -> [[String]] {
        let text = try String(
            contentsOf: FixtureServer.root.appendingPathComponent("docs/cli.md"), encoding: .utf8)
        return text.split(separator: "\n").filter { $0.hasPrefix("### `vault ") }.map { line in
            line.dropFirst(4).split(separator: "`").enumerated().filter { $0.offset % 2 == 0 }.map {
                String($0.element)
            }
        }
    }

    @Test("docs/cli.md gives each command a heading of its usage lines, as Tools/docs/usage writes them")
    func docsHeadings() throws {
        let headed = try Self.headings()
        for command in Commands.all {
            let lines = command.usage.split(separator: "\n").map { "vault " + $0 }
            let found = headed.filter { spans in spans.allSatisfy { lines.contains($0) } && !spans.isEmpty }
            #expect(
                found.flatMap { $0 } == lines,
                "docs/cli.md's heading of vault \(command.name) is not its usage: run Tools/docs/usage (\(lines))")
        }
        let named = Set(Commands.all.flatMap { $0.usage.split(separator: "\n").map { "vault " + $0 } })
        for spans in headed {
            #expect(spans.allSatisfy(named.contains), "a heading no command's usage gives: \(spans)")
        }
    }
}
