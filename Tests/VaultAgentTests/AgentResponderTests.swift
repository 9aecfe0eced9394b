import Foundation
import Testing
import VaultCrypto
import VaultSync
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

@Suite("the agent's responder: what each request is answered, locked and unlocked")
struct AgentResponderTests {
    @Test("locked, a request that needs the keys is answered 'the agent is locked'")
    func lockedAnswers() throws {
        let scene = try AgentScene()
        let requests = [
            AgentScene.tokenRequest(), MessageWriter(request: .sync), MessageWriter(request: .conflicts),
            {
                var w = MessageWriter(request: .nameHash); w.string("work"); return w
            }(),
        ]
        for request in requests {
            let error = #expect(throws: VaultError.self) { _ = try scene.ask(request) }
            #expect(error?.code == .locked && error?.reason == "the agent is locked")
        }
    }

    @Test("hello says whether the agent holds this vault's keys, and for how long")
    func hello() throws {
        var options = AgentServer.Options()
        options.idleTimeout = 60
        options.hardTimeout = 600
        let scene = try AgentScene(options: options)
        var locked = try scene.ask(AgentScene.hello(scene.vaultID))
        #expect(try locked.u8() == 0)
        #expect(try locked.u32() == UInt32(getpid()))
        #expect(try (locked.u32(), locked.u32()) == (0, 0))
        try locked.finish()

        try scene.unlock()
        var unlocked = try scene.ask(AgentScene.hello(scene.vaultID))
        #expect(try unlocked.u8() == 1)
        _ = try unlocked.u32()
        #expect(try (unlocked.u32(), unlocked.u32()) == (60, 600))
        var other = try scene.ask(AgentScene.hello([UInt8](repeating: 3, count: 16)))
        #expect(try other.u8() == 0, "the keys of another vault")
    }

    @Test("load unlocks with the master key; then a token is served; lock drops it again")
    func loadTokenLock() throws {
        let scene = try AgentScene()
        var load = MessageWriter(request: .load)
        load.fixed(scene.vaultID)
        load.fixed(scene.masterKey.unsafeCopyToArray())
        _ = try scene.ask(load)
        #expect(scene.keys.isUnlocked)

        var session: VaultSession?
        var token = try scene.ask(AgentScene.tokenRequest(), session: &session)
        // Compared aside, so that a failure prints no token.
        let served = try token.string() == AgentScene.accessToken
        #expect(served, "the agent served another token")
        #expect(try token.string() == "Bearer")
        #expect(try token.u64() == UInt64(AgentScene.start.addingTimeInterval(3600).epochSeconds))
        try token.finish()
        #expect(session != nil, "the connection keeps its own vault connection")
        #expect(scene.keys.refreshCandidates(now: AgentScene.start, excluding: [])?.1 == ["work"])

        let missing = #expect(throws: VaultError.self) { _ = try scene.ask(AgentScene.tokenRequest("other")) }
        #expect(missing?.code == .notFound)

        _ = try scene.ask(MessageWriter(request: .lock), session: &session)
        #expect(session == nil && !scene.keys.isUnlocked)
        let locked = #expect(throws: VaultError.self) { _ = try scene.ask(AgentScene.tokenRequest()) }
        #expect(locked?.code == .locked)
        #expect(scene.log.all == ["unlocked", "locked: lock requested"])
    }

    @Test("load with another vault's id is refused while keys are held, and the keys stay")
    func loadAnotherVault() throws {
        let scene = try AgentScene()
        try scene.unlock()
        var load = MessageWriter(request: .load)
        load.fixed([UInt8](repeating: 5, count: 16))
        load.fixed([UInt8](repeating: 1, count: 32))
        let error = #expect(throws: VaultError.self) { _ = try scene.ask(load) }
        #expect(error?.code == .alreadyExists)
        #expect(scene.keys.isUnlocked)
    }

    @Test("a record sealed through the agent opens through the agent")
    func sealAndOpen() throws {
        let scene = try AgentScene()
        try scene.unlock()
        var hashRequest = MessageWriter(request: .nameHash)
        hashRequest.string("work")
        var hashAnswer = try scene.ask(hashRequest)
        let nameHash = try hashAnswer.fixed(32)
        let id = [UInt8](repeating: 4, count: 16)
        var seal = MessageWriter(request: .seal)
        let payload = Array(#"{"name":"work"}"#.utf8)
        seal.bytes(payload)
        seal.fixed(id)
        seal.u64(3)
        seal.u8(0)
        seal.fixed(nameHash)
        var sealed = try scene.ask(seal)
        let record = StoredRecord(
            id: id, nameHash: nameHash, version: 3, deleted: false, nonce: try sealed.bytes(),
            ciphertext: try sealed.bytes())
        var open = MessageWriter(request: .open)
        open.u32(2)
        open.record(record)
        open.record(
            StoredRecord(
                id: id, nameHash: nameHash, version: 4, deleted: false, nonce: record.nonce,
                ciphertext: record.ciphertext))
        var opened = try scene.ask(open)
        #expect(try opened.u8() == 0)
        #expect(try opened.bytes() == payload)
        #expect(try opened.u8() == 1, "a record whose version was changed does not open")
        #expect(try opened.error().code == .tampered)
    }

    @Test("a malformed request is answered with an error, and the agent carries on")
    func malformed() throws {
        let scene = try AgentScene()
        var session: VaultSession?
        for body: [UInt8] in [[AgentProtocol.version, 99], [1, 1], [AgentProtocol.version, 3, 0]] {
            var reader = MessageReader(scene.responder.answer(body, session: &session).body)
            #expect(throws: VaultError.self) { try reader.response() }
        }
        #expect(!scene.responder.isBusy)
    }
}
