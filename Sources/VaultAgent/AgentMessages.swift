internal import FoundationEssentials
package import VaultCore
internal import VaultCrypto
package import VaultSync

// Every answer's bytes in one place: each answer a value that writes
// itself (`write`) beside how it reads itself (`init(reading:)`). The
// requests' bytes are in AgentProtocol.swift, each encoder beside its
// parser. The client and the responder speak these values;
// `AgentMessageTests` round-trips each one.

/// A value an answer carries: written by the responder, read by the client.
protocol AgentAnswer {
    func write(into w: inout MessageWriter)
    init(reading r: inout MessageReader) throws(VaultError)
}

extension AgentConnection {
    /// Sends `request` and reads the whole answer as `A`.
    func answer<A: AgentAnswer>(_ request: AgentRequest) throws(VaultError) -> A {
        var message = request.message
        return try answer(&message)
    }

    /// Sends `message` and reads the whole answer as `A`; the message is
    /// wiped once sent (a request that carried a key or a payload: its
    /// caller wipes its own copy of the secret).
    func answer<A: AgentAnswer>(_ message: inout MessageWriter) throws(VaultError) -> A {
        defer { message.wipe() }
        var r = try call(message)
        let answer = try A(reading: &r)
        try r.finish()
        return answer
    }

    /// Sends `message`, whose answer carries nothing, and wipes it.
    func acknowledged(_ message: inout MessageWriter) throws(VaultError) {
        defer { message.wipe() }
        try call(message).finish()
    }
}

extension AgentProtocol.Status: AgentAnswer {
    /// Operation 1's answer.
    func write(into w: inout MessageWriter) {
        w.u8(unlocked ? 1 : 0)
        w.u32(pid)
        w.u32(idleSecondsLeft)
        w.u32(hardSecondsLeft)
    }

    init(reading r: inout MessageReader) throws(VaultError) {
        self.init(unlocked: try r.bool(), pid: try r.u32(), idleSecondsLeft: try r.u32(), hardSecondsLeft: try r.u32())
    }
}

/// Operation 4's answer: an access token, its type and expiry.
struct TokenAnswer: AgentAnswer, Equatable {
    var accessToken: String
    var tokenType: String
    /// Epoch seconds, or `AgentProtocol.noExpiry`.
    var expiresAt: Int64

    init(accessToken: String, tokenType: String, expiresAt: Int64) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
    }

    init(_ grant: Grant) {
        self.init(
            accessToken: grant.accessToken ?? "", tokenType: grant.tokenType ?? "Bearer",
            expiresAt: grant.expiresAt?.epochSeconds ?? AgentProtocol.noExpiry)
    }

    func write(into w: inout MessageWriter) {
        w.string(accessToken)
        w.string(tokenType)
        w.u64(UInt64(bitPattern: expiresAt))
    }

    init(reading r: inout MessageReader) throws(VaultError) {
        self.init(accessToken: try r.string(), tokenType: try r.string(), expiresAt: Int64(bitPattern: try r.u64()))
    }
}

/// The answer of operation 16: an OpenID Connect ID token and when it
/// expires, nothing else of the grant.
struct IDTokenAnswer: AgentAnswer, Equatable {
    var idToken: String
    /// Epoch seconds.
    var expiresAt: Int64

    init(idToken: String, expiresAt: Int64) {
        self.idToken = idToken
        self.expiresAt = expiresAt
    }

    func write(into w: inout MessageWriter) {
        w.string(idToken)
        w.u64(UInt64(bitPattern: expiresAt))
    }

    init(reading r: inout MessageReader) throws(VaultError) {
        self.init(idToken: try r.string(), expiresAt: Int64(bitPattern: try r.u64()))
    }
}

/// The answer of operations 11 and 12: an access token and what describes
/// it, never a refresh token.
struct GrantTokenAnswer: AgentAnswer, Equatable {
    var token: TokenAnswer
    var account: String
    var provider: String
    /// Space-separated.
    var scopes: String

    init(token: TokenAnswer, account: String, provider: String, scopes: String) {
        self.token = token
        self.account = account
        self.provider = provider
        self.scopes = scopes
    }

    init(_ grant: Grant) {
        self.init(
            token: TokenAnswer(grant), account: grant.account ?? "", provider: grant.provider,
            scopes: grant.scopes.joined(separator: " "))
    }

