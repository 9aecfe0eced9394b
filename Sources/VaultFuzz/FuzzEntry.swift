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
        switch target {
        case "header": _ = try? Header(decoding: bytes)
        case "sync-root":
            var root = SyncRoot(
                vaultID: Array(repeating: 0, count: 16), keyEpoch: 1, epoch: 1, writer: Array(repeating: 0, count: 16),
                parent: Array(repeating: 0, count: 32))
            try? root.parseBody(bytes)
            if let keys = try? SyncKeys(masterKey: SecureBytes(copying: [UInt8](repeating: 1, count: 32))) {
                _ = try? SyncRoot(decoding: bytes, keys: keys, vaultID: Array(repeating: 0, count: 16), keyEpoch: 1)
            }
        case "discovery":
            // A discovery document as the provider's answer.
            struct Answer: HTTPTransport {
                let body: [UInt8]
                func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
                    let secure: SecureBytes
                    do { secure = try SecureBytes(copying: body) } catch { throw HTTPError(.unavailable, "memory") }
                    return HTTPResponse(status: 200, headers: [], body: secure)
                }
            }
            _ = try? Discovery.provider(name: "fuzz", issuer: "https://id.example", transport: Answer(body: bytes))
        case "sync-keys":
            _ = try? SyncEngine.parseKeysObject(bytes)
        case "sync-bucket":
            _ = try? SyncBucket.parseBody(bytes, index: bytes.first ?? 0, what: "bucket")
            _ = try? SyncBucket.parseBody(bytes, index: bytes.first ?? 0, what: "bucket", version: 2)
        case "agent-message":
            _ = try? AgentRequest(parsing: bytes)
            var r = MessageReader(bytes)
            if (try? r.response()) != nil {
                _ = try? r.record()
                _ = try? r.error()
            }
        case "keyslot": _ = try? Keyslot(decoding: bytes, what: "keyslot")
        case "state": _ = try? StateManifest(parsing: bytes)
        case "checksum": _ = try? Checksum.open(bytes, what: "blob")
        case "payload":
            // Differential: when both readers accept a text, they agree.
            let ours = bytes.withUnsafeBytes { Payload.read($0) }
            if let ours, let foundation = Payload.decodedWithFoundation(bytes), ours != foundation {
                return false  // the payload readers disagree
            }
            // A listing's reading accepts exactly what the full one does,
            // and what it keeps gives the same name, state and deadline.
            let listed = bytes.withUnsafeBytes { Payload.read($0, secrets: false) }
            guard (listed == nil) == (ours == nil) else { return false }
            if let ours, let listed {
                let at = Date(epochSeconds: 1_800_000_000)
                guard listed.name == ours.name, (listed.grant == nil) == (ours.grant == nil),
                    listed.grant?.state(at: at) == ours.grant?.state(at: at),
                    listed.grant?.refreshTokenDeadline(policy: nil) == ours.grant?.refreshTokenDeadline(policy: nil)
                else { return false }
            }
        case "foreign-tokens":
            // Other tools' token files (vault import --from), the first byte choosing the tool.
            let tools = ForeignTokens.Tool.allCases
            if let first = bytes.first, let json = try? SecureBytes(copying: Array(bytes.dropFirst())) {
                let tool = tools[Int(first) % tools.count]
                _ = try? ForeignTokens.convert(
                    tool, json, section: first & 0x80 == 0 ? nil : "a", now: Date(epochSeconds: 1_800_000_000))
            }
        case "service-account-key":
            if let json = try? SecureBytes(copying: bytes) {
                _ = try? ServiceAccountKey(json: json, source: "key.json")
            }
        case "token-response":
            if let json = try? SecureBytes(copying: bytes) {
                _ = try? TokenResponse(json: json).importedGrant(now: Date(epochSeconds: 1_800_000_000))
                _ = OAuthErrorBody(json)
                _ = try? TokenEndpoint.normalized(json)
                for status in [200, 400] {
                    let answer = TokenEndpoint.Answer(status: status, body: json, retryAfter: nil, contentType: nil)
                    _ = TokenEndpoint.classify(answer, what: "fuzz", quirks: ErrorQuirks())
                }
                _ = try? DeviceAuthorization(json)
            }
        case "keyfile":
            if let text = try? SecureBytes(copying: bytes) { _ = try? Keyfile.decode(text) }
        case "provider-file":
            if let file = try? ProviderFile.parse(bytes, source: "fuzz") {
                _ = try? Provider(file: file, source: "fuzz")
            }
        case "id-token":
            let text = String(decoding: bytes, as: UTF8.self)
            _ = try? IDTokenClaims.verify(
                text, issuer: "https://id.example", clientID: "c", nonce: "n", now: Date(epochSeconds: 1_800_000_000))
            _ = IDTokenClaims.unverifiedAccount(text)
            _ = IDTokenClaims.matches(issuer: text, pattern: "https://login.example/{tenantid}/v2.0")
        case "redirect-request":
            if let target = LoopbackListener.requestTarget(bytes) {
                let query = target.split(separator: "?", maxSplits: 1).dropFirst().first ?? ""
                _ = FormEncoding.decode(query)
            }
        case "git-credential":
            _ = GitCredentialRequest(String(decoding: bytes, as: UTF8.self))
        case "oauth1-url":
            let text = String(decoding: bytes, as: UTF8.self)
            _ = try? OAuth1.signatureBaseString(method: "GET", url: text, bodyForm: text, oauthParameters: [])
            _ = URLPolicy.redacted(text)
            _ = try? URLPolicy.check(text)
        default:
            break
        }
        return true
    }

    /// The fuzz targets by name.
    static let targets = [
        "header", "keyslot", "state", "checksum", "payload", "token-response", "keyfile", "provider-file", "id-token",
        "redirect-request", "git-credential", "oauth1-url", "agent-message", "sync-root", "sync-bucket", "sync-keys",
        "discovery",
    ]
}
