import Foundation

/// A Kubernetes API server for kubectl over HTTPS on loopback
/// (Tools/testservers/kube_api.py), taking the shared provider's access
/// tokens.
public final class KubeAPIServer: @unchecked Sendable {
    public let port: Int
    /// The CA that signed the server's certificate (PEM).
    public let ca: String
    private let server: FixtureServer
    private let home = TemporaryDirectory()

    public static let shared: Result<KubeAPIServer, any Error> = Result {
        let kube = try KubeAPIServer(provider: try OIDCProvider.shared.get())
        RunEnd.atExit { kube.end() }
        return kube
    }

    /// Stops the server by its script and removes its directory.
    func end() {
        server.stop()
        home.remove()
    }

    /// A server of its own that takes any bearer token, for a test that
    /// checks which token came by the log (`requests`).
    public static func acceptingAny() throws -> KubeAPIServer { try KubeAPIServer(provider: nil) }

    init(provider: OIDCProvider?) throws {
        let folder = home.path + "/kube"
        server = try FixtureServer(
            script: "kube_api.py",
            arguments: provider.map { ["serve", folder, $0.directory + "/settings.json"] } ?? ["serve-any", folder])
        struct Info: Decodable {
            let port: Int
            let ca: String
        }
        let info = try JSONDecoder().decode(Info.self, from: Data(server.firstLine.utf8))
        port = info.port
        ca = info.ca
    }

    /// What the server saw, one request a line: a hash of the bearer token
    /// (the first 16 hex digits of its SHA-256), the status it answered,
    /// and the kind of token it took (`access`, `id`, `-`).
    public func requests() -> [(token: String, status: Int, kind: String)] {
        let text = (try? String(contentsOfFile: home.path + "/kube/tokens.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 3, let status = Int(parts[1]) else { return nil }
            return (String(parts[0]), status, String(parts[2]))
        }
    }

    /// A kubeconfig whose one user gets its token from `vault kube-credential
    /// GRANT`, asking for ExecCredential `apiVersion`.
    public func kubeconfig(vault: String, grant: String, apiVersion: String, options: [String] = []) -> String {
        """
        apiVersion: v1
        kind: Config
        clusters:
        - name: test
          cluster:
            server: https://127.0.0.1:\(port)
            certificate-authority: \(ca)
        users:
        - name: vault
          user:
            exec:
              apiVersion: \(apiVersion)
              command: \(vault)
              args: [\((["kube-credential", grant] + options).map { "\"\($0)\"" }.joined(separator: ", "))]
        contexts:
        - name: test
          context:
            cluster: test
            user: vault
        current-context: test

        """
    }
}
