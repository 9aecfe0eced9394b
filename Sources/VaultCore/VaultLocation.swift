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
            throw VaultError(.invalidInput, "HOME is not set", hint: "set HOME, or VAULT_HOME and XDG_CONFIG_HOME")
        }
        for path in [data, config] where !path.hasPrefix("/") {
            throw VaultError(.invalidInput, "vault paths must be absolute: \(path)")
        }
        return VaultLocation(directory: data, configDirectory: config)
    }
}

/// File-system operations with the vault's rules, in one place.
package enum FileSystem {
    package static func errnoText() -> String { String(cString: strerror(errno)).lowercased() }

    /// Creates `path` and missing parents with mode 0700, then makes sure
    /// the final directory is ours and private.
    static func makePrivateDirectory(_ path: String) throws(VaultError) {
        var prefix = ""
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw VaultError(.io, "cannot create \(prefix): \(errnoText())")
            }
        }
        // mkdir honours the umask; set the mode explicitly.
        try checkPrivate(path, directory: true, fix: true)
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
                hint: "run 'chmod go-w \(path)' if that is intended to be private")
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

    /// The first `count` bytes of a file (fewer if it is shorter).
    static func readPrefix(_ path: String, count: Int) throws(VaultError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw VaultError(.io, "cannot open \(path): \(errnoText())") }
        defer { close(fd) }
        var out = [UInt8](repeating: 0, count: count)
        let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress, count) }
        guard n >= 0 else { throw VaultError(.io, "cannot read \(path): \(errnoText())") }
        return Array(out.prefix(n))
    }

    /// Creates an empty private file that must not exist yet.
    static func createExclusive(_ path: String) throws(VaultError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST { throw VaultError(.alreadyExists, "\(path) already exists") }
            throw VaultError(.io, "cannot create \(path): \(errnoText())")
        }
        fchmod(fd, 0o600)
        close(fd)
    }

    /// Flushes a file or directory to disk.
    static func sync(_ path: String, directory: Bool = false) throws(VaultError) {
        let fd = open(path, (directory ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw VaultError(.io, "cannot open \(path): \(errnoText())") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw VaultError(.io, "cannot sync \(path): \(errnoText())") }
    }

    /// Publishes `temporary` as `final` without replacing an existing file:
    /// hard link, then unlink the temporary name, then sync the directory.
    static func publishNew(_ temporary: String, as final: String, directory: String) throws(VaultError) {
        try sync(temporary)
        guard link(temporary, final) == 0 else {
            let e = errno
            if e == EEXIST { throw VaultError(.alreadyExists, "\(final) already exists") }
            throw VaultError(.io, "cannot create \(final): \(String(cString: strerror(e)).lowercased())")
        }
        unlink(temporary)
        try sync(directory, directory: true)
    }

    /// Writes `contents` to `path` atomically (temporary file, fsync,
    /// rename, fsync directory), mode 0600; refuses to replace an existing
    /// file unless `replace`.
    static func writeAtomically(_ path: String, contents: some SecureBytesView, replace: Bool) throws(VaultError) {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let dir = directory.isEmpty ? "." : directory
        let temporary = dir + "/.vault-tmp-\(UInt64.random(in: 0...UInt64.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw VaultError(.io, "cannot create a file in \(dir): \(errnoText())") }
        var ok = fchmod(fd, 0o600) == 0
        ok = ok && contents.withBytes { buf in write(fd, buf.baseAddress, buf.count) == buf.count }
        ok = ok && fsync(fd) == 0
        close(fd)
        guard ok else {
            unlink(temporary)
            throw VaultError(.io, "cannot write \(path): \(errnoText())")
        }
        if replace {
            guard rename(temporary, path) == 0 else {
                unlink(temporary)
                throw VaultError(.io, "cannot replace \(path): \(errnoText())")
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
    static func readSecret(_ path: String, limit: Int = 4096) throws(VaultError) -> SecureBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw VaultError(.io, "cannot open \(path): \(errnoText())") }
        defer { close(fd) }
        let buffer = try wrap { () throws(CryptoError) in try SecureBytes(count: limit + 1) }
        var total = 0
        while total <= limit {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, limit + 1 - total) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw VaultError(.io, "cannot read \(path): \(errnoText())") }
            if n == 0 { break }
            total += n
        }
        guard total <= limit else { throw VaultError(.invalidInput, "\(path) is larger than \(limit) bytes") }
        return try wrap { () throws(CryptoError) in try buffer.prefix(total) }
    }
}

extension SecureBytes: SecureBytesView {
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R { withUnsafeBytes(body) }
}

extension Keyfile {
    /// Reads and parses the key file at `path`.
    public static func read(path: String) throws(VaultError) -> SecureBytes {
        try decode(FileSystem.readSecret(path))
    }

    /// Writes a new key file at `path` (mode 0600); refuses to overwrite one.
    public static func write(_ secret: SecureBytes, to path: String) throws(VaultError) {
        try FileSystem.writeAtomically(path, contents: encode(secret), replace: false)
    }
}

/// Small secret files (passphrase files), read straight into secure memory.
public enum SecretFile {
    /// Reads the file at `path` (at most 4 KiB).
    public static func read(path: String) throws(VaultError) -> SecureBytes {
        try FileSystem.readSecret(path)
    }

    /// Drops one trailing "\n" or "\r\n", as editors and `echo` add.
    public static func trimmingNewline(_ raw: SecureBytes) throws(VaultError) -> SecureBytes {
        var n = raw.count
        raw.withUnsafeBytes { b in
            if n > 0 && b[n - 1] == 0x0a { n -= 1 }
            if n > 0 && b[n - 1] == 0x0d { n -= 1 }
        }
        return try wrap { () throws(CryptoError) in try raw.prefix(n) }
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
    package static func readFile(_ path: String, limit: Int) throws(VaultError) -> [UInt8] {
        let secret = try readSecret(path, limit: limit)
        return secret.unsafeCopyToArray()
    }
}
