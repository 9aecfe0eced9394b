internal import Glibc
import VaultCore
import VaultCrypto
import VaultHTTP
internal import VaultSync

/// How to log in to the sync store (`remote set`, `join`): a WebDAV or
/// HTTP store's user and password, or an S3 store's bucket, endpoint,
/// region and keys.
struct StoreOptions: OptionGroup {
    @Option("user", value: "USER", help: "the store's user name (Basic authentication)")
    var user: String?
    @Option("password-file", value: "F", help: "read the store's password from file F")
    var passwordFile: String?
    @Option("endpoint", value: "URL", help: "an S3 store's endpoint (default: AWS's for the region)")
    var endpoint: String?
    @Option("region", value: "R", help: "an S3 store's region in signatures (default us-east-1)")
    var region: String?
    @Flag("path-style", help: "address an S3 bucket as ENDPOINT/BUCKET rather than BUCKET.HOST")
    var pathStyle: Bool
    @Option("credentials-file", value: "F", help: "an S3 store's keys from this AWS credentials file")
    var credentialsFile: String?
    @Option("profile", value: "NAME", help: "the profile of the AWS credentials file (default: default)")
    var profile: String?

    /// The store to keep in the vault, and how to log in to it: the URL as
    /// given for WebDAV and HTTP, the canonical one for `s3://`.
    func login(url: String, command: String, environment: [String: String]) throws -> StoreLogin {
        guard StoreKind.of(url: url) == .s3 else {
            if endpoint != nil || region != nil || pathStyle || credentialsFile != nil || profile != nil {
                throw CLIError.usage(
                    "--endpoint, --region, --path-style and the S3 keys are for s3:// stores", command: command)
            }
            return StoreLogin(url: try Commands.storeURL(url, command: command), user: user, password: try password())
        }
        if user != nil || passwordFile != nil {
            throw CLIError.usage(
                "an S3 store's keys come from an AWS credentials file, AWS_ACCESS_KEY_ID and "
                    + "AWS_SECRET_ACCESS_KEY, or the terminal, not --user and --password-file",
                command: command)
        }
        let location: S3Location
        let givenEndpoint = endpoint ?? environment["AWS_ENDPOINT_URL_S3"] ?? environment["AWS_ENDPOINT_URL"]
        let givenRegion = region ?? environment["AWS_REGION"] ?? environment["AWS_DEFAULT_REGION"]
        // Without an endpoint the address is AWS's, which has no such
        // region: another S3 server's, with its endpoint forgotten.
        if givenEndpoint == nil, let givenRegion, !S3Location.isAWSRegion(givenRegion) {
            throw CLIError(
                "with no --endpoint, \(url) is a bucket of AWS S3, and '\(givenRegion)' is not an AWS region "
                    + "(there is no s3.\(givenRegion).amazonaws.com)",
                hints: [
                    "for another S3 server (Ceph RGW, MinIO, Garage, R2, ...), give its address with --endpoint URL"
                        + (command == "join"
                            ? "; on a machine that syncs the vault, 'vault pair' prints the whole join command" : "")
                ], exitCode: .usage)
        }
        do {
            location = try S3Location(url: url, endpoint: givenEndpoint, region: givenRegion, pathStyle: pathStyle)
        } catch {
            throw CLIError(error.reason, hint: "see 'vault \(command) --help'", exitCode: .usage)
        }
        let (id, secret) = try s3Keys(command: command, environment: environment)
        return StoreLogin(url: location.canonicalURL, user: id, password: secret)
    }

    /// The store's password: from --password-file, else asked on the
    /// terminal when a user is given; nil without a user.
    private func password() throws -> SecureBytes? {
        if let path = passwordFile { return try StoreOptions.secret(from: path, option: "--password-file") }
        guard user != nil else { return nil }
        return try StoreOptions.ask("Password for the store: ", option: "--password-file F")
    }

