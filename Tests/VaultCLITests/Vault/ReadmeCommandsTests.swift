import Foundation
import Testing

@testable import VaultCLI

/// README.md's "Status" list names every command `vault help` lists, so a
/// new command cannot go unmentioned there.
@Suite("README's list of commands")
struct ReadmeCommandsTests {
    @Test("every command of 'vault help' is in README.md's Status list")
    func everyCommandListed() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../../README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        let start = try #require(text.range(of: "## Status\n"))
        let end = text.range(of: "\n## ", range: start.upperBound..<text.endIndex)?.lowerBound ?? text.endIndex
        let status = text[start.upperBound..<end]
        let missing = Commands.all.map(\.name).filter { name in
            !status.contains("`\(name)`") && !status.contains("`\(name) ")
        }
        #expect(missing.isEmpty, "README.md's Status list lacks \(missing)")
    }
}
