internal import CPlatform
internal import Glibc
public import VaultCore
internal import VaultCrypto
internal import VaultSync

/// Where the agent of one vault listens: `$XDG_RUNTIME_DIR/vault/`, a
/// directory of mode 0700, holding `agent-ID.sock`, `forward-ID.sock` and
/// `agent-ID.lock` where ID is a hash of the vault directory's real path.
public struct AgentPaths: Sendable, Equatable {
    /// The private runtime directory.
    public let directory: String
    /// The Unix socket.
    public let socket: String
    /// The lock file an agent holds while it runs, so only one serves a vault.
    public let lock: String
    /// The socket to forward to other machines (`ssh -R`): it answers
    /// access tokens only (docs/agent.md, "Forwarding").
    public var forwardSocket: String {
        directory + "/forward-" + socket.dropFirst(directory.count + "/agent-".count)
    }

    /// The paths for `location`, or nil when `XDG_RUNTIME_DIR` is not set
    /// (there is then no agent: it needs a per-user, memory-backed place).
    public static func resolve(environment: [String: String], location: VaultLocation) -> AgentPaths? {
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else { return nil }
        var resolved = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let real =
            realpath(location.directory, &resolved) != nil
            ? String(decoding: resolved.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            : location.directory
        let id = directoryID(real)
        let directory = runtime + "/vault"
        return AgentPaths(
            directory: directory, socket: directory + "/agent-\(id).sock", lock: directory + "/agent-\(id).lock")
    }

    /// A name for the vault directory's real path: 64-bit FNV-1a, in hex.
    /// It only tells one user's vaults apart inside their own private
    /// directory, so it needs no cryptographic hash, and asking the agent
    /// for a token does not load libsodium to compute it.
    static func directoryID(_ path: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return String(hex: hash, width: 16)
    }

    /// Creates the directory if needed and refuses one that is a symbolic
    /// link, not ours, or open to others.
    func prepareDirectory() throws(VaultError) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw VaultError(.io, "cannot create \(directory): \(FileSystem.errnoText())")
        }
        try checkDirectory()
    }

    /// The directory must be a real directory of ours with mode 0700.
    func checkDirectory() throws(VaultError) {
        var st = stat()
        guard lstat(directory, &st) == 0 else {
            if errno == ENOENT { throw VaultError(.notFound, "no agent directory at \(directory)") }
            throw VaultError(.io, "cannot inspect \(directory): \(FileSystem.errnoText())")
        }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw VaultError(.insecurePath, "\(directory) is not a directory (symbolic links are refused)")
        }
        guard st.st_uid == geteuid() else { throw VaultError(.insecurePath, "\(directory) belongs to another user") }
        guard st.st_mode & 0o077 == 0 else {
            throw VaultError(
                .insecurePath, "\(directory) is open to other users", remedy: .makeDirectoryPrivate(path: directory))
        }
    }

    /// The socket must be a socket of ours, not a link to one elsewhere.
    func checkSocket() throws(VaultError) {
        var st = stat()
        guard lstat(socket, &st) == 0 else {
            throw VaultError(.notFound, "no agent socket at \(socket)")
        }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            throw VaultError(.insecurePath, "\(socket) is not a socket (symbolic links are refused)")
        }
        guard st.st_uid == geteuid() else { throw VaultError(.insecurePath, "\(socket) belongs to another user") }
    }
}

/// One connection to an agent, blocking with timeouts. Whoever holds the
/// other end has been checked to run as our uid.
final class AgentConnection {
    let fd: Int32
    /// Set when sending or receiving failed: the agent went away (or hung)
    /// and may not have answered, as opposed to answering with an error.
    private(set) var broken = false
    /// Set once any byte came from the other end: a connection that
    /// breaks before it is was accepted by nothing that answers (an `ssh
    /// -R` forwarding whose far end has no agent listening).
    private(set) var heardFrom = false
    /// Seconds each send and receive may take (0: no limit).
    private(set) var timeout = 0

    init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    /// Connects after checking the directory, the socket and the peer.
    /// `notFound` when no agent is listening.
    static func connect(_ paths: AgentPaths, timeout: Int) throws(VaultError) -> AgentConnection {
        try paths.checkDirectory()
        try paths.checkSocket()
        return try connect(socket: paths.socket, timeout: timeout, absent: "no agent is listening at \(paths.socket)")
    }

    /// Connects to a socket whose file was checked, and checks that its
    /// server runs as our uid; `absent` is the reason when nothing listens.
    static func connect(socket path: String, timeout: Int, absent: String) throws(VaultError) -> AgentConnection {
        let fd = vault_unix_connect(path)
        guard fd >= 0 else {
            if errno == ECONNREFUSED || errno == ENOENT { throw VaultError(.notFound, absent) }
            throw VaultError(.io, "cannot connect to the agent: \(FileSystem.errnoText())")
        }
        let connection = AgentConnection(fd: fd)
        guard vault_peer_uid(fd) == Int64(geteuid()) else {
            throw VaultError(.insecurePath, "the agent socket \(path) is served by another user")
        }
        connection.setTimeout(seconds: timeout)
        return connection
    }

    func setTimeout(seconds: Int) {
        timeout = seconds
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends a request and returns the response body (status checked).
    func call(_ request: MessageWriter) throws(VaultError) -> MessageReader {
        var framed = request.framed
        defer { secureZero(&framed) }
        let answer: [UInt8]
        do {
            try send(framed)
            answer = try receive()
        } catch {
            broken = true
            throw error
        }
        var reader = MessageReader(answer)
        try reader.response()
        return reader
    }

    func send(_ bytes: [UInt8]) throws(VaultError) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw VaultError(.io, "the agent connection failed: \(FileSystem.errnoText())") }
            sent += n
        }
    }

    /// One length-prefixed body; refuses lengths over the cap before reading.
    func receive() throws(VaultError) -> [UInt8] {
        let header = try readExactly(4)
        let length = header.reduce(0) { ($0 << 8) | Int($1) }
        guard length > 0, length <= AgentProtocol.maxLength else {
            throw VaultError(.damaged, "the agent sent a message of \(length) bytes")
        }
        return try readExactly(length)
    }

    private func readExactly(_ count: Int) throws(VaultError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                throw VaultError(.transient, "the agent did not answer in time")
            }
            guard n > 0 else { throw VaultError(.io, "the agent closed the connection") }
            heardFrom = true
            got += n
        }
        return out
    }
}
