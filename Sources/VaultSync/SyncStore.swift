internal import Glibc
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP

/// An object as the store gave it, with the validator for a later
/// compare-and-swap write of its name.
struct StoredObject {
    /// The body.
    var bytes: [UInt8]
    /// The store's strong validator (an HTTP ETag), when it gave one.
    var etag: String?
}

/// What a write requires of the object already under its name.
enum WritePrecondition: Equatable {
    /// Nothing: an object written once, or a store without preconditions.
    case none
    /// No object may be there yet.
    case absent
    /// The object must still be the version with this validator.
    case matches(String)
}

/// How the store answered a write.
enum WriteOutcome: Equatable {
    /// Stored.
    case stored
    /// Refused: the object under the name is not what the write required.
    case preconditionFailed
}

/// The store a vault syncs through, as the sync engine uses it: named
/// objects read, written (optionally as a compare-and-swap) and deleted,
/// every failure already a `VaultError` (docs/sync.md, "Objects"). The
/// store is only trusted to keep bytes; what they mean is the engine's.
/// `HTTPSyncStore` is the one over WebDAV and plain HTTP.
protocol SyncStore: AnyObject {
    /// The object under `name`, or nil when the store has none.
    func get(_ name: String) throws(VaultError) -> StoredObject?
    /// Writes `bytes` under `name` when the object there meets `precondition`.
    func put(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition) throws(VaultError) -> WriteOutcome
    /// `put`, sent once, never again after a failure: on a store that
    /// ignores preconditions, a write sent again later would replace
    /// whatever was written meanwhile, unseen (docs/sync.md, "Stores that
    /// ignore preconditions").
    func putOnce(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition) throws(VaultError)
        -> WriteOutcome
    /// Deletes the object under `name`; one already gone is no failure.
    func delete(_ name: String) throws(VaultError)
    /// Makes sure the place the objects go exists; returns the places it
    /// created, to tell the user (without credentials).
    func createFolder() throws(VaultError) -> [String]
    /// Refuses a store that cannot keep sync's promises as it is set up (an
    /// S3 bucket with versioning, where Ceph RGW ignores conditions).
    func checkUsable() throws(VaultError)
    /// Whether the store refuses writes whose precondition fails, learned by
    /// writing (and then deleting) the object `probe`.
    func honoursPreconditions(probe: String) throws(VaultError) -> Bool
    /// Requests sent so far.
    var requestCount: Int { get }
    /// Requests the store answered so far with anything but a failure
    /// (5xx): a store that answers some requests is working, though the
    /// answer to another was lost (docs/sync.md, "Refresh rights while the store is away").
    var answerCount: Int { get }
    /// Body bytes uploaded so far.
    var bytesSent: Int { get }
    /// The store's clock in its last answer that said (HTTP `Date`, seconds
    /// since 1970): compared only with another date of the same store.
    var lastDate: Int64? { get }
}

extension SyncStore {
    /// Usable as it is, unless the store knows otherwise.
    func checkUsable() throws(VaultError) {}

    /// Every request answered, unless the store counts otherwise.
    var answerCount: Int { requestCount }

    /// No clock, unless the store tells its own.
    var lastDate: Int64? { nil }

    /// `put`, for a store that never sends a request twice.
    func putOnce(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition) throws(VaultError)
        -> WriteOutcome
    {
        try put(name, bytes, precondition: precondition)
    }

    /// Writes `bytes` under `name` whatever is there.
    func put(_ name: String, _ bytes: [UInt8]) throws(VaultError) -> WriteOutcome {
        try put(name, bytes, precondition: .none)
    }
}

/// The sync store over HTTP: a WebDAV collection, any server that answers
/// GET, PUT and DELETE under an http(s) URL, or a folder of an S3 bucket
/// (`s3://`), all through VaultHTTP's `ObjectStore`, which speaks each
/// one's dialect (Basic or SigV4, the ETags S3 stores match, their answers
/// to a lost race). The one place where the HTTP layer's
/// `ObjectStore.Failure` becomes a `VaultError` (`HTTPSyncStore.converted`).
final class HTTPSyncStore: SyncStore {
    private let client: ObjectStore

