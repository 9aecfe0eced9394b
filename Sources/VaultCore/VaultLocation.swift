internal import Glibc
public import VaultCrypto

/// Where a vault and its configuration live, and the file-system rules
/// around them: directories 0700, files 0600 whatever the umask, no
/// group- or world-writable paths, atomic replacement of whole files.
public struct VaultLocation: Sendable, Equatable {
    /// The vault directory.
    public let directory: String
    /// The configuration directory (`$XDG_CONFIG_HOME/vault`).
    public let configDirectory: String

    /// The vault's database file.
    public var databasePath: String { directory + "/vault.db" }

    /// Explicit directories (tests, embedding applications).
    public init(directory: String, configDirectory: String) {
        self.directory = directory
        self.configDirectory = configDirectory
    }

    /// Resolves the directories from an environment: `VAULT_HOME`, else
    /// `$XDG_DATA_HOME/vault`, else `~/.local/share/vault`; configuration in
    /// `$XDG_CONFIG_HOME/vault`, else `~/.config/vault`.
    public static func resolve(environment: [String: String]) throws(VaultError) -> VaultLocation {
        func nonEmpty(_ key: String) -> String? { environment[key].flatMap { $0.isEmpty ? nil : $0 } }
        let home = nonEmpty("HOME")
        guard
            let data = nonEmpty("VAULT_HOME")
                ?? (nonEmpty("XDG_DATA_HOME") ?? home.map { $0 + "/.local/share" }).map({ $0 + "/vault" }),
            let config = (nonEmpty("XDG_CONFIG_HOME") ?? home.map { $0 + "/.config" }).map({ $0 + "/vault" })
        else {
            throw VaultError(.invalidInput, "HOME is not set", remedy: .setHome)
        }
        for path in [data, config] where !path.hasPrefix("/") {
            throw VaultError(.invalidInput, "vault paths must be absolute: \(path)")
        }
        return VaultLocation(directory: FileSystem.resolvingParent(data), configDirectory: config)
    }
}

