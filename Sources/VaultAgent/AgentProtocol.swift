internal import FoundationEssentials
package import VaultCore
internal import VaultCrypto
internal import VaultSync

/// The agent's wire protocol, version 3 (docs/agent.md).
///
/// A message is a 4-byte big-endian length (1 to `maxLength`) and a body.
/// A request body is the protocol version, an operation and its fields; a
/// response body is the version, a status (0 ok, 1 error) and fields.
/// Fields are fixed-width big-endian integers and length-prefixed byte
/// strings (u32 length). Parsing is strict: unknown operations, short or
/// oversized fields and trailing bytes are refused.
enum AgentProtocol {
    static let version: UInt8 = 3
    /// Largest message body either side accepts (a state of 300,000
    /// grants fits).
    static let maxLength = 8 << 20
    /// Largest request body a forwarded peer may send (a grant name and
    /// its claims fit many times over).
    static let maxForwardedLength = 16 << 10
    /// Largest batch of records a client puts in one `open` request.
    static let batchBytes = 256 << 10
    /// Largest single field: a state body (25 bytes per grant).
    static let maxField = 8 << 20

    enum Operation: UInt8, CaseIterable {
        /// Vault id (16) → unlocked u8, pid u32, idle left u32, hard left u32.
        case hello = 1
        /// Vault id (16), master key (32) → nothing.
        case load = 2
        /// → nothing; the agent drops its keys.
        case lock = 3
        /// Name, minimum validity u32, force u8 → access token, token type,
        /// expiry (i64 epoch seconds, or `noExpiry`).
        case token = 4
        /// Name → 32-byte lookup hash.
        case nameHash = 5
        /// Payload, id (16), version u64, deleted u8, name hash (32) → nonce, ciphertext.
        case seal = 6
        /// Count u32, then per record: id, name hash, version, deleted, nonce, ciphertext
        /// → per record: 0 and payload, or 1 and an error.
        case open = 7
        /// State body → MAC.
        case stateMAC = 8
        /// → pulled u32, pushed u32, repaired u8, requests u32, bytes sent u64,
        /// conflicts (u32 count of names), renamed (u32 count of names),
        /// root moved u8, collected u32.
        case sync = 9
        /// → u32 count and the names of the grants in a sync conflict (none
        /// when the vault does not sync).
        case conflicts = 10
        /// Name, minimum validity u32, then the asker's claims: host,
        /// command, uid u32, pid u32 → access token, token type, expiry,
        /// account, provider, scopes (space-separated). The one operation a
        /// forwarded client may use: an access token and what describes it,
        /// never a refresh token or a record.
        case grantToken = 11
        /// Name, minimum validity u32, force u8, resource, audience (each
        /// empty for none), scopes (u32 count, then each), exchange u8 →
        /// what operation 11 answers, for the token narrowed to that
        /// target (`TokenRefresher.derivedToken`). Local clients only.
        case derivedToken = 12
        /// Name, minimum validity u32, method, URL (empty when the asker
        /// knows none: a bound grant is then refused, its proof needing
        /// one), DPoP nonce (empty for none), then the asker's claims as in
        /// operation 11 → bound u8
        /// (1 when the access token is DPoP-bound), u32 count, then each
        /// header field's name and value: `Authorization` with a fresh
        /// token, and for a DPoP-bound one the `DPoP` proof the agent signed
        /// for this method and URL (RFC 9449). The key never leaves the
        /// agent. Local and forwarded clients.
        case authorizeRequest = 13
        /// → what operation 9 answers, then passphrase taken u8 and
        /// passphrases u32: what the sync did to the vault's passphrases
        /// (`SyncReport.passphraseTaken`, `passphrases`). A client tries
        /// it first and asks operation 9 of an agent that does not know it.
        case syncReport = 14
        /// Probe timeout u32 (seconds, 0: no probe, at most 60), names (u32
        /// count, then each) → what `vault doctor` tells of the sync store
        /// with the store's credentials, which stay in the agent: configured
        /// u8 (0: no store, and nothing follows), the store's address, the
        /// probe (0 not asked; 1 and holds-a-vault u8; 2 and an error), then
        /// per name who may refresh it (0 unknown, 1 this machine, 2 another
        /// and its 8 hex digits, 3 nobody). Local clients only.
        case storeCheck = 15
        /// Name, minimum validity u32, then the asker's claims as in
        /// operation 11 → the grant's OpenID Connect ID token and its
        /// expiry (epoch seconds), refreshed first when it has less left
        /// (`TokenRefresher.freshGrantWithIDToken`): what `vault
        /// kube-credential --id-token` gives kubectl. The policy, the
        /// question and the audit line are a token request's. Local and
        /// forwarded clients.
        case idToken = 16
    }

