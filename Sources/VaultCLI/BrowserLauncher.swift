internal import Glibc
internal import VaultCore

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
        // The browser must not read the stdin vault may need for a paste, nor
        // write into vault's output, which may be piped data, nor fill the
        // terminal with its complaints: the URL is printed.
        let words: [String] = ["sh", "-c", "\(command) \"$1\" &", "vault-browser", url]
        guard let pid = Subprocess.startShell(words, environment: Self.environment(from: environment)) else {
            return false
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return true
    }
}