    func write(into w: inout MessageWriter) {
        token.write(into: &w)
        w.string(account)
        w.string(provider)
        w.string(scopes)
    }

    init(reading r: inout MessageReader) throws(VaultError) {
        self.init(
            token: try TokenAnswer(reading: &r), account: try r.string(), provider: try r.string(),
            scopes: try r.string())
    }

    /// A grant that holds what was handed out and nothing that could
    /// refresh it: the refresh token stays with the agent.
    var grant: Grant {
        Grant(
            provider: provider, account: account.isEmpty ? nil : account, accessToken: token.accessToken,
            tokenType: token.tokenType,
            expiresAt: token.expiresAt == AgentProtocol.noExpiry
                ? nil : Date(timeIntervalSince1970: TimeInterval(token.expiresAt)),
            scopes: scopes.split(separator: " ").map(String.init), createdAt: Date())
    }
}

/// Operation 13's answer: whether the token is DPoP-bound, and the header
/// fields for the one request.
struct AuthorizationAnswer: AgentAnswer, Equatable {
    /// The most header fields an answer may carry.
    static let maxFields = 8

    var bound: Bool
    var fields: [HeaderField]

    struct HeaderField: Equatable {
        var name: String
        var value: String
    }

    init(bound: Bool, fields: [HeaderField]) {
        self.bound = bound
        self.fields = fields
    }

    func write(into w: inout MessageWriter) {
        w.u8(bound ? 1 : 0)
        w.u32(UInt32(fields.count))
        for field in fields {
            w.string(field.name)
            w.string(field.value)
        }
    }

    init(reading r: inout MessageReader) throws(VaultError) {
        let bound = try r.bool()
        let count = try r.u32()
        guard count <= AuthorizationAnswer.maxFields else {
            throw VaultError(.damaged, "the agent's answer has too many header fields")
        }
        var fields: [HeaderField] = []
        for _ in 0..<count { fields.append(HeaderField(name: try r.string(), value: try r.string())) }
        self.init(bound: bound, fields: fields)
    }
}

/// Operation 6's answer: the sealed record's nonce and ciphertext.
struct SealAnswer: AgentAnswer, Equatable {
    var nonce: [UInt8]
    var ciphertext: [UInt8]

    init(nonce: [UInt8], ciphertext: [UInt8]) {
        self.nonce = nonce
        self.ciphertext = ciphertext
    }

    func write(into w: inout MessageWriter) {
        w.bytes(nonce)
        w.bytes(ciphertext)
    }

    init(reading r: inout MessageReader) throws(VaultError) {
        self.init(nonce: try r.bytes(), ciphertext: try r.bytes())
    }
}

/// Operation 5's answer: the 32-byte lookup hash of a name.
struct NameHashAnswer: AgentAnswer, Equatable {
    var hash: [UInt8]

    init(hash: [UInt8]) { self.hash = hash }

    func write(into w: inout MessageWriter) { w.fixed(hash) }

    init(reading r: inout MessageReader) throws(VaultError) { self.init(hash: try r.fixed(32)) }
}

/// Operation 8's answer: the MAC of a state body.
struct MACAnswer: AgentAnswer, Equatable {
    var mac: [UInt8]

    init(mac: [UInt8]) { self.mac = mac }

    func write(into w: inout MessageWriter) { w.bytes(mac) }

    init(reading r: inout MessageReader) throws(VaultError) { self.init(mac: try r.bytes()) }
}

/// Operation 10's answer, and any list of names: a u32 count, then each.
struct NamesAnswer: AgentAnswer, Equatable {
    var names: [String]

    init(_ names: [String]) { self.names = names }

    func write(into w: inout MessageWriter) { w.strings(names) }

    init(reading r: inout MessageReader) throws(VaultError) {
        var names: [String] = []
        for _ in 0..<Int(try r.u32()) { names.append(try r.string()) }
        self.init(names)
    }
}

extension SyncReport: AgentAnswer {
    /// Operation 9's answer.
    func write(into w: inout MessageWriter) {
        w.u32(UInt32(clamping: pulled))
        w.u32(UInt32(clamping: pushed))
        w.u8(repaired ? 1 : 0)
        w.u32(UInt32(clamping: requests))
        w.u64(UInt64(clamping: bytesSent))
        NamesAnswer(conflicts).write(into: &w)
        NamesAnswer(renamed).write(into: &w)
        w.u8(rootMoved ? 1 : 0)
        w.u32(UInt32(clamping: collected))
    }

