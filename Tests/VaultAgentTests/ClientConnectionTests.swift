import Foundation
import Glibc
import Testing
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

@Suite("a client connection: frames, their size limit and the timeouts")
struct ClientConnectionTests {
    /// Two connected Unix sockets: the agent's end and the client's.
    static func pair() throws -> (agent: Int32, client: Int32) {
        var fds: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return (fds[0], fds[1])
    }

    static func write(_ bytes: [UInt8], to fd: Int32) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, bytes.count, Int32(MSG_NOSIGNAL)) }
    }

    /// A connection served on a thread of its own: the client's end, and
    /// a semaphore signalled when serving ends.
    static func serving(_ scene: AgentScene, requestTimeout: Int) throws -> (client: Int32, done: DispatchSemaphore) {
        let (agent, client) = try pair()
        var connection = ClientConnection(fd: agent, responder: scene.responder)
        connection.requestTimeout = requestTimeout
        let done = DispatchSemaphore(value: 0)
        let serving = connection
        startThread {
            serving.serve()
            done.signal()
        }
        return (client, done)
    }

    /// Everything the other end sends until it closes.
    static func readAll(_ fd: Int32) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, 4096, 0) }
            guard n > 0 else { return out }
            out += buffer[..<n]
        }
    }

    @Test("a length over the limit is refused before anything is read")
    func oversized() throws {
        let scene = try AgentScene()
        let (agent, client) = try ClientConnectionTests.pair()
        defer { close(client) }
        defer { close(agent) }
        let length = UInt32(AgentProtocol.maxLength + 1)
        ClientConnectionTests.write(withUnsafeBytes(of: length.bigEndian, Array.init), to: client)
        #expect(ClientConnection(fd: agent, responder: scene.responder).receiveMessage() == nil)
        #expect(scene.log.all == ["refused a message of \(AgentProtocol.maxLength + 1) bytes"])
    }

    @Test("a length of 0 is refused")
    func empty() throws {
        let scene = try AgentScene()
        let (agent, client) = try ClientConnectionTests.pair()
        defer { close(client) }
        defer { close(agent) }
        ClientConnectionTests.write([0, 0, 0, 0], to: client)
        #expect(ClientConnection(fd: agent, responder: scene.responder).receiveMessage() == nil)
    }

    @Test("requests are answered in frames until the client hangs up")
    func serves() throws {
        let scene = try AgentScene()
        let (agent, client) = try ClientConnectionTests.pair()
        defer { close(client) }
        let responder = scene.responder
        let done = DispatchSemaphore(value: 0)
        startThread {
            ClientConnection(fd: agent, responder: responder).serve()
            done.signal()
        }
        let hello = AgentScene.hello(scene.vaultID)
        ClientConnectionTests.write(hello.framed + hello.framed, to: client)
        shutdown(client, Int32(SHUT_WR))
        let received = ClientConnectionTests.readAll(client)
        #expect(done.wait(timeout: .now() + 10) == .success)
        // Two answers of 2 + 13 bytes, each after its length.
        #expect(received.count == 2 * 19)
        #expect(Array(received[0..<6]) == [0, 0, 0, 15, AgentProtocol.version, 0])
        #expect(Array(received[19..<25]) == [0, 0, 0, 15, AgentProtocol.version, 0])
    }

    @Test("a token is answered before its audit line is written: a log held by another writer delays only the line")
    func answerBeforeAudit() throws {
        let scene = try AgentScene()
        try scene.unlock()
        // Another writer (a command handing out a token itself) holds the
        // log's lock.
        let log = scene.responder.audit.path
        let other = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        try #require(other >= 0)
        defer { close(other) }
        try #require(flock(other, LOCK_EX) == 0)
        let (client, done) = try ClientConnectionTests.serving(scene, requestTimeout: 10)
        defer { close(client) }
        ClientConnectionTests.write(AgentScene.tokenRequest().framed, to: client)
        var p = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
        #expect(poll(&p, 1, 5000) == 1, "the answer waited for the audit log")
        var answer = [UInt8](repeating: 0, count: 4096)
        let n = answer.withUnsafeMutableBytes { recv(client, $0.baseAddress!, 4096, Int32(MSG_DONTWAIT)) }
        // Let go of the log whatever happened, so that a failure ends.
        defer { flock(other, LOCK_UN) }
        #expect(n > 6 && answer[5] == 0, "not a token")
        #expect(try String(contentsOfFile: log, encoding: .utf8).isEmpty)
        // Once the other writer is done, the line follows.
        flock(other, LOCK_UN)
        shutdown(client, Int32(SHUT_WR))
        #expect(done.wait(timeout: .now() + 5) == .success)
        let written = try String(contentsOfFile: log, encoding: .utf8)
        #expect(written.contains("\"grant\":\"work\"") && written.contains("allowed"), "\(written)")
    }

    @Test("a client that starts a request and stalls is dropped after the request timeout")
    func stalledRequest() throws {
        let scene = try AgentScene()
        let (client, done) = try ClientConnectionTests.serving(scene, requestTimeout: 1)
        defer { close(client) }
        ClientConnectionTests.write([0, 0, 0, 20, AgentProtocol.version], to: client)
        #expect(done.wait(timeout: .now() + 5) == .success, "the connection still waits for the rest")
        #expect(ClientConnectionTests.readAll(client).isEmpty, "a partial request was answered")
    }

    @Test("a request sent a byte at a time, each within the timeout, is dropped when the whole takes longer")
    func trickledRequest() throws {
        let scene = try AgentScene()
        let (client, done) = try ClientConnectionTests.serving(scene, requestTimeout: 1)
        defer { close(client) }
        // The length, then one byte every 0.4 s: no single wait reaches the
        // timeout, the request as a whole does.
        ClientConnectionTests.write([0, 0, 0, 20], to: client)
        let started = Date()
        var dropped = false
        for _ in 0..<10 {
            usleep(400_000)
            ClientConnectionTests.write([AgentProtocol.version], to: client)
            if done.wait(timeout: .now()) == .success {
                dropped = true
                break
            }
        }
        #expect(dropped || done.wait(timeout: .now() + 1) == .success, "the trickle held the connection")
        #expect(Date().timeIntervalSince(started) < 3)
    }

    @Test("a connection lets go of the keys once the agent locks: its session is ended before it waits again")
    func sessionEndsOnLock() throws {
        let scene = try AgentScene()
        try scene.unlock()
        var session: VaultSession?
        defer { session?.end() }
        _ = try scene.ask(AgentScene.tokenRequest(), session: &session)
        #expect(session != nil)
        let (agent, client) = try ClientConnectionTests.pair()
        defer { close(agent) }
        let connection = ClientConnection(fd: agent, responder: scene.responder)
        // Still unlocked: the session stays while the connection waits (the
        // client hung up: the wait ends at once).
        close(client)
        _ = connection.waitForRequest(session: &session)
        #expect(session != nil)
        scene.keys.lock("locked by the test")
        _ = connection.waitForRequest(session: &session)
        #expect(session == nil, "a locked agent's keys stay held by an idle connection")
    }

    @Test("an idle connection is closed once the idle timeout has passed, not before")
    func idle() throws {
        let scene = try AgentScene()
        let (agent, client) = try ClientConnectionTests.pair()
        defer { close(client) }
        defer { close(agent) }
        let connection = ClientConnection(fd: agent, responder: scene.responder)
        let done = DispatchSemaphore(value: 0)
        startThread {
            var session: VaultSession?
            if !connection.waitForRequest(session: &session) { done.signal() }
        }
        #expect(done.wait(timeout: .now() + 1.5) == .timedOut, "closed before the idle timeout")
        scene.clock.advance(ClientConnection.idleTimeout + 1)
        #expect(done.wait(timeout: .now() + 5) == .success, "still open after the idle timeout")
    }
}
