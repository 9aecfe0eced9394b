internal import Glibc

/// Who is at the other end of a loopback TCP connection. `SO_PEERCRED`
/// works only for Unix sockets; for TCP the kernel's socket table
/// (`/proc/net/tcp`) names the owner of the connecting socket, the way an
/// ident server finds it.
enum LoopbackPeer {
    /// The uid owning the peer socket of `client`, accepted on 127.0.0.1 at
    /// `listenerPort`, or nil when it cannot be told.
    static func uid(of client: Int32, listenerPort: UInt16) -> uid_t? {
        var peer = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let got = withUnsafeMutablePointer(to: &peer) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(client, $0, &length) }
        }
        guard got == 0, peer.sin_family == sa_family_t(AF_INET) else { return nil }
        // The table prints each address as the 32-bit value in host order
        // and the port in host order, both in upper-case hex.
        let local = hex(UInt64(peer.sin_addr.s_addr), 8) + ":" + hex(UInt64(UInt16(bigEndian: peer.sin_port)), 4)
        let remote = hex(UInt64(UInt32(0x7f00_0001).bigEndian), 8) + ":" + hex(UInt64(listenerPort), 4)
        guard let table = read("/proc/net/tcp") else { return nil }
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 7, fields[1] == local, fields[2] == remote else { continue }
            return uid_t(fields[7])
        }
        return nil
    }

    static func hex(_ value: UInt64, _ width: Int) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while bytes.count < 64 << 20 {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
