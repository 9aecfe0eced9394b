import Foundation
import VaultHTTP

/// A sync store for a test: Apache's WebDAV server (Tools/testservers/webdav.py)
/// on 127.0.0.1 with one user, `vault`, and its files under `dir`; with
/// `proxied`, behind the fault-injecting proxy (store_proxy.py) that tests
/// steer with `control(_:)`. Both stop with the value.
public final class WebDAVStore: @unchecked Sendable {
    /// The store password, as the file `passwordFile` holds it (plus a newline).
    public let password: String
    /// A 0600 file holding the password, for `--password-file`.
    public let passwordFile: String
    /// Apache's collection, `http://127.0.0.1:PORT/store/`.
    public let directURL: String
    /// Apache's port.
    public let port: Int
    /// The collection's files as the server keeps them.
    public let files: String
    /// The URL machines use: the proxy's when there is one, else Apache's.
    public var url: String { proxy.map { "http://127.0.0.1:\($0.port)/store/" } ?? directURL }
    /// The proxy, when the store was started `proxied`.
    public let proxy: FixtureServer?
    private let server: FixtureServer

    /// Starts the server (and the proxy) with its files in `dir`.
    public init(in dir: String, password: String = "store password", proxied: Bool = false) throws {
        self.password = password
        passwordFile = dir + "/store-password"
        guard
            FileManager.default.createFile(
                atPath: passwordFile, contents: Data((password + "\n").utf8),
                attributes: [.posixPermissions: 0o600])
        else { throw POSIXError(.EIO) }
        server = try FixtureServer(script: "webdav.py", arguments: [dir + "/dav", passwordFile])
        let settings = try JSONSerialization.jsonObject(with: Data(server.firstLine.utf8)) as? [String: Any]
        guard let port = settings?["port"] as? Int, let url = settings?["url"] as? String else {
            throw POSIXError(.EPROTO)
        }
        self.port = port
        directURL = url
        files = dir + "/dav/www/store"
        proxy = proxied ? try FixtureServer(script: "store_proxy.py", arguments: ["http://127.0.0.1:\(port)"]) : nil
    }

    /// Sends a control request to the proxy (`mode/nocas`, `lostack/3`, ...)
    /// and returns its JSON answer.
    @discardableResult
    public func control(_ path: String) throws -> [String: Any] {
        guard let proxy else { throw POSIXError(.ENOTCONN) }
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(proxy.port)/__\(path)"))
        return (try? JSONSerialization.jsonObject(with: Data(r.body.unsafeCopyToArray())) as? [String: Any]) ?? [:]
    }
}