    /// An S3 store's access key id and secret, never from the command
    /// line: from --credentials-file or --profile (the AWS shared
    /// credentials file), else AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
    /// else the profile (AWS_PROFILE, or "default") of that file when it
    /// exists, else asked on the terminal. Temporary keys (a session token)
    /// are refused: they expire, and the vault keeps what it is given.
    private func s3Keys(command: String, environment: [String: String]) throws -> (String, SecureBytes) {
        let path =
            credentialsFile ?? environment["AWS_SHARED_CREDENTIALS_FILE"]
            ?? ((environment["HOME"] ?? "") + "/.aws/credentials")
        let named = credentialsFile != nil || profile != nil
        if !named, let id = environment["AWS_ACCESS_KEY_ID"], let secret = environment["AWS_SECRET_ACCESS_KEY"] {
            try StoreOptions.refuseSessionToken(environment["AWS_SESSION_TOKEN"] != nil, from: "AWS_SESSION_TOKEN")
            return (id, try Secure.copy(Array(secret.utf8)))
        }
        if named || FileSystem.exists(path) {
            let name = profile ?? environment["AWS_PROFILE"] ?? "default"
            let file: SecureBytes
            do {
                file = try SecretFile.read(path: path, limit: 1 << 16)
            } catch {
                throw CLIError("\(error.reason) (the S3 store's keys)", hint: error.remedy.map(Remedies.hint))
            }
            let keys = AWSCredentialsFile.profile(name, in: file)
            guard let id = keys.accessKeyID, !id.isEmpty, let secret = keys.secret else {
                throw CLIError(
                    "the profile '\(Console.escaped(name))' of \(Console.escaped(path)) has no aws_access_key_id "
                        + "and aws_secret_access_key",
                    exitCode: .usage)
            }
            try StoreOptions.refuseSessionToken(keys.hasSessionToken, from: "the profile's aws_session_token")
            return (id, secret)
        }
        guard let terminal = Terminal() else {
            throw CLIError(
                "no keys for the S3 store",
                hint: "give an AWS credentials file (--credentials-file F, --profile NAME), or set "
                    + "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                exitCode: .usage)
        }
        let id = try terminal.readSecret(prompt: "Access key id: ").withUnsafeBytes {
            String(decoding: $0, as: UTF8.self)
        }
        return (id, try terminal.readSecret(prompt: "Secret access key: "))
    }

    private static func refuseSessionToken(_ present: Bool, from source: String) throws {
        guard present else { return }
        throw CLIError(
            "temporary S3 keys (\(source)) expire, and the vault would keep them past that",
            hint: "give long-lived keys of a user that may use only the store's bucket (docs/sync.md)",
            exitCode: .usage)
    }

    private static func secret(from path: String, option: String) throws -> SecureBytes {
        do {
            return try SecretFile.trimmingNewline(try SecretFile.read(path: path))
        } catch {
            throw CLIError("\(error.reason) (from \(option))", hint: error.remedy.map(Remedies.hint))
        }
    }

    private static func ask(_ prompt: String, option: String) throws -> SecureBytes {
        guard let terminal = Terminal() else {
            throw CLIError(
                "no terminal to ask for the store's secret", hint: "give it with \(option)", exitCode: .usage)
        }
        return try terminal.readSecret(prompt: prompt)
    }

    /// This group's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] {
        [$user, $passwordFile, $endpoint, $region, $pathStyle, $credentialsFile, $profile]
    }
}

/// What `StoreOptions.login` found: the store URL the vault keeps, and the
/// user (an S3 store's access key id) and password (its secret key).
struct StoreLogin {
    let url: String
    let user: String?
    let password: SecureBytes?
}

/// The AWS shared credentials file (`~/.aws/credentials`): INI sections
/// named by profile, with `aws_access_key_id`, `aws_secret_access_key` and
/// `aws_session_token`. Read inside the file's secure buffer; the secret is
/// copied into secure memory and never becomes a String.
enum AWSCredentialsFile {
    /// One profile's keys.
    struct Keys {
        var accessKeyID: String?
        var secret: SecureBytes?
        var hasSessionToken = false
    }

