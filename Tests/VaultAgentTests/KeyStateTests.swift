import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

@Suite("the agent's key state: unlocking, the idle and hard timeouts, locking")
struct KeyStateTests {
    static func options(idle: TimeInterval, hard: TimeInterval, exitWhenLocked: Bool = true) -> AgentServer.Options {
        var o = AgentServer.Options()
        o.idleTimeout = idle
        o.hardTimeout = hard
        o.exitWhenLocked = exitWhenLocked
        return o
    }

    @Test("the idle timeout locks after that long without use; each use starts it again")
    func idleTimeout() throws {
        let scene = try AgentScene(options: KeyStateTests.options(idle: 60, hard: 0))
        try scene.unlock()
        let start = AgentScene.start
        #expect(scene.keys.enforceLifetime(now: start.addingTimeInterval(59)))
        scene.clock.advance(30)
        #expect(scene.keys.use(grant: nil) != nil)
        #expect(scene.keys.enforceLifetime(now: start.addingTimeInterval(89)), "used at 30 s: 59 s idle")
        #expect(scene.keys.expiry(now: start.addingTimeInterval(90)) == "idle timeout")
        #expect(!scene.keys.enforceLifetime(now: start.addingTimeInterval(90)))
        #expect(!scene.keys.isUnlocked)
        #expect(scene.log.all == ["unlocked", "locked: idle timeout"])
    }

    @Test("the hard timeout locks that long after unlocking, however recent the last use")
    func hardTimeout() throws {
        let scene = try AgentScene(options: KeyStateTests.options(idle: 60, hard: 100))
        try scene.unlock()
        for _ in 0..<11 {
            scene.clock.advance(9)
            _ = scene.keys.use(grant: nil)
        }
        #expect(scene.keys.enforceLifetime(now: AgentScene.start.addingTimeInterval(99)))
        #expect(!scene.keys.enforceLifetime(now: AgentScene.start.addingTimeInterval(100)))
        #expect(scene.log.all.last == "locked: hard timeout")
    }

    @Test("a timeout of 0 never locks")
    func noTimeouts() throws {
        let scene = try AgentScene(options: KeyStateTests.options(idle: 0, hard: 0))
        try scene.unlock()
        #expect(scene.keys.enforceLifetime(now: AgentScene.start.addingTimeInterval(1e9)))
        let status = scene.keys.status(for: scene.vaultID)
        #expect(status.matches && status.idleLeft == 0 && status.hardLeft == 0)
    }

    @Test("hello's seconds left count down from the last use and from unlocking, never below 1")
    func secondsLeft() throws {
        let scene = try AgentScene(options: KeyStateTests.options(idle: 60, hard: 100))
        try scene.unlock()
        scene.clock.advance(20)
        #expect(scene.keys.status(for: scene.vaultID) == (true, 40, 80))
        _ = scene.keys.use(grant: nil)
        scene.clock.advance(70)
        #expect(scene.keys.status(for: scene.vaultID) == (true, 1, 10))
        #expect(scene.keys.status(for: [UInt8](repeating: 0, count: 16)).matches == false)
    }

    @Test("locking drops every reference to the keys, so their secure memory is freed, and forgets the grants used")
    func lockDropsTheKeys() throws {
        let scene = try AgentScene(options: KeyStateTests.options(idle: 0, hard: 0))
        try scene.unlock()
        weak var unlocked: UnlockedKeys?
        weak var localKeys: LocalKeys?
        do {
            let current = try #require(scene.keys.use(grant: "work"))
            unlocked = current
            localKeys = current.keys
            // A connection handed back to the pool holds the keys too.
            var session: VaultSession?
            _ = try scene.keys.vault(current, session: &session)
            session?.end()
        }
        #expect(unlocked != nil && localKeys != nil)
        #expect(scene.keys.refreshCandidates(now: AgentScene.start, excluding: [])?.1 == ["work"])
        scene.keys.lock("lock requested")
        #expect(unlocked == nil, "the agent still holds the unlocked keys")
        #expect(localKeys == nil, "the agent still holds the record keys")
        #expect(scene.keys.use(grant: nil) == nil)
        #expect(scene.keys.isStopping, "an agent that exits when locked stops with its keys")
        try scene.unlock()
        #expect(scene.keys.refreshCandidates(now: AgentScene.start, excluding: []) == nil, "names outlived the lock")
    }

    @Test("an agent that stays when locked keeps running")
    func staysWhenLocked() throws {
        let scene = try AgentScene(options: KeyStateTests.options(idle: 0, hard: 0, exitWhenLocked: false))
        try scene.unlock()
        scene.keys.lock("SIGHUP")
        #expect(!scene.keys.isUnlocked && !scene.keys.isStopping)
    }

    @Test("replacing or removing the vault file locks")
    func vaultFileReplaced() throws {
        let scene = try AgentScene(options: KeyStateTests.options(idle: 0, hard: 0))
        try scene.unlock()
        #expect(scene.keys.checkVaultFile())
        let path = scene.dir.location.databasePath
        try FileManager.default.moveItem(atPath: path, toPath: path + ".moved")
        #expect(!scene.keys.checkVaultFile())
        #expect(scene.log.all.last == "locked: the vault file was replaced or removed")
    }

    @Test("a key for another vault or a wrong key does not unlock")
    func wrongKeys() throws {
        let scene = try AgentScene()
        let another = #expect(throws: VaultError.self) {
            try scene.keys.unlock(vaultID: [UInt8](repeating: 9, count: 16), masterKey: scene.masterKey)
        }
        #expect(another?.code == .wrongKey)
        let other = try SecureBytes(copying: [UInt8](repeating: 1, count: 32))
        let wrong = #expect(throws: VaultError.self) { try scene.keys.unlock(vaultID: scene.vaultID, masterKey: other) }
        #expect(wrong?.code == .wrongKey)
        #expect(!scene.keys.isUnlocked)
    }
}
