import Foundation
import Glibc
import Testing
import VaultKit
import VaultTestSupport

/// True when `text` holds a C0 or C1 control, DEL, or a bidirectional
/// override or isolate: what must never reach a terminal raw.
func hasRawControls(_ text: String, allowingNewlines: Bool = true) -> Bool {
    text.unicodeScalars.contains { s in
        if allowingNewlines && s == "\n" { return false }
        switch s.value {
        case 0x00...0x1f, 0x7f...0x9f, 0x202a...0x202e, 0x2066...0x2069: return true
        default: return false
        }
    }
}

/// Imports a grant whose provider and account carry `hostile` (as JSON
/// string text), the way an ID token, a userinfo answer or a synced record
/// could.
func hostileHome(_ hostile: String) throws -> Home {
    let home = Home()
    try home.initKeyfileVault()
    let json =
        #"{"access_token":"tok","refresh_token":"r","expires_in":3600,"provider":"p\#(hostile)","account":"a\#(hostile)"}"#
    let r = try home.run("import", "g", stdin: json)
    precondition(r.status == 0, r.stderr)
    #expect(!hasRawControls(r.stderr), "import: \(r.stderr.debugDescription)")
    return home
}

@Suite("text from outside, shown to a person")
struct EscapingTests {
    /// JSON text of the hostile characters, and how vault must show them.
    static let cases: [(json: String, shown: String)] = [
        (#"\u001b[2J\u001b]0;owned\u0007"#, #"\u{1b}[2J\u{1b}]0;owned\u{7}"#),
        (#"\r"#, #"\u{d}"#),
        (#"\u0000"#, #"\u{0}"#),
        (#"\u009b31m"#, #"\u{9b}31m"#),
        (#"\u007f"#, #"\u{7f}"#),
        ("\u{202E}gpj.exe", #"\u{202e}gpj.exe"#),
        ("\u{2066}x\u{2069}", #"\u{2066}x\u{2069}"#),
        (#"\nforged  row  fresh"#, #"\u{a}forged  row  fresh"#),
        (#"\t"#, #"\u{9}"#),
    ]

    @Test("list, show and import escape controls, C1 and bidi characters", arguments: cases)
    func listShowImport(_ c: (json: String, shown: String)) throws {
        let home = try hostileHome(c.json)
        let list = try home.run("list")
        #expect(list.status == 0)
        #expect(!hasRawControls(list.stdout), "\(list.stdout.debugDescription)")
        #expect(list.stdout.split(separator: "\n").count == 2, "one header and one row")
        #expect(list.stdout.contains("a" + c.shown), "\(list.stdout)")
        let show = try home.run("show", "g")
        #expect(!hasRawControls(show.stdout), "\(show.stdout.debugDescription)")
        #expect(show.stdout.contains("account:        a" + c.shown + "\n"), "\(show.stdout)")
        #expect(show.stdout.contains("provider:       p" + c.shown + "\n"), "\(show.stdout)")
        // Machine output keeps the value exact, in its own (JSON) grammar.
        let json = try home.run("show", "g", "--json")
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let exact = try JSONSerialization.jsonObject(with: Data(#"["a\#(c.json)"]"#.utf8)) as? [String]
        #expect(object?["account"] as? String == exact?.first)
    }

    @Test("error messages escape what they quote", arguments: cases)
    func errors(_ c: (json: String, shown: String)) throws {
        let home = try hostileHome(c.json)
        // The provider has no configuration: refreshing names it in the error.
        let r = try home.run("refresh", "g")
        #expect(r.status != 0)
        #expect(!hasRawControls(r.stderr), "\(r.stderr.debugDescription)")
        // A mapping's host, quoted back.
        let map = try home.run("git-credential", "map", "h\u{1b}]0;x\u{7}", "g")
        #expect(!hasRawControls(map.stderr), "\(map.stderr.debugDescription)")
    }

    @Test("a suggested grant name is escaped: an app's name may hold bidi characters")
    func suggestedNames() throws {
        let home = Home()
        home.extra["VAULT_AGENT"] = "off"
        try home.initKeyfileVault()
        // The command line only types plain names; an app (or another
        // machine, through sync) may store any name without controls.
        let secret = try SecureBytes(copying: Array(Data(contentsOf: URL(fileURLWithPath: home.path + "/key"))))
        let vault = try Vault.open(
            at: VaultLocation(directory: home.path + "/vault", configDirectory: home.path + "/config"),
            key: .keyfile(try Keyfile.decode(secret)))
        try vault.save(TestKeys.grant(), as: "wor\u{202E}k")
        try vault.save(TestKeys.grant(), as: "work\u{2069}")
        for arguments in [["token", "work"], ["show", "work"]] {
            let r = try home.run(arguments[0], arguments[1])
            #expect(r.status == 1, "\(r.stderr)")
            #expect(!hasRawControls(r.stderr), "\(r.stderr.debugDescription)")
            #expect(
                r.stderr.hasSuffix(#"vault: hint: did you mean 'work\u{2069}' or 'wor\u{202e}k'?"# + "\n"),
                "\(r.stderr)")
        }
    }
}
