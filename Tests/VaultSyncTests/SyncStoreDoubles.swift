import Foundation
import Synchronization
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// A store in memory: the fast double of `SyncStore`. It honours
/// preconditions like Apache, or ignores them like the stores docs/sync.md
/// also supports.
final class MemoryStore: SyncStore {
    let honours: Bool
    private(set) var objects: [String: StoredObject] = [:]
    private var version = 0
    private(set) var requestCount = 0
    private(set) var bytesSent = 0

    init(honoursPreconditions: Bool) { honours = honoursPreconditions }

    func get(_ name: String) throws(VaultError) -> StoredObject? {
        requestCount += 1
        return objects[name]
    }

    func put(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition) throws(VaultError) -> WriteOutcome {
        requestCount += 1
        bytesSent += bytes.count
        if honours {
            switch precondition {
            case .none: break
            case .absent where objects[name] != nil: return .preconditionFailed
            case .matches(let etag) where objects[name]?.etag != etag: return .preconditionFailed
            case .absent, .matches: break
            }
        }
        version += 1
        objects[name] = StoredObject(bytes: bytes, etag: "\"v\(version)\"")
        return .stored
    }

    func delete(_ name: String) throws(VaultError) {
        requestCount += 1
        objects[name] = nil
    }

    func createFolder() throws(VaultError) -> [String] { [] }

    func honoursPreconditions(probe: String) throws(VaultError) -> Bool {
        _ = try put(probe, [1])
        let stale = try put(probe, [2], precondition: .matches("\"no-such-version\""))
        try delete(probe)
        return stale == .preconditionFailed
    }
}

/// Passes every call to `inner`, and runs each hook once: another
/// machine's sync landing at a chosen moment of a round.
/// `beforeBucketWrite`: before the next bucket write (after the round read
/// the root); `afterRootWrite`: right after the next write of the root has
/// reached the store (before its read-back); `afterReadBack`: right after
/// the first read of the root that follows a write of it (the read-back).
final class InterposingStore: SyncStore {
    let inner: any SyncStore
    var beforeBucketWrite: (() throws -> Void)?
    var afterRootWrite: (() throws -> Void)?
    var afterReadBack: (() throws -> Void)?
    private var wroteRoot = false

    init(_ inner: any SyncStore) { self.inner = inner }

    var requestCount: Int { inner.requestCount }
    var bytesSent: Int { inner.bytesSent }

    func get(_ name: String) throws(VaultError) -> StoredObject? {
        let object = try inner.get(name)
        if name == SyncEngine.rootName, wroteRoot { try InterposingStore.run(&afterReadBack) }
        return object
    }

    func put(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition) throws(VaultError) -> WriteOutcome {
        if name.hasPrefix("b-") { try InterposingStore.run(&beforeBucketWrite) }
        let outcome = try inner.put(name, bytes, precondition: precondition)
        if name == SyncEngine.rootName {
            wroteRoot = true
            try InterposingStore.run(&afterRootWrite)
        }
        return outcome
    }

    /// Runs `hook` once, if set.
    private static func run(_ hook: inout (() throws -> Void)?) throws(VaultError) {
        guard let body = hook else { return }
        hook = nil
        do { try body() } catch { throw VaultError(.internalError, "the interposed write failed: \(error)") }
    }

    func delete(_ name: String) throws(VaultError) { try inner.delete(name) }
    func createFolder() throws(VaultError) -> [String] { try inner.createFolder() }
    func honoursPreconditions(probe: String) throws(VaultError) -> Bool {
        try inner.honoursPreconditions(probe: probe)
    }
}

/// Serves the root as it was (`stale`) until a write of the root passes
/// through: a machine that read the root, and looked again just before
/// writing its own, before another machine's write landed.
final class StaleRootStore: SyncStore {
    let inner: any SyncStore
    private var stale: StoredObject?

    init(_ inner: any SyncStore, serving stale: StoredObject?) {
        self.inner = inner
        self.stale = stale
    }

    var requestCount: Int { inner.requestCount }
    var bytesSent: Int { inner.bytesSent }

    func get(_ name: String) throws(VaultError) -> StoredObject? {
        if name == SyncEngine.rootName, let stale { return stale }
        return try inner.get(name)
    }

    func put(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition) throws(VaultError) -> WriteOutcome {
        if name == SyncEngine.rootName { stale = nil }
        return try inner.put(name, bytes, precondition: precondition)
    }