    static let noExpiry = Int64.min

    /// What hello reports.
    struct Status: Equatable {
        var unlocked: Bool
        var pid: UInt32
        var idleSecondsLeft: UInt32
        var hardSecondsLeft: UInt32
    }
}

/// Builds a message body.
struct MessageWriter {
    private var w = ByteWriter()

    init(request op: AgentProtocol.Operation) {
        w.append(AgentProtocol.version)
        w.append(op.rawValue)
    }

    init(status: UInt8) {
        w.append(AgentProtocol.version)
        w.append(status)
    }

    mutating func u8(_ v: UInt8) { w.append(v) }
    mutating func u32(_ v: UInt32) { w.append(v) }
    mutating func u64(_ v: UInt64) { w.append(v) }
    mutating func bytes(_ v: [UInt8]) {
        w.append(UInt32(v.count))
        w.append(v)
    }
    mutating func string(_ v: String) { bytes(Array(v.utf8)) }
    mutating func fixed(_ v: [UInt8]) { w.append(v) }
    mutating func record(_ r: StoredRecord) {
        fixed(r.id)
        fixed(r.nameHash)
        u64(r.version)
        u8(r.deleted ? 1 : 0)
        bytes(r.nonce)
        bytes(r.ciphertext)
    }

    mutating func error(_ e: VaultError) {
        string(e.code.rawValue)
        string(e.reason)
        // Once a free-text hint; remedies travel in their own field now,
        // and the string stays (empty) so older clients still read the frame.
        string("")
        string(e.oauthError ?? "")
        let remedy = e.remedy.flatMap { try? JSONEncoder().encode($0) }
        bytes(remedy.map { Array($0) } ?? [])
    }

    var body: [UInt8] { w.bytes }

    /// Zeroes the body (a request that carried a key or a payload).
    mutating func wipe() { w.wipe() }

    /// The body with its length prefix.
    var framed: [UInt8] {
        var f = ByteWriter()
        f.append(UInt32(w.bytes.count))
        f.append(w.bytes)
        return f.bytes
    }
}

/// Reads a message body strictly; every failure is `.damaged` naming the
/// agent message.
package struct MessageReader {
    private var r: ByteReader

    package init(_ body: [UInt8]) { r = ByteReader(body, what: "agent message") }

    /// The version byte and the operation of a request.
    mutating func request() throws(VaultError) -> AgentProtocol.Operation {
        try checkVersion()
        let raw = try r.u8()
        guard let op = AgentProtocol.Operation(rawValue: raw) else {
            throw VaultError(.unsupported, "unknown agent operation \(raw)")
        }
        return op
    }

    /// The version byte and status of a response; throws the agent's error.
    package mutating func response() throws(VaultError) {
        try checkVersion()
        switch try r.u8() {
        case 0: return
        case 1: throw try error()
        default: throw VaultError(.damaged, "agent message has an unknown status")
        }
    }

    private mutating func checkVersion() throws(VaultError) {
        let v = try r.u8()
        guard v == AgentProtocol.version else {
            throw VaultError(.unsupported, "agent protocol version \(v) is not supported")
        }
    }

    mutating func u8() throws(VaultError) -> UInt8 { try r.u8() }
    mutating func bool() throws(VaultError) -> Bool {
        let v = try r.u8()
        guard v <= 1 else { throw VaultError(.damaged, "agent message has a malformed flag") }
        return v == 1
    }
    mutating func u32() throws(VaultError) -> UInt32 { try r.u32() }
    mutating func u64() throws(VaultError) -> UInt64 { try r.u64() }
    mutating func fixed(_ count: Int) throws(VaultError) -> [UInt8] { try r.read(count) }
    mutating func bytes() throws(VaultError) -> [UInt8] {
        let n = Int(try r.u32())
        guard n <= AgentProtocol.maxField else { throw VaultError(.damaged, "agent message has an oversized field") }
        return try r.read(n)
    }
    mutating func string() throws(VaultError) -> String {
        let raw = try bytes()
        guard let s = String(utf8Validating: raw) else {
            throw VaultError(.damaged, "agent message has a malformed string")
        }
        return s
    }
    package mutating func record() throws(VaultError) -> StoredRecord {
        StoredRecord(
            id: try fixed(16), nameHash: try fixed(32), version: try u64(), deleted: try bool(), nonce: try bytes(),
            ciphertext: try bytes())
    }
    package mutating func error() throws(VaultError) -> VaultError {
        let code = try string()
        let reason = try string()
        _ = try string()  // the old hint field, always empty
        let oauthError = try string()
        let remedy = try bytes()
        return VaultError(
            VaultError.Code(wire: code), reason,
            oauthError: oauthError.isEmpty ? nil : oauthError,
            remedy: remedy.isEmpty ? nil : try? JSONDecoder().decode(VaultError.Remedy.self, from: Data(remedy)))
    }

    func finish() throws(VaultError) { try r.finish() }
}

