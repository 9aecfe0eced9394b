import Testing
import VaultHTTP

@testable import VaultSync

/// The store part of the sync settings as this release writes it (a URL,
/// a user and a password: CONTRIBUTING.md, "Adding a store kind"): every
/// canonical form written once must keep opening as the same kind, with
/// the same settings, in every later release.
@Suite("store settings written by this release keep opening")
struct StoreSettingsFormatTests {
    /// URLs in the forms `vault remote set` and `vault join` store: never
    /// edit a row, add new ones.
    static let written: [(url: String, kind: String, shown: String)] = [
        ("https://dav.example.com/vault/", "webdav", "https://dav.example.com/vault/"),
        (
            "http://127.0.0.1:8080/remote.php/dav/files/ada/vault", "webdav",
            "http://127.0.0.1:8080/remote.php/dav/files/ada/vault"
        ),
        (
            "s3://vault-bucket/laptop?endpoint=http://127.0.0.1:7480&region=us-east-1&style=path", "s3",
            "s3://vault-bucket/laptop at http://127.0.0.1:7480 (region us-east-1, path style)"
        ),
        (
            "s3://team-vault?endpoint=https://s3.eu-west-1.amazonaws.com&region=eu-west-1&style=virtual", "s3",
            "s3://team-vault at https://s3.eu-west-1.amazonaws.com (region eu-west-1)"
        ),
        (
            "s3://b-1/a/b_c.d?endpoint=https://[::1]:9000&region=auto&style=path", "s3",
            "s3://b-1/a/b_c.d at https://[::1]:9000 (region auto, path style)"
        ),
    ]

    @Test("each stored URL is the same kind, shown the same, and opens", arguments: written.indices)
    func opens(_ i: Int) throws {
        let row = Self.written[i]
        let kind = VaultSync.StoreKind.of(url: row.url)
        #expect(kind.name == row.kind)
        #expect(VaultSync.StoreKind.displayName(of: row.url) == row.shown)
        let store = try kind.open(
            StoreSettings(url: row.url, user: "ada", password: Array("secret".utf8)), FailingTransport(), { _ in })
        switch row.kind {
        case "s3": #expect(store is S3ObjectStore)
        default: #expect(store is WebDAVObjectStore)
        }
    }

    @Test("an S3 store's canonical URL reads back to the same location, and writes the same string")
    func s3RoundTrip() throws {
        for row in Self.written where row.kind == "s3" {
            let location = try S3Location(canonical: row.url)
            #expect(location.canonicalURL == row.url)
        }
        let path = try S3Location(canonical: Self.written[2].url)
        #expect(path.bucket == "vault-bucket" && path.prefix == "laptop" && path.endpoint == "http://127.0.0.1:7480")
        #expect(path.region == "us-east-1" && path.pathStyle)
        let odd = try S3Location(canonical: Self.written[4].url)
        #expect(odd.endpoint == "https://[::1]:9000" && odd.prefix == "a/b_c.d" && odd.region == "auto")
    }
}

/// A transport no test here reaches: opening a store sends nothing.
private struct FailingTransport: HTTPTransport {
    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        throw HTTPError(.network, "no request is sent by opening a store")
    }
}