    /// The keys of profile `name` in `file`.
    static func profile(_ name: String, in file: SecureBytes) -> Keys {
        file.withUnsafeBytes { raw in
            var keys = Keys()
            var inside = false
            for line in raw.split(separator: UInt8(ascii: "\n")) {
                let text = trimmed(line)
                guard let first = text.first, first != UInt8(ascii: "#"), first != UInt8(ascii: ";") else { continue }
                if first == UInt8(ascii: "[") {
                    inside = String(decoding: text, as: UTF8.self) == "[\(name)]"
                    continue
                }
                guard inside, let equals = text.firstIndex(of: UInt8(ascii: "=")) else { continue }
                let key = String(decoding: trimmed(text[..<equals]), as: UTF8.self)
                let value = trimmed(text[(equals + 1)...])
                switch key {
                case "aws_access_key_id": keys.accessKeyID = String(decoding: value, as: UTF8.self)
                case "aws_secret_access_key":
                    var copy = Array(value)
                    keys.secret = try? Secure.copy(copy)
                    secureZero(&copy)
                case "aws_session_token": keys.hasSessionToken = !value.isEmpty
                default: break
                }
            }
            return keys
        }
    }

    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
        let space: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0d }
        guard let start = bytes.firstIndex(where: { !space($0) }) else { return bytes[bytes.endIndex...] }
        let end = bytes.lastIndex(where: { !space($0) })!
        return bytes[start...end]
    }
}

extension Commands {
    /// The command for the S3 store an http(s) URL stands for, when the
    /// server there answered as an S3 store does: `http://HOST:PORT/BUCKET/FOLDER/`
    /// is `s3://BUCKET/FOLDER` with `http://HOST:PORT` as its endpoint,
    /// addressed by path as the URL was. Nil when the path holds no bucket
    /// name S3 allows. `command` is `remote set` or `join`.
    static func s3Command(for url: String, command: String) -> String? {
        guard let schemeEnd = url.firstRange(of: "://") else { return nil }
        let afterScheme = url[schemeEnd.upperBound...]
        let authority = afterScheme.prefix { $0 != "/" }
        let path = afterScheme.dropFirst(authority.count).split(separator: "/").map(String.init)
        guard let bucket = path.first, !authority.isEmpty else { return nil }
        let origin = String(url[..<schemeEnd.upperBound]) + authority
        let s3 = "s3://" + ([bucket] + path.dropFirst()).joined(separator: "/")
        guard let byPath = try? S3Location(url: s3, endpoint: origin, region: nil, pathStyle: true),
            let implied = try? S3Location(url: s3, endpoint: origin, region: nil, pathStyle: false)
        else { return nil }
        let folder = byPath.prefix.isEmpty ? "" : "/" + byPath.prefix
        return "vault \(command) s3://\(byPath.bucket)\(folder) --endpoint \(byPath.endpoint)"
            + (implied.pathStyle ? "" : " --path-style")
    }
}

extension Commands {
    /// A store address of AWS S3 (no endpoint given) whose host name does
    /// not resolve while AWS's own does: the region, or an endpoint
    /// forgotten, is wrong, not the network, so it is a usage error. Nil
    /// for any other failure, and when AWS's name does not resolve either
    /// (no network: the failure stands, to be tried again).
    static func unresolvedAWSHost(
        _ error: VaultError, url: String, command: String, environment: [String: String]
    ) -> CLIError? {
        guard error.code == .transient, error.reason.hasSuffix("couldn't resolve host name"),
            StoreKind.of(url: url) == .s3, let location = try? S3Location(canonical: url)
        else { return nil }
        let origin = location.bucketURL.prefix { $0 != "/" }.count + 2
        let host = String(location.bucketURL.dropFirst(origin).prefix { $0 != "/" && $0 != ":" })
        guard host.hasSuffix(".amazonaws.com") else { return nil }
        var probe = "s3.amazonaws.com"
        #if DEBUG
            // Tests run where no name resolves: they name one that does.
            probe = environment["VAULT_TEST_RESOLVABLE_HOST"] ?? probe
        #endif
        guard resolves(probe) else { return nil }
        return CLIError(
            "\(host) does not resolve, while \(probe) does: AWS S3 has no such address, so the region "
                + "'\(location.region)' is likely wrong, or the store is not AWS's and its --endpoint was left out",
            hints: [
                "check --region (AWS's are such as us-east-1, eu-west-1); for another S3 server (Ceph RGW, MinIO, "
                    + "Garage, R2, ...), give its address with --endpoint URL"
                    + (command == "join"
                        ? "; on a machine that syncs the vault, 'vault pair' prints the whole join command" : "")
            ], exitCode: .usage)
    }

    /// True when `host` has an address.
    private static func resolves(_ host: String) -> Bool {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &found) == 0 else { return false }
        freeaddrinfo(found)
        return true
    }
}
