internal import Glibc

/// A one-shot HTTP listener on 127.0.0.1 for the OAuth redirect (RFC 8252
/// section 7.3). It answers requests for other paths with 404 and keeps
/// waiting; the first GET on the exact path gets a page saying the browser
/// can be closed, and its query parameters are returned.
///
/// Only connections from processes of this user are answered: any local
/// user can connect to a loopback port, and the redirect's `state` is the
/// only other thing that tells the flow's browser from another user's
/// process. The owner of the connecting socket is read from the kernel's
/// table of TCP sockets.
public final class LoopbackListener {
    private let fd: Int32
    private var launchPath: String? = nil
    private var launchTarget: String? = nil
    /// The port it listens on (chosen by the system when 0 was asked).
    public let port: UInt16
    /// The path the redirect must use.
    public let path: String

    /// The redirect URI to register and send: `http://127.0.0.1:PORT/PATH`.
    public var redirectURI: String { "http://127.0.0.1:\(port)\(path)" }

    /// Listens on 127.0.0.1 at `port` (0 for any free port).
    public init(port: UInt16 = 0, path: String = "/callback") throws(HTTPError) {
        self.path = path.hasPrefix("/") ? path : "/" + path
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw HTTPError(.unavailable, "cannot create a socket: \(Self.errnoText())") }
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian  // 127.0.0.1 only, never 0.0.0.0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(s, 8) == 0 else {
            let reason = Self.errnoText()
            close(s)
            throw HTTPError(.unavailable, "cannot listen on 127.0.0.1:\(port): \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &length) }
        }
        fd = s
        self.port = UInt16(bigEndian: actual.sin_port)
    }

    deinit { close(fd) }

    /// Serves `target` as a redirect (302) at `path`, to this user's
    /// processes only, and returns the loopback address to open instead of
    /// `target`. A browser started with that address on its command line,
    /// which every local user can read, shows no secret of `target`.
    public func offer(_ target: String, at path: String) -> String {
        launchPath = path.hasPrefix("/") ? path : "/" + path
        launchTarget = target
        return "http://127.0.0.1:\(port)\(launchPath!)"
    }

    /// Waits up to `timeout` seconds for the redirect and returns its query
    /// parameters. Throws `.network` ("timed out") when nobody came.
    public func waitForRedirect(timeout: Double) throws(HTTPError) -> [(String, String)] {
        let deadline = Self.now() + timeout
        while true {
            let remaining = deadline - Self.now()
            guard remaining > 0 else { throw HTTPError(.network, "timed out waiting for the browser to come back") }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(min(remaining, 3600) * 1000))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            let client = accept(fd, nil, nil)
            guard client >= 0 else { continue }
            defer { close(client) }
            guard LoopbackPeer.uid(of: client, listenerPort: port) == getuid() else {
                // Another user's process: refused before a byte is read.
                Self.respond(client, status: "403 Forbidden", body: "Forbidden.")
                continue
            }
            guard let target = Self.readRequestTarget(client) else {
                Self.respond(client, status: "400 Bad Request", body: "Bad request.")
                continue
            }
            let (requestPath, query) = Self.split(target)
            if let launchPath, let launchTarget, requestPath == launchPath {
                Self.respond(client, status: "302 Found", body: "Redirecting.", location: launchTarget)
                continue
            }
            guard requestPath == path else {
                Self.respond(client, status: "404 Not Found", body: "Not found.")
                continue
            }
            Self.respond(
                client, status: "200 OK",
                body: "vault received the answer. You can close this tab and return to the terminal.")
            return FormEncoding.decode(query)
        }
    }

    /// Reads the request head (at most 8 KiB, 5 s) and returns the target of
    /// a GET request line.
    static func readRequestTarget(_ client: Int32) -> Substring? {
        var head = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 2048)
        let deadline = now() + 5
        while head.count < 8192 {
            var p = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            let left = deadline - now()
            guard left > 0, poll(&p, 1, Int32(left * 1000)) > 0 else { return nil }
            let n = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            guard n > 0 else { return nil }
            head += buffer[0..<n]
            if head.contains(0x0a) { return requestTarget(head) }
        }
        return nil
    }

    /// The target of a `GET TARGET HTTP/1.x` request line, or nil.
    public static func requestTarget(_ head: [UInt8]) -> Substring? {
        guard let end = head.firstIndex(of: 0x0a) else { return nil }
        let line = String(decoding: head[..<end], as: UTF8.self)
        let parts = line.split(separator: " ")
        guard parts.count == 3, parts[0] == "GET", parts[2].hasPrefix("HTTP/1.") else { return nil }
        return parts[1]
    }

    static func split(_ target: Substring) -> (Substring, Substring) {
        guard let q = target.firstIndex(of: "?") else { return (target, "") }
        return (target[..<q], target[target.index(after: q)...])
    }

    static func respond(_ client: Int32, status: String, body: String, location: String? = nil) {
        let html = "<!doctype html><meta charset=utf-8><title>vault</title><p>\(body)</p>\n"
        let text =
            "HTTP/1.1 \(status)\r\n" + (location.map { "Location: \($0)\r\n" } ?? "")
            + "Content-Type: text/html; charset=utf-8\r\nContent-Length: \(html.utf8.count)\r\n"
            + "Cache-Control: no-store\r\nConnection: close\r\n\r\n" + html
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(client, $0.baseAddress! + offset, $0.count - offset) }
            if n <= 0 { break }
            offset += n
        }
    }

    static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    static func errnoText() -> String { String(cString: strerror(errno)).lowercased() }
}
