internal import FoundationEssentials
internal import Glibc
internal import VaultCore
internal import VaultCrypto

/// One client's connection, served on a thread of its own: it reads framed
/// requests within the agent's timeouts, has the responder answer each,
/// writes the answers, and zeroes both once they are sent.
struct ClientConnection {
    /// A client must finish sending a request this soon after starting it.
    static let requestTimeout: Int = 10
    /// An idle connection is closed after this long.
    static let idleTimeout: TimeInterval = 120

    let fd: Int32
    /// Who is at the other end, as the kernel says.
    let peer: AgentPeer
    let responder: AgentResponder
    var requestTimeout = ClientConnection.requestTimeout
    var idleTimeout = ClientConnection.idleTimeout

    private var environment: AgentEnvironment { responder.keys.environment }

    init(fd: Int32, peer: AgentPeer = .thisUser, responder: AgentResponder) {
        self.fd = fd
        self.peer = peer
        self.responder = responder
    }

    /// Serves the client until it hangs up, idles out, or the agent stops;
    /// then closes the connection. Each request's audit lines are written
    /// right after its answer is sent: the asker waits for neither the
    /// log's lock nor its file.
    func serve() {
        defer { close(fd) }
        // Answers are sent blocking, within the timeout; reads never block
        // (MSG_DONTWAIT, and poll with the request's deadline).
        let flags = fcntl(fd, F_GETFL)
        if flags & O_NONBLOCK != 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        var tv = timeval(tv_sec: requestTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var session: VaultSession?
        defer { session?.end() }
        let connection = ConnectionRecord(defersAudit: true)
        while waitForRequest(session: &session) {
            guard var body = receiveMessage() else { return }
            let ok = responder.serving { () -> Bool in
                var response = responder.answer(body, peer: peer, session: &session, connection: connection).framed
                secureZero(&body)
                let ok = send(response)
                secureZero(&response)
                responder.writeDeferredAudit(connection)
                return ok
            }
            // A connection whose requests keep being refused without
            // asking is closed: it has nothing more to get.
            guard ok, !connection.shouldClose else { return }
        }
    }

    /// Waits for the first byte of a request: false when the client hung
    /// up, stayed idle too long, or the agent is stopping. A session of
    /// keys the agent no longer holds (it locked, or unlocked again) is
    /// ended within a second, so that no connection keeps them in memory.
    func waitForRequest(session: inout VaultSession?) -> Bool {
        let start = environment.time.now()
        while true {
            if let held = session, held.keys !== responder.keys.current() {
                held.end()
                session = nil
            }
            guard !responder.keys.isStopping else { return false }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let n = poll(&p, 1, 1000)
            if n > 0 { return p.revents & Int16(POLLIN) != 0 }
            if n < 0 && errno != EINTR { return false }
            if environment.time.now().timeIntervalSince(start) > idleTimeout { return false }
        }
    }

    /// One framed message, or nil when the client hung up, was too slow
    /// (SO_RCVTIMEO) or sent an oversized length.
    func receiveMessage() -> [UInt8]? {
        let deadline = Monotonic.seconds() + Double(requestTimeout)
        guard let prefix = receiveExactly(4, by: deadline) else { return nil }
        let length = prefix.reduce(0) { ($0 << 8) | Int($1) }
        // A forwarded peer only asks for tokens: its requests are small, and
        // it never makes the agent set aside megabytes on its word.
        let limit = peer.origin == .forwarded ? AgentProtocol.maxForwardedLength : AgentProtocol.maxLength
        guard length > 0, length <= limit else {
            environment.log("refused a message of \(length) bytes")
            return nil
        }
        return receiveExactly(length, by: deadline)
    }

    /// `count` bytes, or nil when the client hung up or `deadline`
    /// (monotonic seconds) passed: a whole request must come within the
    /// request timeout, not each piece of it (a byte every few seconds
    /// would hold the connection for hours). What has arrived is read at
    /// once; only a request still on its way is waited for.
    private func receiveExactly(_ count: Int, by deadline: Double) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                got += n
                continue
            }
            let failure = errno
            if n < 0 && failure == EINTR { continue }
            var ready: Int32 = 0
            if n < 0 && (failure == EAGAIN || failure == EWOULDBLOCK) {
                let left = deadline - Monotonic.seconds()
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                ready = left > 0 ? poll(&p, 1, Int32(min(left * 1000 + 1, 1_000_000))) : 0
                if ready < 0 && errno == EINTR { continue }
            }
            guard ready > 0 else {
                secureZero(&out)
                return nil
            }
        }
        return out
    }

    private func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }
}
