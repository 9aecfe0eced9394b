/// Ordered schema migrations, applied inside one write transaction each and
/// recorded in `PRAGMA user_version`.
public struct Migrations: Sendable {
    /// The SQL of each schema version, in order: index 0 upgrades 0 -> 1.
    public let steps: [String]

    /// Creates a migration list.
    public init(_ steps: [String]) { self.steps = steps }

    /// The schema version after all steps.
    public var latest: Int { steps.count }

    /// Applies the steps still missing. Refuses a database from a newer
    /// version of the program rather than guessing at its schema.
    public func apply(to database: Database) throws(StorageError) {
        let result: Result<Void, StorageError>
        do {
            try database.transaction(.immediate) { () throws(StorageError) in
                let current = try database.userVersion()
                guard current <= latest else {
                    throw StorageError(
                        .sqlite, "database schema \(current) is newer than this program knows (\(latest))")
                }
                for version in current..<latest {
                    try database.execute(steps[version])
                    try database.execute("PRAGMA user_version = \(version + 1)")
                }
            }
            result = .success(())
        } catch {
            switch error {
            case .storage(let e), .body(let e): result = .failure(e)
            }
        }
        try result.get()
    }
}
