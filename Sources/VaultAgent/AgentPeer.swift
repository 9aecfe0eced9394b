internal import CPlatform
internal import Glibc

/// Who is asking: what the kernel says of the process at the other end of
/// a connection, and whether the request comes from this machine or from
/// another one through a forwarded socket.
package struct AgentPeer: Sendable, Equatable {
    /// Where a request comes from.
    package enum Origin: String, Sendable, Codable, CaseIterable {
        /// A process of this machine, on the agent's own socket.
        case local
        /// Another machine, through `ssh -R` (the forwarding socket, or the
        /// agent's own socket when the process at this end is ssh).
        case forwarded
    }

    package var origin: Origin
    /// The peer's uid (SO_PEERCRED); for a forwarded request, ssh's.
    package var uid: Int
    /// The peer's pid (SO_PEERCRED), or nil when the kernel did not say.
    package var pid: Int?
    /// The peer's executable (`/proc/PID/exe`), or nil when unreadable.
    package var executable: String?
    /// For a forwarded request: the destination the ssh process at this
    /// end was started with (`user@host`, from its own command line, which
    /// the other machine cannot change), or nil when it cannot be told (a
    /// multiplexing master rewrites its command line).
    package var destination: String?

    package init(origin: Origin, uid: Int, pid: Int?, executable: String?, destination: String? = nil) {
        self.origin = origin
        self.uid = uid
        self.pid = pid
        self.executable = executable
        self.destination = destination
    }

    /// A local peer of this uid the kernel said nothing more of.
    static var thisUser: AgentPeer { AgentPeer(origin: .local, uid: Int(geteuid()), pid: nil, executable: nil) }

    /// This process, for a token a command hands out itself.
    package static var thisProcess: AgentPeer {
        AgentPeer(
            origin: .local, uid: Int(getuid()), pid: Int(getpid()), executable: executablePath(Int(getpid())))
    }

    /// The process the kernel names (SO_PEERCRED) at the other end of a
    /// connection. A connection to the agent's own socket from ssh is a
    /// forwarded one: whoever forwarded that socket instead of the
    /// forwarding socket still gets no more than a forwarded peer does.
    static func of(uid: Int, pid raw: Int32, socketOrigin: Origin) -> AgentPeer {
        let pid = raw > 0 ? Int(raw) : nil
        let executable = pid.flatMap(executablePath)
        let viaSSH = executable.map { AgentPeer.isSSHClient($0) } ?? false
        let origin = viaSSH ? .forwarded : socketOrigin
        return AgentPeer(
            origin: origin, uid: uid, pid: pid, executable: executable,
            destination: origin == .forwarded ? pid.flatMap(commandLine).flatMap(sshDestination) : nil)
    }

    /// The arguments of process `pid` (`/proc/PID/cmdline`, at most 8 KiB).
    private static func commandLine(_ pid: Int) -> [String]? {
        let fd = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 8192 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// The destination of an OpenSSH command line: its first argument that
    /// is neither an option nor an option's value, cut to 253 bytes. Nil
    /// for one without (a multiplexing master shows `ssh: PATH [mux]`), or
    /// for another program's.
    static func sshDestination(_ arguments: [String]) -> String? {
        guard let program = arguments.first, isSSHClient(program), !program.hasPrefix("ssh:") else { return nil }
        // ssh(1)'s options that take a value.
        let valued = Set("BbcDEeFIiJLlmOoPpQRSWw")
        var rest = arguments.dropFirst()
        while let argument = rest.first {
            rest = rest.dropFirst()
            if argument == "--" { return rest.first.map { RequesterClaims.cut($0, bytes: RequesterClaims.maxHost) } }
            guard argument.hasPrefix("-"), argument.count > 1 else {
                return argument.isEmpty ? nil : RequesterClaims.cut(argument, bytes: RequesterClaims.maxHost)
            }
            // Flags run together (-vAR ...): the first that takes a value
            // takes the rest of the word, or the next argument.
            let flags = argument.dropFirst()
            if let i = flags.firstIndex(where: { valued.contains($0) }), flags.index(after: i) == flags.endIndex {
                rest = rest.dropFirst()
            }
        }
        return nil
    }

    /// True for the OpenSSH client (or its multiplexing master), which is
    /// the process at this end of every `ssh -R` forwarded connection.
    /// Every connection asks, so the path's bytes are looked at in place.
    static func isSSHClient(_ executable: String) -> Bool {
        var path = executable.utf8[...]
        while path.last == UInt8(ascii: "/") { path = path.dropLast() }
        let base = path.lastIndex(of: UInt8(ascii: "/")).map { path[path.index(after: $0)...] } ?? path
        // A path of slashes alone names no program.
        guard !base.isEmpty else { return false }
        let ssh = "ssh".utf8
        return base.starts(with: ssh) && (base.count == 3 || base.dropFirst(3).first == UInt8(ascii: " "))
    }

    private static func executablePath(_ pid: Int) -> String? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(PATH_MAX) + 1) { buffer in
            let n = readlink("/proc/\(pid)/exe", buffer.baseAddress!, buffer.count - 1)
            guard n > 0 else { return nil }
            return String(
                decoding: UnsafeRawBufferPointer(start: buffer.baseAddress!, count: n), as: UTF8.self)
        }
    }
}

/// What a forwarded client says about itself: its host, command, uid and
/// pid on its own machine. Nothing checks these; they are shown and logged
/// as claims, escaped, and never decide anything.
package struct RequesterClaims: Sendable, Equatable, Codable {
    /// The host name the client reports.
    package var host: String
    /// The command line of the process that asked, as the client reports it.
    package var command: String
    /// The client's uid on its own machine.
    package var uid: UInt32
    /// The asking process's pid on its own machine.
    package var pid: UInt32

    /// Longest host and command kept; longer claims are cut.
    static let maxHost = 253
    static let maxCommand = 512

    package init(host: String, command: String, uid: UInt32, pid: UInt32) {
        self.host = RequesterClaims.cut(host, bytes: RequesterClaims.maxHost)
        self.command = RequesterClaims.cut(command, bytes: RequesterClaims.maxCommand)
        self.uid = uid
        self.pid = pid
    }

    /// At most `bytes` bytes of UTF-8 (never characters: one character may
    /// carry any number of combining marks), cut at a scalar's boundary.
    static func cut(_ text: String, bytes: Int) -> String {
        var out = String.UnicodeScalarView()
        var used = 0
        for scalar in text.unicodeScalars {
            used += String(scalar).utf8.count
            guard used <= bytes else { break }
            out.append(scalar)
        }
        return String(out)
    }

    /// This process's own claims: its host name, the program that ran
    /// `vault` (its parent's argv[0] only: the rest of a command line may
    /// hold what should not travel, such as a header given to curl), its
    /// uid and its parent's pid.
    package static func ofThisProcess() -> RequesterClaims {
        var name = [CChar](repeating: 0, count: 256)
        let host =
            gethostname(&name, name.count - 1) == 0
            ? String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let parent = getppid()
        let raw = readSmallFile("/proc/\(parent)/cmdline")
        let command = String(
            decoding: raw.split(separator: 0, omittingEmptySubsequences: false).first ?? [], as: UTF8.self)
        return RequesterClaims(host: host, command: command, uid: getuid(), pid: UInt32(max(parent, 0)))
    }

    private static func readSmallFile(_ path: String) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var out = [UInt8](repeating: 0, count: 4096)
        let n = read(fd, &out, out.count)
        return n > 0 ? Array(out[0..<n]) : []
    }
}
