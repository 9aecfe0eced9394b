import Foundation
import VaultKit

// The GTMAppAuth lifecycle of an app, on Linux. Run it twice: the first run
// signs in and saves the grant; the next loads it at start. With --revoked
// it goes on: a refresh, the person revokes the app's access, the app
// notices and signs out.
@main
struct LifecycleDemo {
    static func main() async throws {
        let env = ProcessInfo.processInfo.environment
        let settings = try ProviderSettings.load(path: env["DEMO_PROVIDER_SETTINGS"] ?? "")
        let name = "\(settings.email) at glewlwyd"  // any string: the app's key for the grant
        let location = try VaultLocation.resolve(environment: env)
        let keyPath = env["VAULT_KEYFILE"] ?? location.directory + ".key"

        // The app's keychain: a vault file, created with a new key file on first run
        // (an app on a desktop can keep the key in the Secret Service instead).
        let store: VaultGrantStore
        if FileManager.default.fileExists(atPath: location.databasePath) {
            store = try await VaultGrantStore.open(at: location, key: .keyfile(Keyfile.read(path: keyPath)))
        } else {
            let secret = try Keyfile.generate()
            store = try await VaultGrantStore.create(at: location, key: .keyfile(secret))
            try Keyfile.write(secret, to: keyPath)
        }
        // The app keeps its accounts under a prefix of its own, through a
        // store it wrote: the session refreshes for it (VaultGrantStore on
        // its own would also coordinate refreshes across processes).
        let accounts = AppAccounts(base: store, prefix: "demo/")
        let session = TokenSession(store: accounts)
        // Two observers, as an app's account screen and its status bar
        // would be: each sees every event.
        var events = session.events.makeAsyncIterator()
        var statusBar = session.events.makeAsyncIterator()

        // At start: use the saved grant, or sign in and save one.
        if try await accounts.names().contains(name), try await accounts.canAuthorize(name) {
            print("loaded the saved grant")
        } else {
            var provider = try await Discovery.provider(
                name: "glewlwyd", issuer: settings.issuer, transport: CurlTransport())
            provider.clientID = settings.confidential_client
            provider.clientSecret = settings.client_secret
            provider.redirectURI = settings.redirect_uri
            // glewlwyd refuses a revoked refresh token with a bare 400.
            provider.errorQuirks.empty400IsInvalidGrant = true
            let request = AuthorizationRequest(provider: provider, flow: .paste, scopes: ["openid", "email"])
            let grant = try await Authorizer(transport: CurlTransport(), ui: ScriptedPerson(settings)).authorize(
                request)
            try await accounts.save(grant, as: name)
            print("signed in as \(grant.account ?? "an unknown account")")
        }
        print("can authorize: \(try await accounts.canAuthorize(name))")

        // An authorized request: a fresh token in the Authorization header.
        var userinfo = HTTPRequest(method: "GET", url: settings.issuer + "/userinfo")
        try await session.authorize(&userinfo, with: name)
        print("userinfo: HTTP \(try await CurlTransport().send(userinfo).status)")

        guard CommandLine.arguments.contains("--revoked") else { return }

        // Tokens are refreshed when under a minute remains; force one, and
        // the session reports it (with a new refresh token, already saved).
        _ = try await session.freshGrant(name, forceRefresh: true)
        print("event: \(await events.next()!)")
        print("status bar: \(statusText(await statusBar.next()!))")

        // The person revokes the app's access at the provider; the next refresh is
        // refused, the grant is marked dead, and the app signs out.
        try await ScriptedPerson(settings).revoke(try await accounts.retrieve(name).refreshToken ?? "")
        do {
            _ = try await session.freshGrant(name, forceRefresh: true)
            print("the provider still accepts the revoked grant")
            exit(1)
        } catch {
            guard error.code == .dead else {
                print(advice(for: error.code))
                throw error
            }
            print("event: \(await events.next()!)")
            print("status bar: \(statusText(await statusBar.next()!))")
            print("can authorize: \(try await accounts.canAuthorize(name))")
            try await accounts.remove(name)
            print("signed out; grants left: \(try await accounts.names().count)")
        }
    }
}

/// What the status bar shows for an event: every kind this release has,
/// and `@unknown default` for kinds a later release adds (a plain
/// `default` after every case draws a warning).
func statusText(_ event: GrantEvent) -> String {
    switch event {
    case .refreshed, .refused: return "\(event)"
    case .changedElsewhere(let name): return "\(name) changed elsewhere"
    case .failed(let name, let error): return "\(name) could not be refreshed: \(error.reason)"
    case .expiring(let name, let deadline): return "sign in to \(name) again before \(deadline)"
    @unknown default: return "\(event)"
    }
}

/// What the person is told for an error's code: the codes are open to new
/// ones, so the `switch` keeps a `default`.
func advice(for code: VaultError.Code) -> String {
    switch code {
    case .transient: return "offline: trying again later"
    case .dead: return "signed out: sign in again"
    case .invalidClient: return "the app's registration was refused"
    default: return "something went wrong (\(code.rawValue))"
    }
}

/// A store of the app's own (GTMAppAuth's `AuthSessionStore`): it saves,
/// retrieves and removes, here under a prefix in another store; refreshing
/// is the session's job.
struct AppAccounts: GrantStore {
    let base: any GrantStore
    let prefix: String

    func save(_ grant: Grant, as name: String) async throws(VaultError) {
        try await base.save(grant, as: prefix + name)
    }
    func retrieve(_ name: String) async throws(VaultError) -> Grant { try await base.retrieve(prefix + name) }
    func remove(_ name: String) async throws(VaultError) { try await base.remove(prefix + name) }
    func names() async throws(VaultError) -> [String] {
        try await base.names().filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }
    func usableGrant(_ name: String, minimumValidity: Double) async throws(VaultError) -> Grant? {
        try await base.usableGrant(prefix + name, minimumValidity: minimumValidity)
    }
}