    init(reading r: inout MessageReader) throws(VaultError) {
        self.init()
        pulled = Int(try r.u32())
        pushed = Int(try r.u32())
        repaired = try r.bool()
        requests = Int(try r.u32())
        bytesSent = Int(try r.u64())
        conflicts = try NamesAnswer(reading: &r).names
        renamed = try NamesAnswer(reading: &r).names
        rootMoved = try r.bool()
        collected = Int(try r.u32())
    }
}

/// Operation 14's answer: operation 9's, and what the sync did to the
/// vault's passphrases.
struct FullSyncReport: AgentAnswer, Equatable {
    var report: SyncReport

    init(_ report: SyncReport) { self.report = report }

    func write(into w: inout MessageWriter) {
        report.write(into: &w)
        w.u8(report.passphraseTaken ? 1 : 0)
        w.u32(UInt32(clamping: report.passphrases))
    }

    init(reading r: inout MessageReader) throws(VaultError) {
        report = try SyncReport(reading: &r)
        report.passphraseTaken = try r.bool()
        report.passphrases = Int(try r.u32())
    }
}

/// Operation 15's answer: the sync store as the agent sees it, with the
/// credentials it holds.
package struct StoreCheckAnswer: AgentAnswer, Equatable {
    /// False when the vault syncs with no store; nothing else is said then.
    package var configured = false
    /// The store's address, as `vault remote` shows it.
    package var place = ""
    /// Whether the store answered and holds a vault; nil when not asked.
    package var probe: Result<Bool, VaultError>?
    /// Per name asked, who may refresh it; nil when that cannot be told.
    package var rights: [RefreshRight?] = []

    init() {}

    func write(into w: inout MessageWriter) {
        w.u8(configured ? 1 : 0)
        guard configured else { return }
        w.string(place)
        switch probe {
        case nil: w.u8(0)
        case .success(let holdsVault)?:
            w.u8(1)
            w.u8(holdsVault ? 1 : 0)
        case .failure(let error)?:
            w.u8(2)
            w.error(error)
        }
        w.u32(UInt32(rights.count))
        for right in rights {
            switch right {
            case nil: w.u8(0)
            case .here?: w.u8(1)
            case .elsewhere(let device)?:
                w.u8(2)
                w.string(device)
            case .nobody?: w.u8(3)
            }
        }
    }

    init(reading r: inout MessageReader) throws(VaultError) {
        configured = try r.bool()
        guard configured else { return }
        place = try r.string()
        switch try r.u8() {
        case 0: probe = nil
        case 1: probe = .success(try r.bool())
        case 2: probe = .failure(try r.error())
        default: throw VaultError(.damaged, "the agent sent an unknown store probe outcome")
        }
        let count = Int(try r.u32())
        guard count <= AgentRequest.maxRecords else { throw VaultError(.damaged, "the agent sent too many rights") }
        for _ in 0..<count {
            switch try r.u8() {
            case 0: rights.append(nil)
            case 1: rights.append(.here)
            case 2: rights.append(.elsewhere(try r.string()))
            case 3: rights.append(.nobody)
            default: throw VaultError(.damaged, "the agent sent an unknown refresh right")
            }
        }
    }
}

/// Operation 7's answer, a record at a time: 0 and its payload, or 1 and
/// the error opening it gave. Not a value: each payload is written, and
/// read, and wiped at once, never all of them held together.
enum OpenAnswer {
    static func write(opened plain: [UInt8], into w: inout MessageWriter) {
        w.u8(0)
        w.bytes(plain)
    }

    static func write(failed error: VaultError, into w: inout MessageWriter) {
        w.u8(1)
        w.error(error)
    }

    /// Reads one record's result: its payload handed to `body` and then
    /// wiped, or the error the agent gave.
    static func read<R>(
        _ r: inout MessageReader, _ body: (UnsafeRawBufferPointer) -> Result<R, VaultError>
    ) throws(VaultError) -> Result<R, VaultError> {
        if try r.bool() { return .failure(try r.error()) }
        var raw = try r.bytes()
        defer { secureZero(&raw) }
        return raw.withUnsafeBytes { body($0) }
    }
}
