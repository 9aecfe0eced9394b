internal import CPlatform
internal import Glibc

/// Starts the person's browser for an authorization, detached from vault:
/// its own session, no descriptor beyond 0-2 (all /dev/null), and an
/// environment without vault's own variables, whose values may be secrets
/// (VAULT_PASSPHRASE) or say where secrets are (VAULT_KEYFILE).
enum BrowserLauncher {
    /// The environment the browser gets: vault's, minus every `VAULT_*`
    /// variable. The rest (DISPLAY, WAYLAND_DISPLAY, DBUS_SESSION_BUS_ADDRESS,
    /// XDG_*, HOME, PATH, LANG, proxies) is what a browser needs to show a
    /// window in the person's session.
    static func environment(from environment: [String: String]) -> [String: String] {
        environment.filter { !$0.key.hasPrefix("VAULT_") }
    }

    /// Runs `sh -c 'COMMAND "$1" &'` with `url` as `$1` and waits for the
    /// shell only: the browser, started in the background, outlives vault
    /// as any program the person opened would, and is not vault's child.
    /// Returns false when the shell could not be started.
    static func launch(_ command: String, url: String, environment: [String: String]) -> Bool {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // The browser must not read the stdin vault may need for a paste, nor
        // write into vault's output, which may be piped data, nor fill the
        // terminal with its complaints: the URL is printed.
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        vault_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, vault_spawn_setsid_flag())
        let words: [String] = ["sh", "-c", "\(command) \"$1\" &", "vault-browser", url]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] =
            Self.environment(from: environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp) == 0 else { return false }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return true
    }
}