/// File-system operations with the vault's rules, in one place.
package enum FileSystem {
    package static func errnoText() -> String { String(cString: strerror(errno)).lowercased() }

    /// The error for a failed write to `path`: a full disk (or quota) is
    /// named as such, with the path, whatever the call that met it.
    package static func writeFailure(_ what: String, _ path: String, errno e: Int32) -> VaultError {
        if e == ENOSPC || e == EDQUOT { return VaultError(.io, "the disk is full: cannot write \(path)") }
        return VaultError(.io, "\(what) \(path): \(String(cString: strerror(e)).lowercased())")
    }

    /// Creates `path` and missing parents with mode 0700, then makes sure
    /// the final directory is ours and private.
    package static func makePrivateDirectory(_ path: String) throws(VaultError) {
        var prefix = ""
        for component in path.split(separator: "/") {
            // Concrete String appends: `"/" + component` is generic over
            // the collection and looks up conformances at run time.
            prefix += "/"
            prefix += String(component)
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw writeFailure("cannot create", prefix, errno: errno)
            }
        }
        // mkdir honours the umask; set the mode explicitly.
        try checkPrivate(path, directory: true, fix: true)
        try checkAncestors(of: path)
    }

    /// `path` with its parent directory resolved (`realpath`), when the
    /// parent exists: a symbolic link above the vault directory (a home
    /// under /data, say) is followed once here, so every later open sees
    /// real directories only. The last component is kept as given, and
    /// refused later if it is a link.
    package static func resolvingParent(_ path: String) -> String {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/"), trimmed != "/" else { return path }
        let parent = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        guard let real = realPath(parent) else { return trimmed }
        return (real == "/" ? "" : real) + String(trimmed[slash...])
    }

    /// The canonical path of an existing file or directory, else nil.
    package static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Refuses `path` when a directory above it lets another user replace
    /// it: each must belong to the user or root, and one that others can
    /// write must be sticky (like /tmp), so they cannot rename what is ours.
    package static func checkAncestors(of path: String) throws(VaultError) {
        guard let real = realPath(path) else { throw VaultError(.io, "cannot resolve \(path): \(errnoText())") }
        var prefix = ""
        var ancestors = ["/"]
        for component in real.split(separator: "/").dropLast() {
            // Concrete String appends: `"/" + component` is generic over
            // the collection and looks up conformances at run time.
            prefix += "/"
            prefix += String(component)
            ancestors.append(prefix)
        }
        for directory in ancestors {
            var st = stat()
            guard lstat(directory, &st) == 0 else {
                throw VaultError(.io, "cannot inspect \(directory): \(errnoText())")
            }
            guard st.st_uid == geteuid() || st.st_uid == 0 else {
                throw VaultError(
                    .insecurePath, "\(directory), above \(path), belongs to another user (uid \(st.st_uid))",
                    remedy: .useOwnDirectories)
            }
            if st.st_mode & 0o022 != 0 && st.st_mode & mode_t(S_ISVTX) == 0 {
                throw VaultError(
                    .insecurePath, "\(directory), above \(path), is writable by other users",
                    remedy: .removeOthersWrite(path: directory, orElsewhere: true))
            }
        }
    }

    /// Refuses a file or directory that decides whom a token goes to or
    /// where a secret is sent (provider files, git mappings, passphrase and
    /// key files) unless it belongs to the user, nobody else can write it,
    /// and no directory above it lets another user replace it.
    package static func checkTrusted(_ path: String) throws(VaultError) {
        guard let real = realPath(path) else { throw VaultError(.io, "cannot open \(path): \(errnoText())") }
        var st = stat()
        guard lstat(real, &st) == 0 else { throw VaultError(.io, "cannot inspect \(path): \(errnoText())") }
        guard st.st_uid == geteuid() else {
            throw VaultError(
                .insecurePath, "\(path) belongs to another user (uid \(st.st_uid)), who could decide where tokens go",
                remedy: .replaceWithOwnFile)
        }
        guard st.st_mode & 0o022 == 0 else {
            throw VaultError(
                .insecurePath, "\(path) is writable by group or others, who could decide where tokens go",
                remedy: .removeOthersWrite(path: path, orElsewhere: false))
        }
        try checkAncestors(of: real)
    }

    /// Refuses a path that is a symbolic link, not ours, or writable by
    /// others. With `fix`, tightens group/world read bits of our own files.
    static func checkPrivate(_ path: String, directory: Bool, fix: Bool = false) throws(VaultError) {
        var st = stat()
        guard lstat(path, &st) == 0 else { throw VaultError(.io, "cannot inspect \(path): \(errnoText())") }
        let type = st.st_mode & S_IFMT
        guard type == (directory ? S_IFDIR : S_IFREG) else {
            throw VaultError(
                .insecurePath,
                "\(path) is not a \(directory ? "directory" : "regular file") (symbolic links are refused)")
        }
        guard st.st_uid == geteuid() else {
            throw VaultError(.insecurePath, "\(path) belongs to another user")
        }
        if st.st_mode & 0o022 != 0 && !fix {
            throw VaultError(
                .insecurePath, "\(path) is writable by group or others",
                remedy: .removeOthersWriteIfPrivate(path: path))
        }
        if !directory {
            // Another name for the file would outlive a replacement and let
            // whoever can reach that name read or keep the vault.
            guard st.st_nlink == 1 else {
                throw VaultError(
                    .insecurePath, "\(path) has \(st.st_nlink) hard links",
                    remedy: .removeOtherLinks)
            }
            // A file others could read was exposed: say so rather than tighten it quietly.
            if st.st_mode & 0o077 != 0 && !fix {
                throw VaultError(
                    .insecurePath,
                    "\(path) is readable by group or others (mode 0\(String(st.st_mode & 0o777, radix: 8)))",
                    remedy: .makeFilePrivate(path: path))
            }
        }
        let wanted: mode_t = directory ? 0o700 : 0o600
        if st.st_mode & 0o777 != wanted, fix || st.st_mode & 0o077 != 0 {
            guard chmod(path, wanted) == 0 else { throw VaultError(.io, "cannot chmod \(path): \(errnoText())") }
        }
    }

    package static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// The size of the file at `path` (not followed if a link), or nil
    /// when there is none. Reads no byte of it: a descriptor of the vault
    /// file opened and closed here would drop SQLite's locks on it.
    static func size(_ path: String) -> Int64? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return Int64(st.st_size)
    }

    /// True when this process may write the file at `path`; opens nothing.
    static func writable(_ path: String) -> Bool { access(path, W_OK) == 0 }

    /// Bytes an unprivileged writer may still use on the file system that
    /// holds `directory`, or nil when it cannot be told.
    static func freeBytes(_ directory: String) -> Int64? {
        var fs = statvfs()
        guard statvfs(directory, &fs) == 0 else { return nil }
        // root may use the reserved blocks too
        let blocks = geteuid() == 0 ? fs.f_bfree : fs.f_bavail
        return Int64(clamping: UInt64(blocks).multipliedReportingOverflow(by: UInt64(fs.f_frsize)).partialValue)
    }

    /// Creates an empty private file that must not exist yet.
    static func createExclusive(_ path: String) throws(VaultError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST { throw VaultError(.alreadyExists, "\(path) already exists") }
            throw writeFailure("cannot create", path, errno: errno)
        }
        fchmod(fd, 0o600)
        close(fd)
    }

    /// Flushes a file or directory to disk.
    static func sync(_ path: String, directory: Bool = false) throws(VaultError) {
        let fd = open(path, (directory ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw VaultError(.io, "cannot open \(path): \(errnoText())") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw writeFailure("cannot sync", path, errno: errno) }
    }

    /// Publishes `temporary` as `final` without replacing an existing file:
    /// hard link, then unlink the temporary name, then sync the directory.
    static func publishNew(_ temporary: String, as final: String, directory: String) throws(VaultError) {
        try sync(temporary)
        guard link(temporary, final) == 0 else {
            let e = errno
            if e == EEXIST { throw VaultError(.alreadyExists, "\(final) already exists") }
            throw writeFailure("cannot create", final, errno: e)
        }
        unlink(temporary)
        try sync(directory, directory: true)
    }

    /// Writes `contents` to `path` atomically (temporary file, fsync,
    /// rename, fsync directory), mode 0600; refuses to replace an existing
    /// file unless `replace`.
    package static func writeAtomically(_ path: String, secret contents: SecureBytes, replace: Bool)
        throws(VaultError)
    {
        try writeAtomically(path, contents: contents, replace: replace)
    }

    /// Writes `contents` to `path` atomically (see above).
    static func writeAtomically(_ path: String, contents: some SecureBytesView, replace: Bool) throws(VaultError) {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let dir = directory.isEmpty ? "." : directory
        let temporary = dir + "/.vault-tmp-\(UInt64.random(in: 0...UInt64.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw writeFailure("cannot create a file in", dir, errno: errno) }
        var ok = fchmod(fd, 0o600) == 0
        ok =
            ok
            && contents.withBytes { buf in
                // A short write is followed by one that says why (ENOSPC).
                var done = 0
                while done < buf.count {
                    let n = write(fd, buf.baseAddress! + done, buf.count - done)
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else { return false }
                    done += n
                }
                return true
            }
        ok = ok && fsync(fd) == 0
        let e = errno
        close(fd)
        guard ok else {
            unlink(temporary)
            throw writeFailure("cannot write", path, errno: e)
        }
        if replace {
            guard rename(temporary, path) == 0 else {
                let e = errno
                unlink(temporary)
                throw writeFailure("cannot replace", path, errno: e)
            }
            try sync(dir, directory: true)
        } else {
            do { try publishNew(temporary, as: path, directory: dir) } catch {
                unlink(temporary)
                throw error
            }
        }
    }

    package static func remove(_ path: String) { unlink(path) }

    /// Takes an exclusive `flock` on `path` (created 0600), waiting for it.
    static func lockExclusive(_ path: String) throws(VaultError) -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw VaultError(.io, "cannot open \(path): \(errnoText())") }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                close(fd)
                throw VaultError(.io, "cannot lock \(path): \(errnoText())")
            }
        }
        return fd
    }

    /// Releases a lock from `lockExclusive`.
    static func unlock(_ fd: Int32) { close(fd) }
}