    /// An S3 store at `canonical` (an `S3Location`'s canonical URL), signed
    /// with the access key id and secret access key.
    init(
        s3 canonical: String, accessKeyID: String, secretAccessKey: [UInt8], transport: any HTTPTransport,
        timeout: Double, attempts: Int?, sleep: @escaping (Double) -> Void = Pacing.system.sleep
    ) throws(VaultError) {
        let secret = try Secure.copy(secretAccessKey)
        do {
            client = try ObjectStore(
                s3: try S3Location(canonical: canonical), accessKeyID: accessKeyID, secretAccessKey: secret,
                transport: transport, sleep: sleep)
        } catch {
            throw HTTPSyncStore.converted(error)
        }
        client.timeout = timeout
        if let attempts { client.maximumAttempts = attempts }
    }

    /// A store at `url`, with Basic authentication when `user` is given;
    /// each request is bounded by `timeout` seconds and tried `attempts`
    /// times when the store fails (nil: `ObjectStore`'s default).
    init(
        url: String, user: String?, password: [UInt8], transport: any HTTPTransport, timeout: Double, attempts: Int?,
        sleep: @escaping (Double) -> Void = Pacing.system.sleep
    ) throws(VaultError) {
        let secret = try Secure.copy(password)
        do {
            client = try ObjectStore(
                baseURL: url, user: user, password: user == nil ? nil : secret, transport: transport,
                sleep: sleep)
        } catch {
            throw HTTPSyncStore.converted(error)
        }
        client.timeout = timeout
        if let attempts { client.maximumAttempts = attempts }
    }

    var requestCount: Int { client.requestCount }
    var answerCount: Int { client.answerCount }
    var bytesSent: Int { client.bytesSent }
    var lastDate: Int64? { client.lastDate }

    func get(_ name: String) throws(VaultError) -> StoredObject? {
        do {
            return try client.get(name).map { StoredObject(bytes: $0.bytes, etag: $0.etag) }
        } catch {
            throw HTTPSyncStore.converted(error)
        }
    }

    func put(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition) throws(VaultError) -> WriteOutcome {
        try put(name, bytes, precondition: precondition, attempts: nil)
    }

    func putOnce(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition) throws(VaultError)
        -> WriteOutcome
    {
        try put(name, bytes, precondition: precondition, attempts: 1)
    }

    private func put(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition, attempts: Int?)
        throws(VaultError) -> WriteOutcome
    {
        let required: ObjectStore.Precondition
        switch precondition {
        case .none: required = .none
        case .absent: required = .absent
        case .matches(let etag): required = .matches(etag)
        }
        do {
            switch try client.put(name, bytes, precondition: required, attempts: attempts) {
            case .stored: return .stored
            case .preconditionFailed: return .preconditionFailed
            }
        } catch {
            throw HTTPSyncStore.converted(error)
        }
    }

    func delete(_ name: String) throws(VaultError) {
        do { try client.delete(name) } catch { throw HTTPSyncStore.converted(error) }
    }

    func createFolder() throws(VaultError) -> [String] {
        let created: [String]
        do { created = try client.createFolder() } catch { throw HTTPSyncStore.converted(error) }
        try checkUsable()
        return created
    }

    func checkUsable() throws(VaultError) {
        let versioning: String?
        do { versioning = try client.bucketVersioning() } catch { throw HTTPSyncStore.converted(error) }
        // Ceph RGW ignores If-Match and If-None-Match in a bucket whose
        // versioning was ever turned on: the store's compare-and-swap would
        // silently be gone.
        if let versioning {
            throw VaultError(
                .unsupported,
                "the bucket has versioning \(versioning.lowercased()): S3 stores such as Ceph RGW ignore conditional "
                    + "writes there, which sync relies on; use a bucket that never had versioning")
        }
    }

    func honoursPreconditions(probe: String) throws(VaultError) -> Bool {
        do { return try client.honoursPreconditions(probe: probe) } catch { throw HTTPSyncStore.converted(error) }
    }

    /// The vault error for a failure of the HTTP store: what the user can
    /// do about it decides the code.
    static func converted(_ failure: ObjectStore.Failure) -> VaultError {
        switch failure.code {
        case .transient: VaultError(.transient, failure.reason)
        case .unauthorized: VaultError(.refused, failure.reason, remedy: .setStoreCredentials)
        case .badResponse: VaultError(.badResponse, failure.reason)
        case .invalid: VaultError(.invalidInput, failure.reason)
        case .missingFolder:
            VaultError(
                .notFound, failure.reason,
                remedy: .createStoreFolder)
        }
    }
}
