import Foundation
import Synchronization
import VaultCrypto
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

/// A clock a test moves by hand.
final class TestClock: TimeSource {
    private let date: Mutex<Date>

    init(_ start: Date) { date = Mutex(start) }

    func now() -> Date { date.withLock { $0 } }

    /// Moves the clock `seconds` on.
    func advance(_ seconds: TimeInterval) { date.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// The log lines an agent wrote.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }

    func append(_ line: String) { lines.withLock { $0.append(line) } }
}

/// A vault on disk with one grant, and the parts of an agent over it, in
/// process: no socket unless a test makes one.
struct AgentScene {
    static let start = Date(epochSeconds: 1_800_000_000)
    static let accessToken = "agent-test-access"

    let dir = TemporaryDirectory()
    let clock = TestClock(AgentScene.start)
    let log = LogLines()
    let vaultID: [UInt8]
    let masterKey: SecureBytes
    let keys: KeyState
    let responder: AgentResponder
    let transport: FakeTransport

    /// `answers`: the provider's, in order (a background refresh asks it).
    init(options: AgentServer.Options = AgentServer.Options(), answers: [(Int, String, [(String, String)])] = []) throws
    {
        let vault = try Vault.create(
            at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum, time: clock)
        var grant = TestKeys.grant(token: AgentScene.accessToken, now: AgentScene.start)
        grant.expiresAt = AgentScene.start.addingTimeInterval(3600)
        try vault.save(grant, as: "work")
        vaultID = vault.header.vaultID
        masterKey = try vault.requireMasterKey()
        let log = log
        transport = FakeTransport(answers)
        let environment = AgentEnvironment(
            location: dir.location,
            paths: AgentPaths(
                directory: dir.path + "/run", socket: dir.path + "/run/a.sock", lock: dir.path + "/run/a.lock"),
            options: options, transport: transport, time: clock, log: { log.append($0) })
        keys = KeyState(environment: environment)
        responder = AgentResponder(keys: keys, listener: AgentListener(environment: environment))
    }

    func unlock() throws { try keys.unlock(vaultID: vaultID, masterKey: masterKey) }

    /// The response the responder gives to `request`, read back as a client
    /// reads it: the error an error answer carries is thrown.
    func ask(_ request: MessageWriter, session: inout VaultSession?) throws(VaultError) -> MessageReader {
        var reader = MessageReader(responder.answer(request.body, session: &session).body)
        try reader.response()
        return reader
    }

    func ask(_ request: MessageWriter) throws(VaultError) -> MessageReader {
        var session: VaultSession?
        defer { session?.end() }
        return try ask(request, session: &session)
    }

    static func tokenRequest(_ name: String = "work") -> MessageWriter {
        var w = MessageWriter(request: .token)
        w.string(name)
        w.u32(0)
        w.u8(0)
        return w
    }

    static func hello(_ id: [UInt8]) -> MessageWriter {
        var w = MessageWriter(request: .hello)
        w.fixed(id)
        return w
    }
}