/// Read access to bytes that may be secret, without copying them out.
protocol SecureBytesView {
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R
}

extension FileSystem {
    /// Reads a small secret file (a key file, a passphrase file) straight
    /// into secure memory. Refuses files over `limit` bytes.
    static func readSecret(_ path: String, limit: Int = 4096, trusted: Bool = false) throws(VaultError)
        -> SecureBytes
    {
        if trusted {
            // A shell's process substitution, `<(command)`, is a /dev/fd
            // link to a pipe that has no path of its own, so the trust
            // check's realpath would call it missing: say what it is first.
            var st = stat()
            if stat(path, &st) == 0 && st.st_mode & S_IFMT != S_IFREG { throw notRegularFile(path) }
            try checkTrusted(path)
        }
        // Non-blocking, so a FIFO with no writer cannot hang the open.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { throw VaultError(.io, "cannot open \(path): \(errnoText())") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw VaultError(.io, "cannot inspect \(path): \(errnoText())") }
        guard st.st_mode & S_IFMT == S_IFREG else { throw notRegularFile(path) }
        let buffer = try Secure.buffer(count: limit + 1)
        var total = 0
        while total <= limit {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, limit + 1 - total) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw VaultError(.io, "cannot read \(path): \(errnoText())") }
            if n == 0 { break }
            total += n
        }
        guard total <= limit else { throw VaultError(.invalidInput, "\(path) is larger than \(limit) bytes") }
        return try Secure.prefix(buffer, total)
    }

    /// The refusal of a secret file that is a pipe, a device or a
    /// directory: a pipe is read once and may block, a device may change,
    /// and neither can be checked for who may write it.
    private static func notRegularFile(_ path: String) -> VaultError {
        VaultError(
            .invalidInput, "\(path) is not a regular file (a pipe or a device could block or change)",
            remedy: .secretFromFileOrCommand)
    }
}