extension VaultError.Code {
    /// A code as the agent sent it: kept when it has a code's form (a newer
    /// agent may send one this client does not know), else `internalError`.
    init(wire text: String) {
        let form =
            (7...64).contains(text.utf8.count) && text.hasPrefix("vault.")
            && text.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x2e || $0 == 0x5f }
        self = form ? VaultError.Code(rawValue: text) : .internalError
    }
}

/// A parsed request: every field checked before anything is done.
package enum AgentRequest {
    /// The operations a forwarded client may use.
    static let forwardable: Set<AgentProtocol.Operation> = [.grantToken, .authorizeRequest, .idToken]

    /// This request's operation.
    var operation: AgentProtocol.Operation {
        switch self {
        case .hello: .hello
        case .load: .load
        case .lock: .lock
        case .token: .token
        case .nameHash: .nameHash
        case .seal: .seal
        case .open: .open
        case .stateMAC: .stateMAC
        case .sync: .sync
        case .syncReport: .syncReport
        case .storeCheck: .storeCheck
        case .conflicts: .conflicts
        case .grantToken: .grantToken
        case .derivedToken: .derivedToken
        case .authorizeRequest: .authorizeRequest
        case .idToken: .idToken
        }
    }

    case hello(vaultID: [UInt8])
    case load(vaultID: [UInt8], key: [UInt8])
    case lock
    case token(name: String, minimumValidity: UInt32, force: Bool)
    case nameHash(String)
    case seal(payload: [UInt8], id: [UInt8], version: UInt64, deleted: Bool, nameHash: [UInt8])
    case open([StoredRecord])
    case stateMAC([UInt8])
    case sync
    case syncReport
    case storeCheck(probeTimeout: UInt32, names: [String])
    case conflicts
    case grantToken(name: String, minimumValidity: UInt32, claims: RequesterClaims)
    case idToken(name: String, minimumValidity: UInt32, claims: RequesterClaims)
    case derivedToken(name: String, minimumValidity: UInt32, force: Bool, target: TokenTarget)
    case authorizeRequest(
        name: String, minimumValidity: UInt32, method: String, url: String?, nonce: String?, claims: RequesterClaims)

    /// The most records one `open` may carry.
    static let maxRecords = 100_000

    /// Parses a request body strictly: each operation's fields, each
    /// checked for the grammar it goes into, and nothing after them.
    /// `message` writes them back, in the same order.
    package init(parsing body: [UInt8]) throws(VaultError) {
        var r = MessageReader(body)
        switch try r.request() {
        case .hello: self = .hello(vaultID: try r.fixed(16))
        case .load: self = .load(vaultID: try r.fixed(16), key: try r.fixed(32))
        case .lock: self = .lock
        case .token: self = .token(name: try r.string(), minimumValidity: try r.u32(), force: try r.bool())
        case .nameHash: self = .nameHash(try r.string())
        case .seal:
            self = .seal(
                payload: try r.bytes(), id: try r.fixed(16), version: try r.u64(), deleted: try r.bool(),
                nameHash: try r.fixed(32))
        case .open:
            let count = Int(try r.u32())
            guard count <= AgentRequest.maxRecords else {
                throw VaultError(.invalidInput, "too many records in one request")
            }
            var rows: [StoredRecord] = []
            for _ in 0..<count { rows.append(try r.record()) }
            self = .open(rows)
        case .stateMAC: self = .stateMAC(try r.bytes())
        case .sync: self = .sync
        case .syncReport: self = .syncReport
        case .storeCheck:
            let timeout = try r.u32()
            guard timeout <= 60 else { throw VaultError(.invalidInput, "a store probe waits at most 60 seconds") }
            let count = Int(try r.u32())
            guard count <= AgentRequest.maxRecords else {
                throw VaultError(.invalidInput, "too many grants in one request")
            }
            var names: [String] = []
            for _ in 0..<count { names.append(try r.string()) }
            self = .storeCheck(probeTimeout: timeout, names: names)
        case .conflicts: self = .conflicts
        case .grantToken:
            self = .grantToken(name: try r.string(), minimumValidity: try r.u32(), claims: try r.claims())
        case .idToken:
            self = .idToken(name: try r.string(), minimumValidity: try r.u32(), claims: try r.claims())
        case .authorizeRequest:
            let name = try r.string()
            let minimum = try r.u32()
            let method = try r.string()
            let url = try r.string()
            let nonce = try r.string()
            // The grammar the proof carries them in, checked before anything is done.
            guard DPoPKey.isMethod(method), url.isEmpty || DPoPKey.isRequestURL(url),
                nonce.isEmpty || DPoPKey.isNonce(nonce)
            else {
                throw VaultError(
                    .invalidInput, "the request to authorize needs an HTTP method, an http(s) URL and a valid nonce")
            }
            self = .authorizeRequest(
                name: name, minimumValidity: minimum, method: method, url: url.isEmpty ? nil : url,
                nonce: nonce.isEmpty ? nil : nonce, claims: try r.claims())
        case .derivedToken:
            let name = try r.string()
            let minimum = try r.u32()
            let force = try r.bool()
            let resource = try r.string()
            let audience = try r.string()
            let count = Int(try r.u32())
            guard count <= 64 else { throw VaultError(.invalidInput, "too many scopes in one request") }
            var scopes: [String] = []
            for _ in 0..<count { scopes.append(try r.string()) }
            let target = try TokenTarget(
                resource: resource.isEmpty ? nil : resource, audience: audience.isEmpty ? nil : audience,
                scopes: scopes, exchange: try r.bool())
            self = .derivedToken(name: name, minimumValidity: minimum, force: force, target: target)
        }
        try r.finish()
    }

    /// The request's body, as `init(parsing:)` reads it: the operations in
    /// the parser's order, so that each encoder reads beside its parser.
    var message: MessageWriter {
        var w = MessageWriter(request: operation)
        switch self {
        case .hello(let vaultID):
            w.fixed(vaultID)
        case .load(let vaultID, let key):
            w.fixed(vaultID)
            w.fixed(key)
        case .lock:
            break
        case .token(let name, let minimum, let force):
            w.string(name)
            w.u32(minimum)
            w.u8(force ? 1 : 0)
        case .nameHash(let name):
            w.string(name)
        case .seal(let payload, let id, let version, let deleted, let nameHash):
            w.bytes(payload)
            w.fixed(id)
            w.u64(version)
            w.u8(deleted ? 1 : 0)
            w.fixed(nameHash)
        case .open(let rows):
            w.u32(UInt32(rows.count))
            for row in rows { w.record(row) }
        case .stateMAC(let body):
            w.bytes(body)
        case .sync, .syncReport:
            break
        case .storeCheck(let timeout, let names):
            w.u32(timeout)
            w.strings(names)
        case .conflicts:
            break
        case .grantToken(let name, let minimum, let claims), .idToken(let name, let minimum, let claims):
            w.string(name)
            w.u32(minimum)
            w.claims(claims)
        case .authorizeRequest(let name, let minimum, let method, let url, let nonce, let claims):
            w.string(name)
            w.u32(minimum)
            w.string(method)
            w.string(url ?? "")
            w.string(nonce ?? "")
            w.claims(claims)
        case .derivedToken(let name, let minimum, let force, let target):
            w.string(name)
            w.u32(minimum)
            w.u8(force ? 1 : 0)
            w.string(target.resource ?? "")
            w.string(target.audience ?? "")
            w.strings(target.scopes)
            w.u8(target.exchange ? 1 : 0)
        }
        return w
    }

    /// A minimum validity in seconds as a request carries it (0 to 10^7).
    static func seconds(_ minimumValidity: TimeInterval) -> UInt32 {
        UInt32(max(0, min(minimumValidity, 1e7)))
    }

    /// Zeroes the secret fields.
    mutating func wipe() {
        switch self {
        case .load(let id, var key):
            secureZero(&key)
            self = .load(vaultID: id, key: key)
        case .seal(var payload, let id, let version, let deleted, let hash):
            secureZero(&payload)
            self = .seal(payload: payload, id: id, version: version, deleted: deleted, nameHash: hash)
        default:
            break
        }
    }
}

extension MessageWriter {
    /// A u32 count, then each string.
    mutating func strings(_ names: [String]) {
        u32(UInt32(names.count))
        for n in names { string(n) }
    }
}

extension MessageReader {
    /// What the asker says about itself (operations 11 and 13): host,
    /// command, uid and pid.
    mutating func claims() throws(VaultError) -> RequesterClaims {
        RequesterClaims(host: try string(), command: try string(), uid: try u32(), pid: try u32())
    }
}

extension MessageWriter {
    /// What the asker says about itself (operations 11 and 13).
    mutating func claims(_ claims: RequesterClaims) {
        string(claims.host)
        string(claims.command)
        u32(claims.uid)
        u32(claims.pid)
    }
}
