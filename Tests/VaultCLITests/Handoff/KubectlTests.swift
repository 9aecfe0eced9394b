import Foundation
import Testing
import VaultTestSupport

/// Debian's kubectl with `vault kube-credential` as its exec credential
/// plugin, against an API server on loopback that takes only access tokens
/// the shared provider calls active.
@Suite("kubectl: the exec credential plugin with real kubectl", .serialized)
struct KubectlTests {
    let api: KubeAPIServer
    let home = Home()

    init() throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/kubectl"),
            "kubectl is not installed (Tools/setup installs kubernetes-client)")
        api = try KubeAPIServer.shared.get()
        try home.initKeyfileVault()
    }

    /// Runs kubectl with a kubeconfig naming `vault kube-credential GRANT`.
    func kubectl(
        _ args: [String], grant: String = "kube", apiVersion: String = "client.authentication.k8s.io/v1beta1",
        options: [String] = []
    ) throws -> RunningProcess {
        let config = home.path + "/kubeconfig-\(UUID().uuidString.prefix(8))"
        home.write(
            config, api.kubeconfig(vault: VaultProcess.binary, grant: grant, apiVersion: apiVersion, options: options))
        return try VaultProcess.start(
            ["--kubeconfig", config, "--cache-dir", home.path + "/kube-cache-\(UUID().uuidString.prefix(8))"] + args,
            environment: home.environment, executable: "/usr/bin/kubectl")
    }

    func seen(after count: Int) -> [(token: String, status: Int, kind: String)] {
        Array(api.requests().dropFirst(count))
    }

    @Test("kubectl lists pods with the grant's access token, and never sees it on a command line")
    func getPods() throws {
        try ProviderGrants.importConfidential("kube", into: home)
        let sampler = ArgvSampler(canaries: [], recordAll: true)
        let before = api.requests().count
        let r = try kubectl(["get", "pods", "-o", "name"]).wait(timeout: 60)
        let commandLines = sampler.stopAndCollect().commandLines
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "pod/web-1\npod/web-2\n", "\(r.stdout)")
        let requests = seen(after: before)
        #expect(!requests.isEmpty && requests.allSatisfy { $0.status == 200 && $0.kind == "access" }, "\(requests)")
        let token = try home.run("token", "kube").stdout.trimmingCharacters(in: .newlines)
        #expect(!commandLines.contains { $0.contains(token) }, "the token appeared in a command line")
    }

    @Test("an expired token is refreshed once for many kubectl processes at once")
    func oneRefreshForMany() throws {
        let tokens = try ProviderGrants.importConfidential("kube", into: home, expiresIn: -60)
        let before = api.requests().count
        let runs = try (0..<6).map { _ in try kubectl(["get", "pods", "-o", "name"]) }
        let results = runs.map { $0.wait(timeout: 90) }
        for r in results { #expect(r.status == 0 && r.stdout.contains("pod/web-1"), "\(r.stderr)") }
        let used = Set(seen(after: before).map(\.token))
        #expect(used.count == 1, "kubectl sent \(used.count) different tokens: the grant was refreshed more than once")
        let old = tokens["access_token"] as! String
        #expect(!used.contains(KubectlTests.hash(old)), "the expired token was sent")
        #expect(try home.run("show", "kube", "--json").stdout.contains("\"refreshed_at\""))
    }

    @Test("ExecCredential v1, as newer kubectl asks, is read the same")
    func version1() throws {
        try ProviderGrants.importConfidential("kube", into: home)
        let info =
            #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#
        home.extra["KUBERNETES_EXEC_INFO"] = info
        let r = try home.run("kube-credential", "kube")
        #expect(r.status == 0, "\(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(doc["apiVersion"] as? String == "client.authentication.k8s.io/v1")
        #expect(doc["kind"] as? String == "ExecCredential")
        let status = try #require(doc["status"] as? [String: String])
        #expect(status["token"]?.isEmpty == false)
        let expiry = try #require(status["expirationTimestamp"])
        #expect(
            expiry.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"#, options: .regularExpression) != nil, "\(expiry)")
        home.extra["KUBERNETES_EXEC_INFO"] =
            #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1alpha1"}"#
        let old = try home.run("kube-credential", "kube")
        #expect(old.status == 64 && old.stdout.isEmpty, "\(old.stderr)")
        #expect(old.stderr.contains("set the exec section's apiVersion to client.authentication.k8s.io/v1beta1"))
    }

    @Test("a revoked grant fails in kubectl with vault's words, and nothing is sent")
    func revoked() throws {
        let tokens = try ProviderGrants.importConfidential("kube", into: home, expiresIn: -60)
        try ProviderGrants.revoke(tokens["refresh_token"] as! String, hint: "refresh_token")
        let before = api.requests().count
        let r = try kubectl(["get", "pods", "-o", "name"]).wait(timeout: 60)
        #expect(r.status != 0)
        #expect(r.stderr.contains("vault: error:"), "\(r.stderr)")
        #expect(r.stderr.contains("vault add kube"), "\(r.stderr)")
        #expect(seen(after: before).isEmpty, "kubectl sent a request without a token from vault")
    }

    @Test("a locked vault is not unlocked on the terminal when kubectl says the plugin may not ask")
    func neverAsks() throws {
        try ProviderGrants.importConfidential("kube", into: home)
        home.extra["VAULT_KEYFILE"] = nil
        home.extra["VAULT_AGENT"] = "off"
        home.extra["KUBERNETES_EXEC_INFO"] =
            #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#
        let r = try home.run("kube-credential", "kube")
        #expect(r.status == 77 && r.stdout.isEmpty, "\(r.stderr)")
        #expect(r.stderr.contains("does not let it ask for the passphrase"), "\(r.stderr)")
    }

    @Test("with --id-token, kubectl sends the grant's ID token, refreshed first when it has too little left")
    func idToken() throws {
        let tokens = try ProviderGrants.importConfidential("kube", into: home, idToken: true)
        let before = api.requests().count
        let r = try kubectl(["get", "pods", "-o", "name"], options: ["--id-token"]).wait(timeout: 60)
        #expect(r.status == 0 && r.stdout.contains("pod/web-1"), "\(r.stderr)")
        let requests = seen(after: before)
        #expect(!requests.isEmpty && requests.allSatisfy { $0.kind == "id" }, "\(requests) \(r.stderr)")
        let original = KubectlTests.hash(tokens["id_token"] as! String)
        #expect(requests.allSatisfy { $0.token == original })
        // More validity than the ID token has: refreshed first. glewlwyd
        // sends no new ID token with a refresh, so the one held comes back,
        // with the warning that it has less left than asked for.
        let fresh = try home.run("kube-credential", "kube", "--id-token", "--min-valid", "100000")
        #expect(fresh.status == 0, "\(fresh.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(fresh.stdout.utf8)) as? [String: Any])
        let token = try #require((doc["status"] as? [String: String])?["token"])
        #expect(KubectlTests.hash(token) == original)
        #expect(fresh.stderr.contains("the ID token of 'kube' is valid for"), "\(fresh.stderr)")
        #expect(try home.run("show", "kube", "--json").stdout.contains("\"refreshed_at\""))
        let mixed = try home.run("kube-credential", "kube", "--id-token", "--audience", "k8s")
        #expect(mixed.status == 64, "\(mixed.stderr)")
    }

    @Test("kubectl on a server gets the laptop's token through an agent forwarded over SSH")
    func forwarded() throws {
        let scene = try ForwardingScene()
        // The scene's grant belongs to the provider's public client, whose
        // tokens the shared server's introspection does not vouch for: this
        // server takes any token, and its log shows which came.
        let api = try KubeAPIServer.acceptingAny()
        #expect(try scene.laptop.home.run("policy", "work", "--forwarded", "allow").status == 0)
        let config = scene.server + "/kubeconfig"
        scene.laptop.home.write(
            config,
            api.kubeconfig(
                vault: VaultProcess.binary, grant: "work", apiVersion: "client.authentication.k8s.io/v1beta1"))
        let r = try scene.startOnServer(
            ["--kubeconfig", config, "--cache-dir", scene.server + "/kube-cache", "get", "pods", "-o", "name"],
            forwarding: scene.laptop.paths.forwardSocket, program: "/usr/bin/kubectl"
        ).wait(timeout: 90)
        #expect(r.status == 0 && r.stdout == "pod/web-1\npod/web-2\n", "\(r.stderr)")
        let token = try scene.laptop.home.run("token", "work").stdout.trimmingCharacters(in: .newlines)
        let sent = Set(api.requests().map(\.token))
        #expect(sent == [KubectlTests.hash(token)], "kubectl sent tokens other than the laptop's: \(sent)")
        #expect(try scene.provider.refreshes() == 1, "the laptop refreshed the expired grant once")
    }

    static func hash(_ token: String) -> String {
        let r = try? VaultProcess.start(
            ["-c", "import hashlib,sys; print(hashlib.sha256(sys.stdin.read().encode()).hexdigest()[:16])"],
            environment: ["PATH": "/usr/bin:/bin"], stdin: token, executable: "/usr/bin/python3"
        ).wait()
        return r?.stdout.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }
}