    func delete(_ name: String) throws(VaultError) { try inner.delete(name) }
    func createFolder() throws(VaultError) -> [String] { try inner.createFolder() }
    func honoursPreconditions(probe: String) throws(VaultError) -> Bool {
        try inner.honoursPreconditions(probe: probe)
    }
}

/// A clock the test moves.
final class MovableClock: TimeSource {
    private let date = Mutex(Date(epochSeconds: 1_800_000_000))

    func now() -> Date { date.withLock { $0 } }
    func advance(_ seconds: Double) { date.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// The stores the round tests run against.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible {
    /// Apache's WebDAV (Tools/testservers/webdav.py), which honours
    /// If-Match and If-None-Match.
    case apache
    /// `MemoryStore` honouring preconditions.
    case memory
    /// `MemoryStore` ignoring them.
    case memoryIgnoringPreconditions
    /// Ceph's RADOS Gateway (Tools/testservers/rgw.py), an S3 store.
    case rgw
    /// `DirectoryObjectStore`, a kind made only for the tests through the
    /// seams of a new store kind.
    case directory

    var testDescription: String { rawValue }

    static let apacheInstalled = FileManager.default.isExecutableFile(atPath: "/usr/sbin/apache2")
    static let rgwInstalled = FileManager.default.isExecutableFile(atPath: "/usr/bin/radosgw")

    /// The kinds whose servers this machine has (Tools/setup installs them all).
    static let available: [StoreKind] = allCases.filter {
        switch $0 {
        case .apache: apacheInstalled
        case .rgw: rgwInstalled
        case .memory, .memoryIgnoringPreconditions, .directory: true
        }
    }
}

/// One store and the machines (vaults of one master key, each with its own
/// sync settings) that sync through it, in this process.
final class SyncBench {
    let dir = TemporaryDirectory()
    let kind: StoreKind
    let store: any SyncStore
    let clock = MovableClock()
    private let server: FixtureServer?
    /// The store's URL.
    let url: String
    /// The store's user (an S3 access key id) and password (its secret).
    private(set) var user: String?
    private(set) var password: [UInt8] = []

    init(_ kind: StoreKind) throws {
        self.kind = kind
        switch kind {
        case .apache:
            let file = dir.path + "/password"
            _ = FileManager.default.createFile(
                atPath: file, contents: Data("store password\n".utf8), attributes: [.posixPermissions: 0o600])
            let server = try FixtureServer(script: "webdav.py", arguments: [dir.path + "/dav", file])
            let settings = try JSONSerialization.jsonObject(with: Data(server.firstLine.utf8)) as! [String: Any]
            url = settings["url"] as! String
            self.server = server
            store = try ObjectSyncStore(
                url: url, user: "vault", password: Array("store password".utf8), transport: CurlTransport(),
                timeout: 30, attempts: nil)
        case .rgw:
            let server = try FixtureServer(script: "rgw.py", arguments: [dir.path + "/rgw"])
            let settings = try JSONSerialization.jsonObject(with: Data(server.firstLine.utf8)) as! [String: Any]
            let credentials = try String(contentsOfFile: settings["credentials"] as! String, encoding: .utf8)
            func value(_ key: String) -> String {
                credentials.split(separator: "\n").first { $0.hasPrefix(key + " =") }!.split(
                    separator: "=", maxSplits: 1)[1]
                    .trimmingCharacters(in: .whitespaces)
            }
            let location = try S3Location(
                url: "s3://vault-bench/machines", endpoint: settings["endpoint"] as? String,
                region: settings["region"] as? String, pathStyle: true)
            url = location.canonicalURL
            user = value("aws_access_key_id")
            password = Array(value("aws_secret_access_key").utf8)
            self.server = server
            store = try ObjectSyncStore(
                url: url, user: user!, password: password, transport: CurlTransport(), timeout: 30,
                attempts: nil)
            _ = try store.createFolder()
        case .memory, .memoryIgnoringPreconditions:
            server = nil
            url = "http://127.0.0.1:9/store/"
            store = MemoryStore(honoursPreconditions: kind == .memory)
        case .directory:
            server = nil
            url = "http://127.0.0.1:9/store/"
            store = ObjectSyncStore(
                client: DirectoryObjectStore(folder: dir.path + "/objects"), timeout: 30, attempts: nil)
            _ = try store.createFolder()
        }
    }

