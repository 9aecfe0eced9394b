/// An error from the storage layer, with a stable code and a reason.
public struct StorageError: Error, Equatable, CustomStringConvertible, Sendable {
    /// Stable identifiers, grouped by how a caller recovers.
    public enum Code: String, Sendable {
        /// Another process holds the write lock longer than the busy timeout.
        case busy = "storage.busy"
        /// The file is not a database, or its structure is damaged.
        case corrupt = "storage.corrupt"
        /// The file could not be opened or written (permissions, missing).
        case io = "storage.io"
        /// The disk (or the user's quota) has no room for the write.
        case full = "storage.full"
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
    /// The database file, when the error came from a connection.
    public let path: String?

    /// Creates an error.
    public init(_ code: Code, resultCode: Int32 = 0, _ reason: String, path: String? = nil) {
        self.code = code
        self.resultCode = resultCode
        self.reason = reason
        self.path = path
    }

    /// The reason.
    public var description: String { reason }
}
