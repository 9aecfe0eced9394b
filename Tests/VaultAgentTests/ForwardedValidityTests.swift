import Testing
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

/// A forwarded peer asks for at most two minutes of validity, whatever it
/// sends: it cannot make every request a refresh by asking for more than
/// a token has.
@Suite("the validity a forwarded peer may ask for")
struct ForwardedValidityTests {
    static let forwarded = AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: "/usr/bin/ssh")
    /// More than the scene's token has left (an hour).
    static let tooLong: UInt32 = 100_000

    func request(_ operation: AgentProtocol.Operation, url: String? = nil) -> MessageWriter {
        var w = MessageWriter(request: operation)
        w.string("work")
        w.u32(ForwardedValidityTests.tooLong)
        if let url {
            w.string("GET")
            w.string(url)
            w.string("")
        }
        w.string("host")
        w.string("curl")
        w.u32(1000)
        w.u32(42)
        return w
    }

    func scene() throws -> AgentScene {
        let scene = try AgentScene()
        try scene.unlock()
        var policy = AgentPolicy()
        policy.defaults = AgentPolicy.Rules(local: .allow, forwarded: .allow)
        try policy.save(configDirectory: scene.dir.location.configDirectory)
        return scene
    }

    func answer(_ scene: AgentScene, _ request: MessageWriter, peer: AgentPeer) throws {
        var session: VaultSession?
        defer { session?.end() }
        var reader = MessageReader(scene.responder.answer(request.body, peer: peer, session: &session).body)
        try reader.response()
    }

    @Test("a grant's token and a request's fields: no refresh for a forwarded peer's long minimum")
    func capped() throws {
        for request in [request(.grantToken), request(.authorizeRequest, url: "https://api.example/items")] {
            let scene = try scene()
            try answer(scene, request, peer: ForwardedValidityTests.forwarded)
            #expect(scene.transport.requests.isEmpty, "a forwarded minimum made the agent refresh")
        }
    }

    @Test("the same minimum from this machine is asked of the provider (control)")
    func localIsNotCapped() throws {
        let scene = try scene()
        #expect(throws: VaultError.self) { try answer(scene, request(.grantToken), peer: AgentPeer.thisUser) }
        #expect(scene.transport.requests.count == 1)
    }
}
