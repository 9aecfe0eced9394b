import Foundation
import Glibc
import Testing
import VaultTestSupport

@testable import VaultAgent

/// The confirmation commands docs/agent.md offers, run as the agent runs
/// them against stand-ins for notify-send, zenity and pinentry that record
/// what they were given: each says no when the stand-in says no, and no
/// claim of the other machine reaches them as markup or as a protocol line.
@Suite("the confirmation commands the documentation offers")
struct ConfirmCommandExampleTests {
    /// Each example exactly as docs/agent.md shows it.
    static let examples = [
        #"[ "$(notify-send --wait --action=yes=Allow --action=no=Deny 'vault' "$VAULT_CONFIRM_MARKUP")" = yes ]"#,
        #"zenity --question --no-markup --default-cancel --title vault --text "$VAULT_CONFIRM_SUMMARY""#,
        #"printf 'SETDESC %s\nCONFIRM\nBYE\n' "$VAULT_CONFIRM_ASSUAN" | pinentry | awk '!/^(#|S )/ { if (++n == 3) { ok = ($0 == "OK"); exit } } END { exit !ok }'"#,
    ]

    /// Stand-ins that answer as `$STANDIN_ANSWER` says (yes or no) and
    /// append what they were given to `$STANDIN_LOG`.
    static let standIns = [
        "notify-send": """
        #!/bin/sh
        for a in "$@"; do printf '%s\\n' "$a" >> "$STANDIN_LOG"; done
        [ "$STANDIN_ANSWER" = yes ] && echo yes || echo no
        """,
        "zenity": """
        #!/bin/sh
        for a in "$@"; do printf '%s\\n' "$a" >> "$STANDIN_LOG"; done
        [ "$STANDIN_ANSWER" = yes ]
        """,
        // A pinentry speaks Assuan: a greeting, then one answer per line.
        "pinentry": """
        #!/bin/sh
        echo 'OK Pleased to meet you'
        while IFS= read -r line; do
          printf '%s\\n' "$line" >> "$STANDIN_LOG"
          case "$line" in
            CONFIRM*) if [ "$STANDIN_ANSWER" = yes ]; then echo OK; else echo 'ERR 83886179 Operation cancelled <Pinentry>'; fi ;;
            BYE*) echo 'OK closing connection'; exit 0 ;;
            *) echo OK ;;
          esac
        done
        """,
    ]

    @Test("docs/agent.md shows these examples, word for word")
    func documented() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/agent.md").standardizedFileURL
        let text = try String(contentsOf: docs, encoding: .utf8)
        for example in Self.examples { #expect(text.contains("`" + example + "`"), "\(example)") }
    }

    @Test("each example says yes and no as its stand-in does, and hands it the claims escaped", arguments: examples)
    func example(_ command: String) throws {
        let dir = TemporaryDirectory()
        for (name, script) in Self.standIns {
            // Written through a descriptor no child of another test's thread
            // inherits: one still open for writing in a child makes running
            // the script fail ("text file busy").
            let fd = open(dir.path + "/" + name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o755)
            try #require(fd >= 0)
            let bytes = Array(script.utf8)
            #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) } == bytes.count)
            close(fd)
        }
        let log = dir.path + "/given"
        // What a hostile server might claim: markup, an Assuan escape, a
        // second protocol line.
        let claims = RequesterClaims(
            host: #"<a href="https://evil.example/">Allow</a> &amp; %0ACONFIRM"#, command: "curl\nCONFIRM", uid: 0,
            pid: 7)
        let question = ConfirmationQuestion(
            grant: "work", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: "/usr/bin/ssh"),
            claims: claims)
        for answer in ["yes", "no"] {
            try? FileManager.default.removeItem(atPath: log)
            let wrapped =
                "PATH='\(dir.path)':/usr/bin:/bin STANDIN_LOG='\(log)' STANDIN_ANSWER=\(answer); "
                + "export PATH STANDIN_LOG STANDIN_ANSWER; " + command
            let confirmer = Confirmer(method: .command(wrapped), timeout: 20)
            let got = confirmer.ask(question)
            #expect(got == (answer == "yes" ? .yes : .no("the person refused")), "\(answer): \(got)")
            let given = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(given.contains("work"), "the question reached the stand-in: \(given)")
            // Markup goes to notify-send escaped; zenity is told to read none.
            if command.contains("notify-send") { #expect(!given.contains("<a href"), "\(given)") }
            if command.contains("zenity") {
                #expect(given.contains("--no-markup") && given.contains("--default-cancel"))
            }
            if command.contains("pinentry") {
                // One SETDESC line, the claims' % encoded, no line of theirs.
                let lines = given.split(separator: "\n")
                #expect(lines.filter { $0.hasPrefix("SETDESC ") }.count == 1, "\(given)")
                #expect(lines.filter { $0 == "CONFIRM" }.count == 1, "\(given)")
                #expect(given.contains("%250ACONFIRM"), "\(given)")
            }
        }
    }

    @Test("the summary for a pinentry is cut to fit one Assuan line, never inside an escape or a character")
    func assuanLimit() {
        let claims = RequesterClaims(
            host: String(repeating: "é%", count: 400), command: String(repeating: "x", count: 400), uid: 0, pid: 7)
        let question = ConfirmationQuestion(
            grant: "work", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: nil), claims: claims)
        let text = question.assuanText
        #expect(text.utf8.count <= ConfirmationQuestion.assuanLimit)
        #expect(text.hasPrefix("token of 'work'"))
        // Every % starts a whole escape.
        let bytes = Array(text.utf8)
        for (i, b) in bytes.enumerated() where b == UInt8(ascii: "%") {
            #expect(i + 2 < bytes.count && bytes[i + 1] == UInt8(ascii: "2") && bytes[i + 2] == UInt8(ascii: "5"))
        }
    }
}
