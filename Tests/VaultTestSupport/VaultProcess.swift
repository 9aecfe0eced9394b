import CPlatform
import Foundation
import Glibc

/// The result of running the `vault` binary.
public struct ProcessResult: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
}

/// Runs the built `vault` executable, as a user would.
public enum VaultProcess {
    /// The binary: `VAULT_BINARY` if set, else the debug build of this package.
    public static var binary: String {
        if let b = ProcessInfo.processInfo.environment["VAULT_BINARY"], !b.isEmpty { return b }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/vault").path
    }

    /// A minimal environment for a test vault at `home`.
    public static func environment(home: String, extra: [String: String] = [:]) -> [String: String] {
        var env = [
            "HOME": home, "VAULT_HOME": home + "/vault", "XDG_CONFIG_HOME": home + "/config",
            "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
        ]
        for (k, v) in extra { env[k] = v }
        return env
    }

    /// Runs `vault ARGS` with `stdin` as standard input and waits for it.
    public static func run(
        _ arguments: [String], environment: [String: String], stdin: String? = nil, newSession: Bool = true
    ) throws -> ProcessResult {
        let process = try start(arguments, environment: environment, stdin: stdin, newSession: newSession)
        return process.wait()
    }

    /// Starts `vault ARGS` without waiting.
    public static func start(
        _ arguments: [String], environment: [String: String], stdin: String? = nil, newSession: Bool = true,
        executable: String? = nil, stderrFile: String? = nil, interactive: Bool = false
    ) throws -> RunningProcess {
        try RunningProcess(
            executable: executable ?? binary, arguments: arguments, environment: environment, stdin: stdin,
            newSession: newSession, stderrFile: stderrFile, interactive: interactive)
    }
}

/// A child process with captured output. Started with `setsid` by default so
/// it has no controlling terminal, as under CI.
public final class RunningProcess: @unchecked Sendable {
    public let pid: Int32
    private let outFD: Int32
    private let errFD: Int32

    private let stderrFile: String?

    init(
        executable: String, arguments: [String], environment: [String: String], stdin: String?, newSession: Bool,
        stderrFile: String? = nil, interactive: Bool = false
    ) throws {
        self.stderrFile = stderrFile
        _ = RunningProcess.ignoreBrokenPipes
        var inPipe: [Int32] = [0, 0]
        var outPipe: [Int32] = [0, 0]
        var errPipe: [Int32] = [0, 0]
        guard pipe(&inPipe) == 0, pipe(&outPipe) == 0, pipe(&errPipe) == 0 else {
            throw POSIXError(.EMFILE)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        if let stderrFile {
            // Readable while the child runs (a device code to approve).
            posix_spawn_file_actions_addopen(&actions, 2, stderrFile, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        } else {
            posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        }
        // The child keeps only 0, 1 and 2: children spawned at the same time
        // from other threads must not inherit each other's pipe ends (a stdin
        // that never reaches EOF).
        vault_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Children start with no blocked signals and default handlers, as
        // from a shell; the test runner's threads block some signals.
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        // 0x80 is POSIX_SPAWN_SETSID; 0x04 SETSIGDEF, 0x08 SETSIGMASK (macros Swift does not import).
        posix_spawnattr_setflags(&attributes, Int16((newSession ? 0x80 : 0) | 0x04 | 0x08))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        close(inPipe[0])
        close(outPipe[1])
        close(errPipe[1])
        guard rc == 0 else {
            close(inPipe[1])
            close(outPipe[0])
            close(errPipe[0])
            throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EINVAL)
        }
        pid = child
        outFD = outPipe[0]
        errFD = errPipe[0]
        let inFD = inPipe[1]
        if interactive {
            stdinFD = inFD
            return
        }
        // Write stdin in the background so a large input cannot deadlock.
        let input = Array((stdin ?? "").utf8)
        Thread.detachNewThread {
            var offset = 0
            while offset < input.count {
                let n = input.withUnsafeBytes { write(inFD, $0.baseAddress! + offset, input.count - offset) }
                if n <= 0 { break }
                offset += n
            }
            close(inFD)
        }
    }

    private var stdinFD: Int32 = -1

    /// Writes to the child's stdin (started with `interactive`), then closes it.
    public func send(_ text: String) {
        guard stdinFD >= 0 else { return }
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { write(stdinFD, $0.baseAddress, $0.count) }
        close(stdinFD)
        stdinFD = -1
    }

    /// A child that exits without reading its stdin must not kill the test
    /// runner with SIGPIPE; the feeding write then just fails.
    private static let ignoreBrokenPipes: Void = { _ = Glibc.signal(SIGPIPE, SIG_IGN) }()

    /// Sends a signal.
    public func signal(_ sig: Int32) { kill(pid, sig) }

    /// Waits for exit; a signal death is reported as 128 + signal. A child
    /// still running after `timeout` seconds is killed, so a hang fails the
    /// test instead of stalling the run.
    public func wait(timeout: Double = 120) -> ProcessResult {
        let watched = pid
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            if done.wait(timeout: .now() + timeout) == .timedOut { kill(watched, SIGKILL) }
        }
        defer { done.signal() }
        let group = DispatchGroup()
        nonisolated(unsafe) var out = Drained()
        nonisolated(unsafe) var err = Drained()
        let oFD = outFD
        let eFD = errFD
        // A grandchild that keeps the pipe open after the child is killed,
        // or a child that writes without end, fails the test that ran it
        // instead of holding or filling the whole run.
        let giveUp = DispatchTime.now() + timeout + 5
        group.enter()
        Thread.detachNewThread {
            out = RunningProcess.drain(oFD, until: giveUp)
            group.leave()
        }
        err = RunningProcess.drain(eFD, until: giveUp)
        group.wait()
        if out.cut != nil || err.cut != nil {
            // With its process group, where it has one of its own.
            kill(-watched, SIGKILL)
            kill(watched, SIGKILL)
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        var errBytes = err.bytes
        if let stderrFile, let data = FileManager.default.contents(atPath: stderrFile) { errBytes = [UInt8](data) }
        for (stream, drained) in [("stdout", out), ("stderr", err)] {
            if let cut = drained.cut { errBytes += Array("\n[test harness: \(stream) \(cut)]\n".utf8) }
        }
        let failed = out.cut != nil || err.cut != nil
        return ProcessResult(
            status: failed ? 255 : code, stdout: String(decoding: out.bytes, as: UTF8.self),
            stderr: String(decoding: errBytes, as: UTF8.self))
    }

    /// What was read from one of the child's pipes, and why reading it
    /// stopped early, if it did.
    private struct Drained {
        var bytes: [UInt8] = []
        var cut: String?
    }

    /// More than any command of the tests writes: a child past it is
    /// writing without end.
    private static let outputLimit = 64 << 20

    private static func drain(_ fd: Int32, until giveUp: DispatchTime) -> Drained {
        var drained = Drained()
        var buffer = [UInt8](repeating: 0, count: 65536)
        defer { close(fd) }
        while true {
            if DispatchTime.now() >= giveUp {
                drained.cut = "was still open long after the process was killed for taking too long"
                return drained
            }
            var watch = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&watch, 1, 1000)
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { continue }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return drained }
            drained.bytes += buffer[0..<n]
            if drained.bytes.count > outputLimit {
                drained.cut = "passed \(outputLimit >> 20) MiB: the process was killed"
                return drained
            }
        }
    }
}
