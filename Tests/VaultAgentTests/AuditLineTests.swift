import Foundation
import Testing

@testable import VaultAgent
@testable import VaultCore

@Suite("audit lines written without JSONEncoder")
struct AuditLineTests {
    /// What `JSONEncoder` makes of the entry, as the log was written before.
    static func encoded(_ entry: AuditEntry) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(entry))
    }

    static let awkward = [
        "", "plain", "quote \" and back\\slash", "/usr/bin/a/b", "tab\tnew\nline\r",
        "\u{0}\u{1}\u{7}\u{8}\u{b}\u{c}\u{1f}",
        "\u{7f} del", "é ü 日本 🙂 \u{200b} \u{2028} \u{2029}", "e\u{301}", "{\"grant\":\"x\"}",
    ]

    @Test("every field, present or absent, with awkward strings, reads back and matches JSONEncoder byte for byte")
    func matchesEncoder() throws {
        let peers = [
            AgentPeer(origin: .local, uid: 1000, pid: 4242, executable: "/usr/bin/git"),
            AgentPeer(origin: .forwarded, uid: 0, pid: nil, executable: nil),
        ]
        for (n, text) in Self.awkward.enumerated() {
            for peer in peers {
                for outcome in [AuditEntry.Outcome.allowed, .confirmed, .denied, .notConfirmed, .failed] {
                    let claims = n % 2 == 0 ? RequesterClaims(host: text, command: text, uid: 7, pid: 99) : nil
                    var entry = AuditEntry(
                        time: Date(epochSeconds: 1_765_000_000 + Int64(n)), grant: "g" + text, peer: peer,
                        claimed: claims, outcome: outcome, reason: n % 3 == 0 ? nil : text,
                        request: n % 4 == 0 ? "GET https://api.example/" + text : nil)
                    if n == 1 { entry.executable = text }
                    let line = entry.line
                    #expect(line == (try Self.encoded(entry)), "\(String(decoding: line, as: UTF8.self))")
                    #expect(try JSONDecoder().decode(AuditEntry.self, from: Data(line)) == entry)
                    #expect(!line.contains(0x0a))
                }
            }
        }
    }

    @Test("appended lines read back, one entry each")
    func appendsAndReads() throws {
        let directory = NSTemporaryDirectory() + "vault-audit-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(directory, 0o700)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = AuditLog(directory: directory)
        for text in Self.awkward {
            #expect(
                log.append(
                    AuditEntry(
                        time: Date(epochSeconds: 5), grant: text, peer: .thisUser, claimed: nil, outcome: .allowed,
                        reason: text)) == nil)
        }
        let (entries, unreadable) = try log.read()
        #expect(unreadable == 0)
        #expect(entries.map(\.grant) == Self.awkward)
    }
}
