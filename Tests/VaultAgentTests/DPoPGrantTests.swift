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

    func authorizeRequest(_ name: String, method: String = "POST", url: String, nonce: String = "") -> MessageWriter {
        var w = MessageWriter(request: .authorizeRequest)
        w.string(name)
        w.u32(0)
        w.string(method)
        w.string(url)
        w.string(nonce)
        w.string("host")
        w.string("curl")
        w.u32(1000)
        w.u32(42)
        return w
    }

    /// The bound flag and header fields of an operation 13 answer from `peer`.
    func answered(_ scene: AgentScene, _ request: MessageWriter, peer: AgentPeer) throws -> (Bool, [(String, String)]) {
        var session: VaultSession?
        defer { session?.end() }
        var r = MessageReader(scene.responder.answer(request.body, peer: peer, session: &session).body)
        try r.response()
        let bound = try r.bool()
        var fields: [(String, String)] = []
        for _ in 0..<(try r.u32()) { fields.append((try r.string(), try r.string())) }
        try r.finish()
        return (bound, fields)
    }

    static let forwarded = AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: "/usr/bin/ssh")

    func allowEverywhere(_ scene: AgentScene) throws {
        var policy = AgentPolicy()
        policy.defaults = AgentPolicy.Rules(local: .allow, forwarded: .allow)
        try policy.save(configDirectory: scene.dir.location.configDirectory)
    }

    @Test("op 13 signs a bound grant's proof in the agent, for local and forwarded peers; the key stays")
    func agentSignsProof() throws {
        let scene = try AgentScene()
        let vault = try Vault.open(at: scene.dir.location, key: .keyfile(TestKeys.keyfileSecret()))
        var grant = try vault.load("work")
        let key = try DPoPKey.generate()
        grant.dpopKey = key
        grant.tokenType = "DPoP"
        try vault.save(grant, as: "work")
        try scene.unlock()
        try allowEverywhere(scene)
        for peer in [DPoPGrantTests.forwarded, AgentPeer.thisUser] {
            let url = "https://api.example/items?x=1"
            let (bound, fields) = try answered(
                scene, authorizeRequest("work", url: url, nonce: "n-1"), peer: peer)
            #expect(bound)
            #expect(fields.map(\.0) == ["Authorization", "DPoP"])
            #expect(fields.first?.1 == "DPoP \(AgentScene.accessToken)")
            let proof = try #require(fields.last?.1)
            let parts = proof.split(separator: ".").map(String.init)
            try #require(parts.count == 3)
            let header = try #require(
                Base64.decode(Array(parts[0].utf8), .urlSafeUnpadded).flatMap {
                    try JSONSerialization.jsonObject(with: Data($0)) as? [String: Any]
                })
            let claims = try #require(
                Base64.decode(Array(parts[1].utf8), .urlSafeUnpadded).flatMap {
                    try JSONSerialization.jsonObject(with: Data($0)) as? [String: Any]
                })
            #expect(header["typ"] as? String == "dpop+jwt")
            #expect(claims["htm"] as? String == "POST")
            #expect(claims["htu"] as? String == "https://api.example/items")
            #expect(claims["nonce"] as? String == "n-1")
            #expect((claims["iat"] as? Int).map(Int64.init) == AgentScene.start.epochSeconds)
            let ath = Base64.encodeString(try Secure.sha256(Array(AgentScene.accessToken.utf8)), .urlSafeUnpadded)
            #expect(claims["ath"] as? String == ath)
            // The proof's public key is the grant's: no private member crosses.
            let jwk = try #require(header["jwk"] as? [String: Any])
            #expect(jwk["d"] == nil)
            #expect(!proof.contains(key.privateKey))
        }
        // Without a URL there is no proof to sign: the token is not handed
        // out, and the asker is told to give one, forwarded or not.
        for peer in [DPoPGrantTests.forwarded, AgentPeer.thisUser] {
            let error = #expect(throws: VaultError.self) {
                _ = try answered(scene, authorizeRequest("work", url: ""), peer: peer)
            }
            #expect(error?.remedy == .giveRequestURL)
            #expect(error?.reason.contains("named by its URL") == true)
        }
        let entries = try AuditLog(directory: scene.dir.location.directory).read().entries.filter {
            $0.outcome != .failed
        }
        #expect(entries.map(\.outcome) == [.allowed, .allowed])
        // The log names the request each proof was for, without its query.
        #expect(entries.map(\.request) == ["POST https://api.example/items", "POST https://api.example/items"])
    }

    @Test("op 13 gives a bearer grant's Authorization alone, refuses OAuth 1.0a and a malformed request")
    func agentAuthorizationOtherGrants() throws {
        let scene = try AgentScene()
        try scene.unlock()
        try allowEverywhere(scene)
        let (bound, fields) = try answered(
            scene, authorizeRequest("work", url: "https://api.example/"), peer: .thisUser)
        #expect(!bound)
        #expect(fields.map(\.0) == ["Authorization"])
        #expect(fields.first?.1 == "Bearer \(AgentScene.accessToken)")
        // A bearer token's field names no URL: none is needed.
        let (_, unnamed) = try answered(scene, authorizeRequest("work", url: ""), peer: .thisUser)
        #expect(unnamed.map(\.1) == ["Bearer \(AgentScene.accessToken)"])

        for bad in [
            authorizeRequest("work", method: "get", url: "https://api.example/"),
            authorizeRequest("work", url: "ftp://api.example/"),
            authorizeRequest("work", url: "https://api.example/a b"),
            authorizeRequest("work", url: "https://api.example/", nonce: "a b"),
        ] {
            #expect(throws: VaultError.self) { _ = try answered(scene, bad, peer: DPoPGrantTests.forwarded) }
        }

        let vault = try Vault.open(at: scene.dir.location, key: .keyfile(TestKeys.keyfileSecret()))
        var oauth1 = try vault.load("work")
        oauth1.kind = .oauth1
        oauth1.tokenSecret = "ts"
        try vault.save(oauth1, as: "work")
        for peer in [DPoPGrantTests.forwarded, AgentPeer.thisUser] {
            let error = #expect(throws: VaultError.self) {
                _ = try answered(scene, authorizeRequest("work", url: "https://api.example/"), peer: peer)
            }
            #expect(error?.code == .unsupported)
        }
    }
}
