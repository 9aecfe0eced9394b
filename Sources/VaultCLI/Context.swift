internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultSync

/// Everything a command needs: its arguments, the environment, the
/// streams and the clock. Built once per process.
struct Context {
    let command: Command
    let arguments: ParsedArguments
    let environment: [String: String]
    let console = Console()
    let time: any TimeSource = SystemTime()

    var json: Bool { arguments.flag("json") }

    /// Checks `VAULT_STORE_TIMEOUT` (seconds per request to the sync store).
    func configureStore() throws { _ = try storeTimeout() }

    /// Seconds per request to the sync store: `VAULT_STORE_TIMEOUT`, or the default.
    func storeTimeout() throws -> Double {
        guard let text = environment["VAULT_STORE_TIMEOUT"] else { return SyncEngine.defaultStoreTimeout }
        guard let seconds = Double(text), seconds >= 1, seconds <= 600 else {
            throw CLIError.usage("VAULT_STORE_TIMEOUT needs a number of seconds (1 to 600)", command: command.name)
        }
        return seconds
    }

    /// The sync engine of `store`, with this command's store timeout.
    func syncEngine(_ store: Vault) throws -> SyncEngine {
        SyncEngine(vault: store, transport: transport, storeTimeout: try storeTimeout())
    }

    func location() throws -> VaultLocation {
        try VaultLocation.resolve(environment: environment)
    }

    var unlockSources: UnlockSources {
        UnlockSources(environment: environment, keyfileFlag: arguments.value("keyfile"))
    }

    /// Opens the vault: through this vault's agent when one holds it
    /// unlocked, else by unlocking it here. A passphrase unlock is shared
    /// with the agent (started if none runs) unless VAULT_AGENT=off.
    func openVault() throws -> Vault {
        let location = try location()
        guard Vault.exists(at: location) else {
            throw CLIError("no vault at \(location.databasePath)", hint: "run 'vault init' to create one")
        }
        let agent = agentClient(location)
        if let agent {
            do {
                if let store = try Vault.open(at: location, agent: agent, time: time) { return store }
            } catch {
                if error.code == .damaged || error.code == .noVault { throw error }
                console.warn("not using the agent: \(error.reason)")
            }
        }
        let (store, shareable) = try unlockHere(location)
        if shareable { shareUnlock(store, agent: agent) }
        store.refreshCoordinator = SyncRefreshCoordinator(transport: transport)
        return store
    }

    /// Fresh tokens from `store`, coordinated as it was opened (through
    /// the agent, or with the sync store).
    func refresher(_ store: Vault) -> TokenRefresher { TokenRefresher(vault: store, transport: transport) }

    /// Opens the vault by unlocking it in this process, never through the
    /// agent: for changes to keyslots, which need the master key.
    func openVaultDirectly() throws -> Vault {
        let location = try location()
        guard Vault.exists(at: location) else {
            throw CLIError("no vault at \(location.databasePath)", hint: "run 'vault init' to create one")
        }
        let store = try unlockHere(location).0
        store.refreshCoordinator = SyncRefreshCoordinator(transport: transport)
        return store
    }

    /// Unlocks here. A wrong passphrase typed on the terminal may be
    /// retried twice; other sources fail at once. Also says whether the
    /// key was a passphrase (worth keeping in the agent).
    private func unlockHere(_ location: VaultLocation) throws -> (Vault, Bool) {
        var attempts = 0
        // A vault with a Secret Service slot opens from the keyring first.
        var keyring: (vaultID: [UInt8], slotIDs: [[UInt8]])? = nil
        if SecretService.usable(environment: environment),
            let info = try? Vault.secretServiceSlots(at: location), !info.slotIDs.isEmpty
        {
            keyring = info
        }
        while true {
            attempts += 1
            let (key, origin, interactive) = try unlockSources.key(secretServiceVault: keyring)
            do {
                let store = try Vault.open(at: location, key: key, time: time)
                if case .passphrase = key { return (store, true) }
                return (store, false)
            } catch {
                if case .secretService = key, error.code == .wrongKey {
                    console.warn("\(error.reason); trying the passphrase")
                    keyring = nil
                    attempts -= 1
                    continue
                }
                if error.code == .wrongKey {
                    if interactive && attempts < 3 {
                        console.error(error.reason)
                        continue
                    }
                    throw CLIError(
                        origin == "terminal" ? error.reason : "\(error.reason) (from \(origin))", hint: error.hint,
                        exitCode: .locked)
                }
                throw error
            }
        }
    }

