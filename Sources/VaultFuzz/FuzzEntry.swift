internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
public import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// Entry points for the fuzz targets (Tools/fuzz): every parser that reads
/// outside bytes, reachable from outside the module. Not for other use.
enum FuzzEntry {
    /// Runs the parser called `target` on `bytes`; errors are expected,
    /// crashes are not. Returns false when a checked invariant fails (the
    /// harness then reports a crash).
    @discardableResult
    static func run(_ target: String, _ bytes: [UInt8]) -> Bool {
        guard let parse = byName[target] else { return true }
        return parse(bytes)
    }

    /// The fuzz targets, by area: each name (Tools/fuzz/run's) with what it
    /// runs on an input, which is false when a checked invariant fails.
    static let table: [(name: String, run: @Sendable ([UInt8]) -> Bool)] = [
        // The vault file.
        (
            "header",
            { bytes in
                _ = try? Header(decoding: bytes)
                return true
            }
        ),
        (
            "keyslot",
            { bytes in
                _ = try? Keyslot(decoding: bytes, what: "keyslot")
                return true
            }
        ),
        (
            "state",
            { bytes in
                _ = try? StateManifest(parsing: bytes)
                return true
            }
        ),
        (
            "checksum",
            { bytes in
                _ = try? Checksum.open(bytes, what: "blob")
                return true
            }
        ),
        ("payload", payload),
        (
            "keyfile",
            { bytes in
                if let text = try? SecureBytes(copying: bytes) { _ = try? Keyfile.decode(text) }
                return true
            }
        ),
        // Providers' answers and files, and other tools' tokens.
        ("token-response", tokenResponse),
        (
            "provider-file",
            { bytes in
                if let file = try? ProviderFile.parse(bytes, source: "fuzz") {
                    _ = try? Provider(file: file, source: "fuzz")
                }
                return true
            }
        ),
        ("id-token", idToken),
        ("discovery", discovery),
        ("foreign-tokens", foreignTokens),
        (
            "service-account-key",
            { bytes in
                if let json = try? SecureBytes(copying: bytes) {
                    _ = try? ServiceAccountKey(json: json, source: "key.json")
                }
                return true
            }
        ),
        // What local programs send: the browser, git, a URL to sign, the agent's peers.
        (
            "redirect-request",
            { bytes in
                if let target = LoopbackListener.requestTarget(bytes) {
                    let query = target.split(separator: "?", maxSplits: 1).dropFirst().first ?? ""
                    _ = FormEncoding.decode(query)
                }
                return true
            }
        ),
        (
            "git-credential",
            { bytes in
                _ = GitCredentialRequest(String(decoding: bytes, as: UTF8.self))
                return true
            }
        ),
        (
            "oauth1-url",
            { bytes in
                let text = String(decoding: bytes, as: UTF8.self)
                _ = try? OAuth1.signatureBaseString(method: "GET", url: text, bodyForm: text, oauthParameters: [])
                _ = URLPolicy.redacted(text)
                _ = try? URLPolicy.check(text)
                return true
            }
        ),
        (
            "agent-message",
            { bytes in
                _ = try? AgentRequest(parsing: bytes)
                var r = MessageReader(bytes)
                if (try? r.response()) != nil {
                    _ = try? r.record()
                    _ = try? r.error()
                }
                return true
            }
        ),
        // The sync store's objects.
        ("sync-root", syncRoot),
        (
            "sync-bucket",
            { bytes in
                _ = try? SyncBucket.parseBody(bytes, index: bytes.first ?? 0, what: "bucket")
                _ = try? SyncBucket.parseBody(bytes, index: bytes.first ?? 0, what: "bucket", version: 2)
                return true
            }
        ),
        (
            "sync-keys",
            { bytes in
                _ = try? SyncEngine.parseKeysObject(bytes)
                return true
            }
        ),
    ]

    /// The fuzz targets by name.
    static let targets = table.map(\.name)

    /// `table`, looked up by name.
    private static let byName = Dictionary(uniqueKeysWithValues: table.map { ($0.name, $0.run) })

