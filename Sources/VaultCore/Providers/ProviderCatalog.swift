public import VaultHTTP

/// The providers a user can choose from: the presets shipped inside vault,
/// merged with the user's files in `$XDG_CONFIG_HOME/vault/providers/`.
public struct ProviderCatalog: Sendable {
    /// Usable providers by name.
    public let providers: [String: Provider]
    /// Files that could not be used, each with the reason.
    public var problems: [VaultError] { issues.map(\.error) }
    /// Problems with the provider name they concern, when known.
    let issues: [(name: String?, error: VaultError)]
    /// Providers whose user file is not used at all (not JSON, not a
    /// provider file, another user can write it): discovery completes
    /// none of them.
    let unreadable: Set<String>
    /// Every parsed file by provider name, complete or not.
    package let files: [String: ProviderFile]

    /// The providers, sorted by name.
    public var sorted: [Provider] { providers.values.sorted { $0.name < $1.name } }

    /// Loads presets and the user's provider files. A broken user file is
    /// reported in `problems` and leaves the others usable.
    public static func load(configDirectory: String) -> ProviderCatalog {
        load(configDirectory: configDirectory, only: nil)
    }

    /// The catalog with presets and checks limited to the provider `only`
    /// (all of them when nil): a command that needs one provider, such as
    /// `vault import`, does not parse every preset.
    package static func load(configDirectory: String, only: String?) -> ProviderCatalog {
        var files: [String: (ProviderFile, String)] = [:]
        var problems: [(name: String?, error: VaultError)] = []
        var unreadable = Set<String>()
        for (name, json) in Presets.files where only == nil || name == only {
            // Presets are checked by the test suite; a failure here is a build defect.
            if let file = try? ProviderFile.parse(Array(json.utf8), source: "preset \(name)") {
                files[name] = (file, "preset")
            }
        }
        let directory = configDirectory + "/providers"
        // A provider file says where codes, verifiers and refresh tokens are
        // sent: one another user could write is reported and not used.
        for entry in FileSystem.listDirectory(directory).sorted() where entry.hasSuffix(".json") {
            let path = directory + "/" + entry
            do throws(VaultError) {
                let bytes = try FileSystem.readFile(path, limit: 65536, trusted: true)
                let user = try ProviderFile.parse(bytes, source: path)
                // The file's name decides which provider it defines: a file
                // is reviewed for its endpoints, not for one `name` line
                // that would make it replace another provider (whose
                // tokens git, mail and scripts then send to its hosts).
                let name = String(entry.dropLast(5))
                if let inner = user.name, inner != name {
                    throw VaultError(
                        .invalidInput,
                        "\(path) says it defines provider '\(inner)', but a provider file defines the provider "
                            + "its file is named after ('\(name)'); it is not used",
                        remedy: .renameProviderFile(file: inner, name: name))
                }
                let base = files[name]?.0
                var merged = base.map { $0.merging(user) } ?? user
                merged.name = name
                files[name] = (merged, path)
            } catch {
                // Named after its file: 'vault add NAME' then says why
                // NAME's own file is not used, not that NAME is unknown.
                let name = String(entry.dropLast(5))
                problems.append((name, error))
                unreadable.insert(name)
            }
        }
        var providers: [String: Provider] = [:]
        for (name, (file, source)) in files where only == nil || name == only {
            do throws(VaultError) {
                providers[name] = try Provider(file: file, source: source)
            } catch {
                problems.append((name, error))
            }
        }
        return ProviderCatalog(
            providers: providers, issues: problems, unreadable: unreadable, files: files.mapValues(\.0))
    }

    /// A provider discovered from `issuer` and named `name`; a file of that
    /// name, even an incomplete one, supplies the client and quirks.
    public func discovering(_ name: String, issuer: String, transport: any HTTPTransport) throws(VaultError) -> Provider
    {
        try Discovery.provider(name: name, issuer: issuer, transport: transport, base: files[name])
    }

    /// Why the provider `name`, whose files were read, cannot be used; nil when it can or has no file.
    package func problem(of name: String) -> VaultError? {
        issues.first { $0.name == name }?.error
    }

    /// Problems other than those of the provider `name` (which discovery
    /// completes); a file of that name that is not used at all is still one.
    public func problems(ignoring name: String) -> [VaultError] {
        issues.filter { $0.name != name || unreadable.contains(name) }.map(\.error)
    }

    /// True when the user's file for provider `name` is not used at all.
    package func isUnreadable(_ name: String) -> Bool { unreadable.contains(name) }

    /// The provider called `name`, or a `notFound` error listing the choices.
    public func provider(_ name: String) throws(VaultError) -> Provider {
        guard let p = providers[name] else {
            throw VaultError(
                .notFound, "unknown provider '\(name)'",
                remedy: .chooseProvider(known: providers.keys.sorted()))
        }
        return p
    }
}
