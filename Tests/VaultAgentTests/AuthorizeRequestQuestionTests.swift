import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

/// What the person is asked, and what the audit log keeps, when a forwarded
/// peer asks for the header fields of one request (operation 13): a
/// request is named only where a proof ties the token to it.
@Suite("operation 13's question and log entry from a forwarded peer")
struct AuthorizeRequestQuestionTests {
    static let forwarded = AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: "/usr/bin/ssh")

    /// A scene whose confirmation command writes the summary it was shown
    /// to `summary` and says `answer` (exit status).
    static func scene(answer: Int32 = 0) throws -> (AgentScene, String, TemporaryDirectory) {
        let probe = TemporaryDirectory()
        let summary = probe.path + "/summary"
        var options = AgentServer.Options()
        options.confirmCommand =
            "printf '%s\\n' \"$VAULT_CONFIRM_SUMMARY\" >> '\(summary)'; "
            + "printf 'request=%s\\n' \"${VAULT_CONFIRM_REQUEST-none}\" >> '\(summary)'; exit \(answer)"
        options.confirmTimeout = 10
        return (try AgentScene(options: options), summary, probe)
    }

    /// Gives the scene's grant a DPoP key; `tokenType` DPoP binds its access token too.
    static func bindKey(_ scene: AgentScene, tokenType: String) throws {
        let vault = try Vault.open(at: scene.dir.location, key: .keyfile(TestKeys.keyfileSecret()))
        var grant = try vault.load("work")
        grant.dpopKey = try DPoPKey.generate()
        grant.tokenType = tokenType
        try vault.save(grant, as: "work")
    }

    static func authorizeRequest(_ name: String, url: String) -> MessageWriter {
        var w = MessageWriter(request: .authorizeRequest)
        w.string(name)
        w.u32(0)
        w.string("GET")
        w.string(url)
        w.string("")
        w.string("server")
        w.string("curl")
        w.u32(1000)
        w.u32(42)
        return w
    }

    static func answer(_ scene: AgentScene, _ request: MessageWriter) throws(VaultError) -> (Bool, [String]) {
        var session: VaultSession?
        defer { session?.end() }
        var r = MessageReader(
            scene.responder.answer(request.body, peer: AuthorizeRequestQuestionTests.forwarded, session: &session)
                .body)
        try r.response()
        let bound = try r.bool()
        var values: [String] = []
        for _ in 0..<(try r.u32()) {
            _ = try r.string()
            values.append(try r.string())
        }
        try r.finish()
        return (bound, values)
    }

    /// A bearer grant, and one whose refresh token alone is bound to its
    /// key (the provider answered with a bearer access token).
    @Test(
        "a bearer token asked for through operation 13 is confirmed and logged as the token it is, not as a proof",
        arguments: [nil, "Bearer"])
    func bearerTokenIsNotPresentedAsAProofForOneRequest(refreshBinding: String?) throws {
        let (scene, summary, probe) = try Self.scene()
        if let refreshBinding { try Self.bindKey(scene, tokenType: refreshBinding) }
        try scene.unlock()
        defer { withExtendedLifetime(probe) {} }
        // No policy file: forwarded requests are confirmed.
        let (bound, values) = try Self.answer(
            scene, Self.authorizeRequest("work", url: "https://api.example/harmless"))
        // What crosses is a bearer token: good for any request to any server.
        #expect(!bound)
        #expect(values == ["Bearer \(AgentScene.accessToken)"])
        let asked = try String(contentsOfFile: summary, encoding: .utf8)
        // So the person is not told it is a proof for one harmless request.
        #expect(!asked.contains("DPoP proof for"), "\(asked)")
        #expect(asked.contains("token of 'work' for a forwarded request"), "\(asked)")
        #expect(asked.contains("request=none"), "\(asked)")
        let entries = try AuditLog(directory: scene.dir.location.directory).read().entries
        #expect(entries.map(\.outcome) == [.confirmed])
        #expect(entries.map(\.request) == [nil])
    }

    @Test("a bound token's question and log entry name the one request its proof is for")
    func boundTokenNamesItsRequest() throws {
        let (scene, summary, probe) = try Self.scene()
        try Self.bindKey(scene, tokenType: "DPoP")
        try scene.unlock()
        defer { withExtendedLifetime(probe) {} }
        let (bound, values) = try Self.answer(
            scene, Self.authorizeRequest("work", url: "https://api.example/items?q=1"))
        #expect(bound)
        #expect(values.count == 2)
        let asked = try String(contentsOfFile: summary, encoding: .utf8)
        #expect(asked.hasPrefix("token of 'work' for a forwarded request from pid 1"), "\(asked)")
        #expect(asked.contains(", with a DPoP proof for GET https://api.example/items; "), "\(asked)")
        #expect(asked.contains("request=GET https://api.example/items\n"), "\(asked)")
        let entries = try AuditLog(directory: scene.dir.location.directory).read().entries
        #expect(entries.map(\.request) == ["GET https://api.example/items"])
    }

    @Test(
        "a forwarded request's URL is asked about and logged as the proof names it; dot segments and long URLs are refused"
    )
    func requestAsSigned() throws {
        let (scene, summary, probe) = try Self.scene()
        try Self.bindKey(scene, tokenType: "DPoP")
        try scene.unlock()
        defer { withExtendedLifetime(probe) {} }
        let (bound, _) = try Self.answer(scene, Self.authorizeRequest("work", url: "https://API.example:443/items?q=1"))
        #expect(bound)
        let asked = try String(contentsOfFile: summary, encoding: .utf8)
        #expect(asked.contains("DPoP proof for GET https://api.example/items; "), "\(asked)")
        #expect(
            try AuditLog(directory: scene.dir.location.directory).read().entries.map(\.request) == [
                "GET https://api.example/items"
            ])
        // Nobody is asked about a URL whose proof would name another, or
        // one long enough to push the rest of the question out of view.
        try FileManager.default.removeItem(atPath: summary)
        for url in [
            "https://api.example/notes/" + String(repeating: "a/../", count: 3) + "../admin/keys",
            "https://api.example/notes/%2E%2e/admin/keys",
            "https://api.example/v1/x/%2e%2e#",
            "https://api.example/v1/x/..#fragment",
            "https://api.example/" + String(repeating: "x", count: 600),
        ] {
            #expect(throws: VaultError.self) { try Self.answer(scene, Self.authorizeRequest("work", url: url)) }
        }
        #expect(!FileManager.default.fileExists(atPath: summary))
    }

    @Test("a question shortens a long request in the middle, and names the grant and origin first")
    func longRequestShortened() {
        let long = "POST https://api.example/" + String(repeating: "x", count: 1000) + "/end"
        let question = ConfirmationQuestion(
            grant: "work", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: nil),
            claims: RequesterClaims(host: "server", command: "curl", uid: 0, pid: 7), request: long)
        #expect(question.text.hasPrefix("token of 'work' for a forwarded request"))
        #expect(question.text.contains("…") && question.text.contains("/end; the other machine says"))
        #expect(question.text.count < 900)
        // A forwarded request's URL (at most 512 bytes) is shown whole.
        let forwarded = "POST https://api.example/" + String(repeating: "y", count: 480)
        #expect(
            ConfirmationQuestion(
                grant: "work", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: nil), claims: nil,
                request: forwarded
            ).text.contains(forwarded))
    }

    @Test("a question for an ID token says so first, so nobody says yes to one thinking it an access token")
    func idTokenQuestion() {
        let peer = AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: "/usr/bin/ssh")
        let id = ConfirmationQuestion(grant: "kube", peer: peer, claims: nil, idToken: true)
        #expect(id.text.hasPrefix("ID token of 'kube' for a forwarded request"), "\(id.text)")
        #expect(ConfirmationQuestion(grant: "kube", peer: peer, claims: nil).text.hasPrefix("token of 'kube'"))
    }

    @Test("refused or denied, a grant that exists and one that does not get the same answer and the same question")
    func refusalsDoNotTellWhichGrantsExist() throws {
        let (scene, summary, probe) = try Self.scene(answer: 1)
        try Self.bindKey(scene, tokenType: "DPoP")
        try scene.unlock()
        defer { withExtendedLifetime(probe) {} }
        func refusal(_ name: String) -> (VaultError.Code?, String?) {
            do {
                _ = try Self.answer(scene, Self.authorizeRequest(name, url: "https://api.example/x"))
                return (nil, nil)
            } catch {
                return (error.code, error.reason.replacingOccurrences(of: name, with: "NAME"))
            }
        }
        let existing = refusal("work")
        let missing = refusal("nowork")
        #expect(existing.0 == .denied)
        #expect(existing.0 == missing.0 && existing.1 == missing.1)
        let questions = try String(contentsOfFile: summary, encoding: .utf8).split(separator: "\n").map {
            $0.replacingOccurrences(of: "nowork", with: "NAME").replacingOccurrences(of: "work", with: "NAME")
        }
        #expect(questions.count == 4)
        #expect(questions[0] == questions[2] && questions[1] == questions[3], "\(questions)")

        var policy = AgentPolicy()
        policy.defaults = AgentPolicy.Rules(local: .allow, forwarded: .deny)
        try policy.save(configDirectory: scene.dir.location.configDirectory)
        let deniedExisting = refusal("work")
        let deniedMissing = refusal("nowork")
        #expect(deniedExisting.0 == .denied)
        #expect(deniedExisting.0 == deniedMissing.0 && deniedExisting.1 == deniedMissing.1)
    }
}
