/// An error from the cryptographic layer, with a stable code and a reason.
public struct CryptoError: Error, Equatable, CustomStringConvertible, Sendable {
    /// Stable identifiers for what went wrong.
    public enum Code: String, Sendable {
        case unavailable = "crypto.unavailable"
        case outOfMemory = "crypto.out_of_memory"
        case authenticationFailed = "crypto.authentication_failed"
        case invalidParameter = "crypto.invalid_parameter"
        case invalidPadding = "crypto.invalid_padding"
    }

    /// What went wrong.
    public let code: Code
    /// A lower-case explanation without secrets.
    public let reason: String

    /// Creates an error.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The reason.
    public var description: String { reason }
}