    /// Exactly `count` positional arguments, named for the usage message.
    func positionals(_ names: String...) throws -> [String] {
        let given = arguments.positionals
        guard given.count == names.count else {
            if given.count < names.count {
                throw CLIError.usage("missing \(names[given.count])", command: command.name)
            }
            throw CLIError.usage("unexpected argument '\(given[names.count])'", command: command.name)
        }
        return given
    }

    /// A grant name from the command line; invalid names are usage errors.
    func grantName(_ name: String) throws -> String {
        do { try GrantName.validateForCommandLine(name) } catch {
            throw CLIError("invalid grant name '\(name)'", hint: error.hint, exitCode: .usage)
        }
        return name
    }

    /// Reads all of stdin (at most `limit` bytes) into secure memory.
    func readStandardInput(limit: Int) throws -> SecureBytes {
        let buffer = try Secure.buffer(count: limit + 1)
        var total = 0
        while total <= limit {
            let n = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress! + total, limit + 1 - total) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw CLIError("cannot read standard input: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            total += n
        }
        guard total <= limit else { throw CLIError("standard input is larger than \(limit) bytes") }
        return try Secure.prefix(buffer, total)
    }

    /// Says what a command did: `message` on stderr, or with `--json` the
    /// document `value` on stdout, so that stdout holds one JSON document.
    func report(_ message: String, json value: some Encodable) throws {
        if json { try printJSON(value) } else { console.info(message) }
    }

    /// Prints a value as JSON on stdout, then a newline: the one printer
    /// every `--json` output goes through.
    func printJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        do {
            var data = try encoder.encode(value)
            data.append(0x0a)
            var bytes = [UInt8](data)
            Console.writeAll(&bytes, fd: 1)
            secureZero(&bytes)
        } catch {
            throw CLIError("cannot encode JSON output")
        }
    }
}

/// Text formatting shared by commands.
enum Format {
    /// `2026-12-02T14:05:00Z`.
    static func timestamp(_ date: Date) -> String {
        let seconds = date.epochSeconds
        var days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secs = seconds - days * 86400
        // Civil date from days since 1970-01-01 (proleptic Gregorian).
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let doe = days - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(year)-\(two(month))-\(two(day))T\(two(secs / 3600)):\(two(secs % 3600 / 60)):\(two(secs % 60))Z"
    }

    /// `in 59m`, `3h ago`.
    static func relative(_ date: Date, now: Date) -> String {
        let delta = Int64(date.timeIntervalSince(now).rounded())
        let magnitude = abs(delta)
        let text: String
        switch magnitude {
        case ..<60: text = "\(magnitude)s"
        case ..<3600: text = "\(magnitude / 60)m"
        case ..<86400: text = "\(magnitude / 3600)h"
        default: text = "\(magnitude / 86400)d"
        }
        return delta >= 0 ? "in \(text)" : "\(text) ago"
    }

    /// Left-aligned columns separated by two spaces, for a person to read; every cell is escaped
    /// (`Console.escaped`), so a cell can neither forge a row nor drive
    /// the terminal.
    static func table(_ raw: [[String]]) -> [String] {
        let rows = raw.map { $0.map(Console.escaped) }
        guard let width = rows.first?.count else { return [] }
        var widths = [Int](repeating: 0, count: width)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            var line = ""
            for (i, cell) in row.enumerated() {
                line += i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count + 2)
            }
            return line
        }
    }
}
