public import Foundation
import Glibc
public import VaultCrypto
public import VaultKit

/// A private temporary directory, removed with everything in it on deinit.
public final class TemporaryDirectory: @unchecked Sendable {
    /// Its absolute path.
    public let path: String

    /// Creates a fresh directory under $TMPDIR (or /tmp).
    public init() {
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        var template = Array("\(base)/vault-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { remove() }

    /// Removes the directory and all it holds.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A vault location inside this directory.
    public var location: VaultLocation {
        VaultLocation(directory: path + "/data", configDirectory: path + "/config")
    }
}

/// What a run's shared servers leave behind, undone when the test process
/// exits: a `static let` is never released, so a shared server's `deinit`
/// (which stops it by its script, then removes its directory) never runs.
public enum RunEnd {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var steps: [@Sendable () -> Void] = []

    /// Runs `step` at exit, after the steps registered later.
    public static func atExit(_ step: @escaping @Sendable () -> Void) {
        lock.withLock {
            if steps.isEmpty { atexit { RunEnd.runSteps() } }
            steps.append(step)
        }
    }

    private static func runSteps() {
        let all = lock.withLock { () -> [@Sendable () -> Void] in
            defer { steps = [] }
            return steps
        }
        for step in all.reversed() { step() }
    }
}

/// A clock the test sets.
public struct FixedTime: TimeSource {
    /// The time it reports.
    public var date: Date
    /// Creates a clock at `date`.
    public init(_ date: Date) { self.date = date }
    public func now() -> Date { date }
}

/// Test keys. The passphrase cost is the explicit minimum, never the default.
public enum TestKeys {
    /// A passphrase source.
    public static func passphrase(_ text: String = "correct horse battery staple") throws -> KeySource {
        try KeySource.passphrase(normalizing: text)
    }

    /// A fixed 32-byte key file secret.
    public static func keyfileSecret(_ fill: UInt8 = 7) throws -> SecureBytes {
        try SecureBytes(copying: [UInt8](repeating: fill, count: 32))
    }

    /// A sample OAuth 2.0 grant.
    public static func grant(
        _ provider: String = "google", token: String = "ya29.sample",
        now: Date = Date(epochSeconds: Date().epochSeconds)
    )
        -> Grant
    {
        Grant(
            provider: provider, account: "ada@example.com", accessToken: token, refreshToken: "1//refresh-\(token)",
            tokenType: "Bearer", expiresAt: now.addingTimeInterval(3600), scopes: ["openid", "email"],
            providerConfiguration: ProviderConfiguration(
                name: provider, tokenEndpoint: "https://oauth2.example/token", clientID: "client"),
            createdAt: now)
    }
}

extension Array where Element == UInt8 {
    /// Bytes from hexadecimal text.
    public init(hex: String) {
        var out: [UInt8] = []
        var chars = Array(hex.utf8)[...]
        while chars.count >= 2 {
            let pair = String(decoding: chars.prefix(2), as: UTF8.self)
            out.append(UInt8(pair, radix: 16)!)
            chars = chars.dropFirst(2)
        }
        self = out
    }
}
