internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore

/// The person's notify command, from the environment: `VAULT_NOTIFY_COMMAND`
/// (run when a grant dies, is about to, or is authorized again) and
/// `VAULT_NOTIFY_LEAD` (how long before a refresh token dies for good to say
/// so). docs/agent.md, "Notifications".
struct NotifySettings {
    static let defaultLead: TimeInterval = 7 * 86400

    let command: String?
    let lead: TimeInterval

    /// Reads the settings; a lead that is not a duration is a usage error of `command`.
    init(environment: [String: String], command name: String) throws {
        command = environment["VAULT_NOTIFY_COMMAND"].flatMap { $0.isEmpty ? nil : $0 }
        guard let text = environment["VAULT_NOTIFY_LEAD"] else {
            lead = NotifySettings.defaultLead
            return
        }
        guard let seconds = Duration.parse(text), seconds > 0 else {
            throw CLIError.usage("VAULT_NOTIFY_LEAD needs a duration such as 7d, 12h or 30m", command: name)
        }
        lead = seconds
    }

    /// The notifier of this command for the vault at `location`, when a
    /// command is set: it runs while this command waits (at most
    /// `GrantNotifier.timeout`), and says on stderr when it failed.
    static func notifier(environment: [String: String], location: VaultLocation) -> GrantNotifier? {
        guard let command = environment["VAULT_NOTIFY_COMMAND"], !command.isEmpty else { return nil }
        let console = Console()
        return GrantNotifier(
            command: command, environment: environment, location: location, background: false,
            now: { Date() }, log: { console.warn($0) })
    }
}
