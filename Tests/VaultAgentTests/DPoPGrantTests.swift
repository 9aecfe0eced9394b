import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

/// A grant bound to a DPoP key is used by signing each request with its
/// key, which never leaves the vault: the agent never hands its token to a
/// forwarded peer, and tells a local command to sign for itself.
@Suite("the agent and grants bound to a DPoP key")
struct DPoPGrantTests {
    func grantToken(_ name: String) -> MessageWriter {
        var w = MessageWriter(request: .grantToken)
        w.string(name)
        w.u32(0)
        w.string("host")
        w.string("curl")
        w.u32(1000)
        w.u32(42)
        return w
    }

    @Test("op 11 refuses a bound grant to forwarded and local peers; the token op still serves it")
    func boundGrant() throws {
        let scene = try AgentScene()
        let vault = try Vault.open(at: scene.dir.location, key: .keyfile(TestKeys.keyfileSecret()))
        var grant = try vault.load("work")
        grant.dpopKey = try DPoPKey.generate()
        grant.tokenType = "DPoP"
        try vault.save(grant, as: "work")
        try scene.unlock()
        var policy = AgentPolicy()
        policy.defaults = AgentPolicy.Rules(local: .allow, forwarded: .allow)
        try policy.save(configDirectory: scene.dir.location.configDirectory)
        for peer in [
            AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: "/usr/bin/ssh"), AgentPeer.thisUser,
        ] {
            var session: VaultSession?
            var reader = MessageReader(
                scene.responder.answer(grantToken("work").body, peer: peer, session: &session).body)
            let error = #expect(throws: VaultError.self) { try reader.response() }
            #expect(error?.code == .unsupported)
            #expect(error?.reason.contains("bound to a DPoP key") == true, "\(error?.reason ?? "")")
            session?.end()
        }
        var token = try scene.ask(AgentScene.tokenRequest())
        #expect(try token.string() == AgentScene.accessToken)
        #expect(try token.string() == "DPoP")
    }
}
