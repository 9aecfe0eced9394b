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
        // The environment.
        case busy = "vault.busy"
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

    /// Creates an error.
    public init(_ code: Code, _ reason: String, hint: String? = nil) {
        self.code = code
        self.reason = reason
        self.hint = hint
    }

    public var description: String { reason }
}
