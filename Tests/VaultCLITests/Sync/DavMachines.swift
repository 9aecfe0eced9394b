import Foundation
import Glibc
import Testing
import VaultHTTP
import VaultTestSupport

/// Machines (vault homes sharing one key file) that sync through Apache's
/// WebDAV behind the fault-injecting proxy (Tools/testservers/store_proxy.py).
final class DavMachines {
    let dir = TemporaryDirectory()
    let store: WebDAVStore
    let homes: [Home]

    init(count: Int) throws {
        store = try WebDAVStore(in: dir.path, proxied: true)
        homes = (0..<count).map { _ in Home() }
        try homes[0].initKeyfileVault()
        for home in homes {
            home.extra["VAULT_AGENT"] = "off"
            home.extra["VAULT_KEYFILE"] = homes[0].path + "/key"
            home.write(home.path + "/store-password", "store password\n")
        }
    }

    var url: String { store.url }

    /// Sends a control request to the proxy (`mode/nocas`, `lostack/3`...).
    @discardableResult
    func control(_ path: String) throws -> [String: Any] { try store.control(path) }

    /// Sets the store on the first machine, syncs it, and joins the others.
    func connectAll() throws {
        let first = homes[0]
        let set = try first.run(
            "remote", "set", url, "--user", "vault", "--password-file", first.path + "/store-password")
        try #require(set.status == 0, "\(set.stderr)")
        try #require(try first.run("sync").status == 0)
        for home in homes.dropFirst() {
            let joined = try home.run(
                "join", url, "--user", "vault", "--password-file", home.path + "/store-password")
            try #require(joined.status == 0, "\(joined.stderr)")
        }
    }

    func token(_ home: Home, _ name: String) throws -> String {
        try home.run("token", name).stdout.trimmingCharacters(in: .newlines)
    }

    /// The bucket objects the store holds.
    func buckets() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: store.files).filter { $0.hasPrefix("b-") }
    }
}