    /// Another client of the bench's store, with its own connection (the
    /// stores of servers only; nil for the in-memory ones).
    func client() throws -> (any SyncStore)? {
        switch kind {
        case .apache:
            return try ObjectSyncStore(
                url: url, user: "vault", password: Array("store password".utf8), transport: CurlTransport(),
                timeout: 30, attempts: nil)
        case .rgw:
            return try ObjectSyncStore(
                url: url, user: user!, password: password, transport: CurlTransport(), timeout: 30,
                attempts: nil)
        case .directory:
            return ObjectSyncStore(
                client: DirectoryObjectStore(folder: dir.path + "/objects"), timeout: 30, attempts: nil)
        case .memory, .memoryIgnoringPreconditions:
            return nil
        }
    }

    /// A new machine with the vault of `first` (a new vault when nil),
    /// connected to the store.
    func machine(joining first: SyncEngine? = nil) throws -> SyncEngine {
        let home = dir.path + "/machine-\(UUID().uuidString)"
        let location = VaultLocation(directory: home + "/data", configDirectory: home + "/config")
        let vault: Vault
        if let first {
            vault = try Vault.create(
                at: location, header: first.vault.header, masterKey: try first.vault.requireMasterKey(),
                slots: try first.vault.storedKeyslots(), time: clock)
        } else {
            vault = try Vault.create(at: location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum, time: clock)
        }
        let engine = SyncEngine(vault: vault, transport: CurlTransport())
        var state = SyncState(url: url, user: user, password: password, device: try Secure.randomBytes(16))
        state.preconditions = try store.honoursPreconditions(probe: "probe-" + (try Secure.randomBytes(8)).hex) ? 1 : 2
        let keys = try engine.syncKeys()
        try engine.vault.update { (_: inout StateManifest) throws(VaultError) in try engine.saveSyncState(state, keys) }
        return engine
    }

    /// A whole sync of `engine` through the bench's store.
    @discardableResult
    func sync(_ engine: SyncEngine, through store: (any SyncStore)? = nil) throws -> SyncReport {
        try engine.sync(through: store ?? self.store, keys: try engine.syncKeys())
    }

    /// A round of `engine`, not yet started.
    func round(_ engine: SyncEngine, through store: (any SyncStore)? = nil) throws -> SyncRound {
        try SyncRound(engine: engine, store: store ?? self.store, keys: try engine.syncKeys())
    }

    /// The root the store holds, decoded with `engine`'s keys.
    func root(_ engine: SyncEngine) throws -> (bytes: [UInt8], root: SyncRoot)? {
        guard let object = try store.get(SyncEngine.rootName) else { return nil }
        let root = try SyncRoot(
            decoding: object.bytes, keys: try engine.syncKeys(), vaultID: engine.vault.header.vaultID,
            keyEpoch: engine.vault.header.keyEpoch)
        return (object.bytes, root)
    }

    /// The names of the grants `engine`'s vault holds.
    func names(_ engine: SyncEngine) throws -> [String] {
        try engine.vault.list(secrets: false).grants.map(\.name).sorted()
    }
}

/// A store whose writes are applied and their answers lost, `lose` in a
/// row from the next one (what a client sees after its retries too: a
/// transient error), while every read is answered; with `away`, nothing
/// is answered at all (a partition).
final class LosingStore: SyncStore {
    let inner: any SyncStore
    /// Writes whose answer is lost, from the next one.
    var lose = 0
    /// Nothing is answered.
    var away = false
    private(set) var requestCount = 0
    private(set) var answerCount = 0

    init(_ inner: any SyncStore) { self.inner = inner }

    var bytesSent: Int { inner.bytesSent }

    private func request() throws(VaultError) {
        requestCount += 1
        if away { throw VaultError(.transient, "the store cannot be reached") }
    }

    func get(_ name: String) throws(VaultError) -> StoredObject? {
        try request()
        answerCount += 1
        return try inner.get(name)
    }

    func put(_ name: String, _ bytes: [UInt8], precondition: WritePrecondition) throws(VaultError) -> WriteOutcome {
        try request()
        let outcome = try inner.put(name, bytes, precondition: precondition)
        if lose > 0 {
            lose -= 1
            throw VaultError(.transient, "PUT \(name): the answer was lost")
        }
        answerCount += 1
        return outcome
    }

    func delete(_ name: String) throws(VaultError) {
        try request()
        try inner.delete(name)
        answerCount += 1
    }

    func createFolder() throws(VaultError) -> [String] { try inner.createFolder() }
    func honoursPreconditions(probe: String) throws(VaultError) -> Bool {
        try inner.honoursPreconditions(probe: probe)
    }
}
