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
/// `ObjectSyncStore` is the one over every kind of object store.
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

/// The sync store over an object store of any kind (`StoreKind`): the one
/// place where the object store's `ObjectStore.Failure` becomes a
/// `VaultError` (`ObjectSyncStore.converted`).
final class ObjectSyncStore: SyncStore {
    private let client: any ObjectStore

    /// The store that `url` names, of the kind it names, with its user and
    /// password (an S3 store's access key id and secret access key); each
    /// request is bounded by `timeout` seconds and tried `attempts` times
    /// when the store fails (nil: the object store's default).
    convenience init(
        url: String, user: String?, password: [UInt8], transport: any HTTPTransport, timeout: Double, attempts: Int?,
        sleep: @escaping (Double) -> Void = Pacing.system.sleep
    ) throws(VaultError) {
        self.init(
            client: try ObjectSyncStore.open(
                StoreSettings(url: url, user: user, password: password), transport: transport, sleep: sleep),
            timeout: timeout, attempts: attempts)
    }

    /// The store over `client`, an object store of any kind made elsewhere.
    init(client: any ObjectStore, timeout: Double, attempts: Int?) {
        client.session.timeout = timeout
        if let attempts { client.session.maximumAttempts = attempts }
        self.client = client
    }

    /// Tells `onTimeout` of each request that ran out of time and is tried
    /// again, and ends the tries at `deadline` (`ObjectStoreSession`).
    func watch(onTimeout: ((ObjectStoreWait) -> Void)?, deadline: Double?) {
        client.session.onTimeout = onTimeout
        client.session.deadline = deadline
    }

    /// The object store of the settings' kind.
    private static func open(
        _ settings: StoreSettings, transport: any HTTPTransport, sleep: @escaping (Double) -> Void
    ) throws(VaultError) -> any ObjectStore {
        let kind = StoreKind.of(url: settings.url)
        do { return try kind.open(settings, transport, sleep) } catch { throw converted(error) }
    }

    var requestCount: Int { client.requestCount }
    var answerCount: Int { client.answerCount }
    var bytesSent: Int { client.bytesSent }
    var lastDate: Int64? { client.lastDate }

    func get(_ name: String) throws(VaultError) -> StoredObject? {
        do {
            return try client.get(name).map { StoredObject(bytes: $0.bytes, etag: $0.etag) }
        } catch {
            throw ObjectSyncStore.converted(error)
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
        let required: ObjectPrecondition
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
            throw ObjectSyncStore.converted(error)
        }
    }

    func delete(_ name: String) throws(VaultError) {
        do { try client.delete(name) } catch { throw ObjectSyncStore.converted(error) }
    }

    func createFolder() throws(VaultError) -> [String] {
        let created: [String]
        do { created = try client.createFolder() } catch { throw ObjectSyncStore.converted(error) }
        try checkUsable()
        return created
    }

    func checkUsable() throws(VaultError) {
        let problem: String?
        do { problem = try client.conditionalWritesProblem() } catch { throw ObjectSyncStore.converted(error) }
        if let problem { throw VaultError(.unsupported, problem) }
    }

    func honoursPreconditions(probe: String) throws(VaultError) -> Bool {
        do { return try client.honoursPreconditions(probe: probe) } catch { throw ObjectSyncStore.converted(error) }
    }

    /// The vault error for a failure of the HTTP store: what the user can
    /// do about it decides the code.
    static func converted(_ failure: ObjectStoreFailure) -> VaultError {
        switch failure.code {
        // A store that accepts and never answers: its server is the cause.
        case .transient where failure.unanswered: VaultError(.transient, failure.reason, remedy: .checkStore)
        case .transient: VaultError(.transient, failure.reason)
        case .unauthorized: VaultError(.refused, failure.reason, remedy: .setStoreCredentials)
        case .badResponse: VaultError(.badResponse, failure.reason)
        case .invalid: VaultError(.invalidInput, failure.reason)
        case .wrongAddress: VaultError(.invalidInput, failure.reason, remedy: .checkStoreAddress)
        // Like a store away for sync and refresh rights; where the address
        // was just typed, the command line makes it a usage error.
        case .handshakeFailed: VaultError(.transient, failure.reason, remedy: .checkStoreAddress)
        case .missingFolder:
            VaultError(
                .notFound, failure.reason,
                remedy: .createStoreFolder)
        }
    }
}
