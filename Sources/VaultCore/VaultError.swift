/// An error from VaultKit: a stable code, a lower-case reason without
/// secrets, and an optional hint for the person.
public struct VaultError: Error, Equatable, CustomStringConvertible, Sendable {
    /// Stable identifiers. The groups say how a caller recovers.
    public enum Code: String, Sendable {
        // The request cannot be served as asked.
        case notFound = "vault.not_found"
        case alreadyExists = "vault.already_exists"
        case invalidInput = "vault.invalid_input"
        case noVault = "vault.no_vault"
        // Unlocking.
        case wrongKey = "vault.wrong_key"
        case locked = "vault.locked"
        // Stored bytes that fail their checks.
        case damaged = "vault.damaged"
        case tampered = "vault.tampered"
        case unsupported = "vault.unsupported"
        // Talking to a provider.
        /// The provider refused (an OAuth error such as access_denied or invalid_grant).
        case refused = "vault.refused"
        /// A network failure, a 5xx, or temporarily_unavailable: try again later.
        case transient = "vault.transient"
        /// The provider's answer failed a check (malformed, wrong state, nonce or audience).
        case badResponse = "vault.bad_response"
        /// Nobody completed the authorization in time.
        case timedOut = "vault.timed_out"
        /// The grant needs a new authorization (refused by the provider, or expired without a refresh token).
        case dead = "vault.dead"
        // The environment.
        case busy = "vault.busy"
        /// The calling task was cancelled before the work began; nothing changed.
        case cancelled = "vault.cancelled"
        case io = "vault.io"
        case insecurePath = "vault.insecure_path"
        case internalError = "vault.internal"
    }

    /// What went wrong.
    public let code: Code
    /// A lower-case explanation without secrets or final period.
    public let reason: String
    /// What the person can do about it, if anything useful can be said.
    public let hint: String?
    /// The provider's OAuth error code (`invalid_grant`, ...), when it gave one.
    public let oauthError: String?

    /// Creates an error.
    public init(_ code: Code, _ reason: String, hint: String? = nil, oauthError: String? = nil) {
        self.code = code
        self.reason = reason
        self.hint = hint
        self.oauthError = oauthError
    }

    /// The reason, without secrets.
    public var description: String { reason }
}
