import Foundation
import VaultCrypto
import VaultHTTP
import VaultTestSupport

/// What the machine-grant suites share: Debian's Python modules the test
/// servers need, key pairs made with openssl, and small HTTP checks.
enum MachineSupport {
    /// True when Debian's python3 can import `module` (the test servers run with it).
    static func pythonHas(_ module: String) -> Bool {
        guard
            let p = try? VaultProcess.start(
                ["-c", "import \(module)"], environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3")
        else { return false }
        return p.wait().status == 0
    }

    static let authlib = pythonHas("authlib")
    static let djangoOAuthToolkit = pythonHas("oauth2_provider")

    /// A new 2048-bit RSA key pair in PKCS#8 PEM at `prefix`.pem (0600) and `prefix`.pub.
    static func keyPair(_ prefix: String) throws {
        for args in [
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", prefix + ".pem"],
            ["pkey", "-in", prefix + ".pem", "-pubout", "-out", prefix + ".pub"],
        ] {
            let r = try VaultProcess.start(args, environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/openssl")
                .wait()
            guard r.status == 0 else { throw POSIXError(.EIO) }
        }
        chmod(prefix + ".pem", 0o600)
    }

    /// The HTTP status of a GET of `url` with `token` as a bearer token.
    static func status(_ url: String, token: String) throws -> Int {
        try CurlTransport().send(HTTPRequest(method: "GET", url: url, headers: [("Authorization", "Bearer \(token)")]))
            .status
    }

    /// A GET's JSON answer.
    static func json(_ url: String) throws -> Any {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: url))
        return try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) })
    }

    /// A POST of a JSON body.
    static func post(_ url: String, _ object: Any) throws {
        let body = try SecureBytes(copying: [UInt8](try JSONSerialization.data(withJSONObject: object)))
        _ = try CurlTransport().send(HTTPRequest(method: "POST", url: url, body: body))
    }
}

extension Home {
    /// The stored grant as `show --json --reveal` prints it: equal before and after means unchanged.
    func shown(_ name: String) throws -> String { try run("show", name, "--json", "--reveal").stdout }

    /// `list --json` rows by name.
    func listed() throws -> [String: [String: Any]] {
        let r = try run("list", "--json")
        let rows = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []
        return Dictionary(uniqueKeysWithValues: rows.map { ($0["name"] as? String ?? "", $0) })
    }
}
