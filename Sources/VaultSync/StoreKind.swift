internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP

/// A kind of sync store: which store URLs are its own, how one is shown,
/// what its user is called, and the object store its settings open. The
/// engine and the command line look a kind up here instead of branching
/// on URLs (CONTRIBUTING.md, "Adding a store kind").
public struct StoreKind: Equatable, Sendable {
    /// A short name: `webdav`, `s3`.
    public let name: String
    /// What the user calls it in messages.
    public let displayName: String
    /// What the store's user is called: the user, or an S3 store's access key.
    public let userLabel: String
    /// Whether `url` is a store URL of this kind.
    let claims: @Sendable (String) -> Bool
    /// The URL as the user is shown it.
    let display: @Sendable (String) -> String
    /// The object store that the URL, user and password open.
    let open:
        @Sendable (StoreSettings, any HTTPTransport, @escaping (Double) -> Void) throws(ObjectStoreFailure) ->
            any ObjectStore

    /// Kinds are equal when their names are.
    public static func == (a: StoreKind, b: StoreKind) -> Bool { a.name == b.name }

    /// Every kind, the first that claims a URL taking it; the last takes any URL.
    public static let all: [StoreKind] = [.s3, .webDAV]

    /// The kind of a store URL.
    public static func of(url: String) -> StoreKind { all.first { $0.claims(url) } ?? .webDAV }

    /// A store URL as the user is shown it.
    public static func displayName(of url: String) -> String { of(url: url).display(url) }

    /// A WebDAV collection, or any HTTP server that answers GET, PUT and
    /// DELETE under an http(s) URL, with Basic authentication when a user is given.
    public static let webDAV = StoreKind(
        name: "webdav", displayName: "WebDAV or HTTP", userLabel: "user", claims: claimsAny, display: shownAsIs,
        open: openWebDAV)

    /// A folder of an S3 bucket (`s3://BUCKET/FOLDER`, with the endpoint,
    /// region and addressing kept in the URL's query), signed with the
    /// access key id (the user) and the secret access key (the password).
    public static let s3 = StoreKind(
        name: "s3", displayName: "S3", userLabel: "access key", claims: S3Location.isS3, display: shownAsS3,
        open: openS3)

    private static func claimsAny(_ url: String) -> Bool { true }

    private static func shownAsIs(_ url: String) -> String { url }

    private static func shownAsS3(_ url: String) -> String {
        (try? S3Location(canonical: url))?.displayName ?? url
    }

    private static func openWebDAV(
        _ settings: StoreSettings, _ transport: any HTTPTransport, _ sleep: @escaping (Double) -> Void
    ) throws(ObjectStoreFailure) -> any ObjectStore {
        let password = settings.user == nil ? nil : try secure(settings.password)
        return try WebDAVObjectStore(
            baseURL: settings.url, user: settings.user, password: password, transport: transport, sleep: sleep)
    }

    private static func openS3(
        _ settings: StoreSettings, _ transport: any HTTPTransport, _ sleep: @escaping (Double) -> Void
    ) throws(ObjectStoreFailure) -> any ObjectStore {
        try S3ObjectStore(
            location: try S3Location(canonical: settings.url), accessKeyID: settings.user ?? "",
            secretAccessKey: try secure(settings.password), transport: transport, sleep: sleep)
    }

    private static func secure(_ bytes: [UInt8]) throws(ObjectStoreFailure) -> SecureBytes {
        do { return try SecureBytes(copying: bytes) } catch { throw ObjectStoreFailure(.invalid, error.reason) }
    }
}

/// What the sync settings say of a store: its URL, user and password (an
/// S3 store's access key id and secret access key).
struct StoreSettings {
    var url: String
    var user: String?
    var password: [UInt8]
}
