internal import CPlatform
internal import Glibc

/// Starting the person's own programs (a browser, a confirmation dialog)
/// from vault, detached from it.
package enum Subprocess {
    /// Runs `/bin/sh` with `words` as its argv (`sh -c ...`) and `environment`
    /// as its whole environment, in a session of its own, with stdin,
    /// stdout and stderr on /dev/null, no other descriptor of vault's, and
    /// the default signal mask and dispositions:
    /// it must not read the stdin vault may need, write into vault's
    /// output, or hold a descriptor of the vault. Returns its pid, or nil
    /// when it could not be started.
    package static func startShell(_ words: [String], environment: [String: String]) -> Int32? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        vault_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Not the signals vault blocks or ignores (the agent takes its
        // signals on a descriptor): the program gets the defaults.
        guard vault_spawn_detached(&attributes) == 0 else { return nil }
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp) == 0 else { return nil }
        return pid
    }
}

extension Subprocess {
    /// `environment` without vault's own variables, whose values may be
    /// secrets or say where they are: what a person's command inherits.
    package static func withoutVaultVariables(_ environment: [String: String]) -> [String: String] {
        environment.filter { !$0.key.hasPrefix("VAULT_") }
    }

    /// This process's environment without vault's own variables.
    package static func inheritedEnvironment() -> [String: String] {
        var environment: [String: String] = [:]
        var entry = environ
        while let raw = entry.pointee {
            let text = String(cString: raw)
            if let eq = text.firstIndex(of: "=") {
                environment[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            entry += 1
        }
        return withoutVaultVariables(environment)
    }

    /// How a command started with `startShell` ended.
    package enum Ending: Sendable, Equatable {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it.
        case signalled
        /// It ran past the deadline: it and its process group were killed.
        case killed
        /// It could not be waited for.
        case vanished
    }

    /// Waits for `pid` (a session leader from `startShell`) until `deadline`
    /// on the monotonic clock; past it, kills its whole process group, so
    /// nothing it started lives on.
    package static func wait(_ pid: Int32, until deadline: Double) -> Ending {
        var status: Int32 = 0
        while true {
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid { break }
            if done < 0 && errno != EINTR { return .vanished }
            if Monotonic.seconds() >= deadline {
                kill(-pid, SIGKILL)
                kill(pid, SIGKILL)
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                return .killed
            }
            usleep(20_000)
        }
        return status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signalled
    }
}