extension SecureBytes: SecureBytesView {
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R { withUnsafeBytes(body) }
}

extension Keyfile {
    /// Reads and parses the key file at `path`.
    public static func read(path: String) throws(VaultError) -> SecureBytes {
        try decode(FileSystem.readSecret(path, trusted: true))
    }

    /// Writes a new key file at `path` (mode 0600); refuses to overwrite one.
    public static func write(_ secret: SecureBytes, to path: String) throws(VaultError) {
        try FileSystem.writeAtomically(path, contents: encode(secret), replace: false)
    }
}

/// Small secret files (passphrase files), read straight into secure memory.
public enum SecretFile {
    /// Reads the file at `path` (at most 4 KiB): a regular file of the
    /// user's that nobody else can write.
    public static func read(path: String) throws(VaultError) -> SecureBytes {
        try FileSystem.readSecret(path, trusted: true)
    }

    /// Reads the file at `path`, at most `limit` bytes (a service account's
    /// key file, a private key), with the same checks as `read(path:)`.
    public static func read(path: String, limit: Int) throws(VaultError) -> SecureBytes {
        try FileSystem.readSecret(path, limit: limit, trusted: true)
    }

    /// Drops one trailing "\n" or "\r\n", as editors and `echo` add.
    public static func trimmingNewline(_ raw: SecureBytes) throws(VaultError) -> SecureBytes {
        var n = raw.count
        raw.withUnsafeBytes { b in
            if n > 0 && b[n - 1] == 0x0a { n -= 1 }
            if n > 0 && b[n - 1] == 0x0d { n -= 1 }
        }
        return try Secure.prefix(raw, n)
    }
}

extension FileSystem {
    /// Names in a directory (not . and ..); empty when it does not exist.
    static func listDirectory(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Reads a whole non-secret file of at most `limit` bytes.
    package static func readFile(_ path: String, limit: Int, trusted: Bool = false) throws(VaultError) -> [UInt8] {
        let secret = try readSecret(path, limit: limit, trusted: trusted)
        return secret.unsafeCopyToArray()
    }
}