    /// Differential: when both payload readers accept a text, they agree;
    /// a listing's reading accepts exactly what the full one does, and what
    /// it keeps gives the same name, state and deadline.
    private static func payload(_ bytes: [UInt8]) -> Bool {
        let ours = bytes.withUnsafeBytes { Payload.read($0) }
        if let ours, let foundation = Payload.decodedWithFoundation(bytes), ours != foundation {
            return false  // the payload readers disagree
        }
        let listed = bytes.withUnsafeBytes { Payload.read($0, secrets: false) }
        guard (listed == nil) == (ours == nil) else { return false }
        if let ours, let listed {
            let at = Date(epochSeconds: 1_800_000_000)
            guard listed.name == ours.name, (listed.grant == nil) == (ours.grant == nil),
                listed.grant?.state(at: at) == ours.grant?.state(at: at),
                listed.grant?.refreshTokenDeadline(policy: nil) == ours.grant?.refreshTokenDeadline(policy: nil)
            else { return false }
        }
        return true
    }

    /// A token endpoint's answer, as a grant, an error and a device
    /// authorization, classified as a 200 and as a 400.
    private static func tokenResponse(_ bytes: [UInt8]) -> Bool {
        guard let json = try? SecureBytes(copying: bytes) else { return true }
        _ = try? TokenResponse(json: json).importedGrant(now: Date(epochSeconds: 1_800_000_000))
        _ = OAuthErrorBody(json)
        _ = try? TokenEndpoint.normalized(json)
        for status in [200, 400] {
            let answer = TokenEndpoint.Answer(status: status, body: json, retryAfter: nil, contentType: nil)
            _ = TokenEndpoint.classify(answer, what: "fuzz", quirks: ErrorQuirks())
        }
        _ = try? DeviceAuthorization(json)
        return true
    }

    /// An ID token, verified, read for its account, and as an issuer.
    private static func idToken(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        _ = try? IDTokenClaims.verify(
            text, issuer: "https://id.example", clientID: "c", nonce: "n", now: Date(epochSeconds: 1_800_000_000))
        _ = IDTokenClaims.unverifiedAccount(text)
        _ = IDTokenClaims.matches(issuer: text, pattern: "https://login.example/{tenantid}/v2.0")
        return true
    }

    /// A discovery document as the provider's answer.
    private static func discovery(_ bytes: [UInt8]) -> Bool {
        struct Answer: HTTPTransport {
            let body: [UInt8]
            func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
                let secure: SecureBytes
                do { secure = try SecureBytes(copying: body) } catch { throw HTTPError(.unavailable, "memory") }
                return HTTPResponse(status: 200, headers: [], body: secure)
            }
        }
        _ = try? Discovery.provider(name: "fuzz", issuer: "https://id.example", transport: Answer(body: bytes))
        return true
    }

    /// Other tools' token files (vault import --from), the first byte choosing the tool.
    private static func foreignTokens(_ bytes: [UInt8]) -> Bool {
        let tools = ForeignTokens.Tool.allCases
        if let first = bytes.first, let json = try? SecureBytes(copying: Array(bytes.dropFirst())) {
            let tool = tools[Int(first) % tools.count]
            _ = try? ForeignTokens.convert(
                tool, json, section: first & 0x80 == 0 ? nil : "a", now: Date(epochSeconds: 1_800_000_000))
        }
        return true
    }

    /// A sync root's body, and a whole root opened with a fixed key.
    private static func syncRoot(_ bytes: [UInt8]) -> Bool {
        var root = SyncRoot(
            vaultID: Array(repeating: 0, count: 16), keyEpoch: 1, epoch: 1, writer: Array(repeating: 0, count: 16),
            parent: Array(repeating: 0, count: 32))
        try? root.parseBody(bytes)
        if let keys = try? SyncKeys(masterKey: SecureBytes(copying: [UInt8](repeating: 1, count: 32))) {
            _ = try? SyncRoot(decoding: bytes, keys: keys, vaultID: Array(repeating: 0, count: 16), keyEpoch: 1)
        }
        return true
    }
}
