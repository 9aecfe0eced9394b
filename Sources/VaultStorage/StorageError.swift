/// An error from the storage layer, with a stable code and a reason.
public struct StorageError: Error, Equatable, CustomStringConvertible, Sendable {
    /// Stable identifiers, grouped by how a caller recovers.
    public enum Code: String, Sendable {
        /// Another process holds the write lock longer than the busy timeout.
        case busy = "storage.busy"
        /// The file is not a database, or its structure is damaged.
        case corrupt = "storage.corrupt"
        /// The file could not be opened or written (permissions, disk full, missing).
        case io = "storage.io"
        /// A constraint was violated (for example a unique key).
        case constraint = "storage.constraint"
        /// Anything else SQLite reported.
        case sqlite = "storage.sqlite"
    }

    /// What went wrong.
    public let code: Code
    /// SQLite's primary result code, when the error came from SQLite.
    public let resultCode: Int32
    /// A lower-case explanation; never contains bound values.
    public let reason: String

    /// Creates an error.
    public init(_ code: Code, resultCode: Int32 = 0, _ reason: String) {
        self.code = code
        self.resultCode = resultCode
        self.reason = reason
    }

    /// The reason.
    public var description: String { reason }
}
