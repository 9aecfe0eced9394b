import Testing
import VaultCore
import VaultSync

@testable import VaultAgent

/// Every operation's request and answer crosses the wire whole: what the
/// client writes, the agent reads as it was, and back (docs/agent.md).
@Suite("agent messages: each operation's request and answer round-trip")
struct AgentMessageTests {
    static let claims = RequesterClaims(host: "build-7", command: "git", uid: 1000, pid: 4242)
    static let record = StoredRecord(
        id: Array(repeating: 1, count: 16), nameHash: Array(repeating: 2, count: 32), version: 9, deleted: true,
        nonce: Array(repeating: 3, count: 24), ciphertext: [4, 5, 6])

    /// One request of each operation, with every field set.
    static let requests: [AgentRequest] = [
        .hello(vaultID: Array(repeating: 7, count: 16)),
        .load(vaultID: Array(repeating: 7, count: 16), key: Array(repeating: 8, count: 32)),
        .lock,
        .token(name: "work", minimumValidity: 120, force: true),
        .nameHash("work"),
        .seal(
            payload: [1, 2, 3], id: Array(repeating: 1, count: 16), version: 3, deleted: false,
            nameHash: Array(repeating: 2, count: 32)),
        .open([record, record]),
        .stateMAC([9, 9, 9]),
        .sync,
        .syncReport,
        .storeCheck(probeTimeout: 15, names: ["work", "home"]),
        .conflicts,
        .grantToken(name: "work", minimumValidity: 60, claims: claims),
        .idToken(name: "work", minimumValidity: 600, claims: claims),
        .derivedToken(
            name: "work", minimumValidity: 60, force: false,
            target: try! TokenTarget(
                resource: "https://api.example", audience: "api", scopes: ["read", "write"], exchange: true)),
        .authorizeRequest(
            name: "work", minimumValidity: 30, method: "POST", url: "https://api.example/v1", nonce: "n-1",
            claims: claims),
        .authorizeRequest(name: "work", minimumValidity: 30, method: "GET", url: nil, nonce: nil, claims: claims),
    ]

    @Test("every operation has a request here")
    func everyOperation() {
        #expect(Set(Self.requests.map(\.operation)) == Set(AgentProtocol.Operation.allCases))
    }

    @Test("a request's bytes parse back to the same request", arguments: requests)
    func request(_ request: AgentRequest) throws {
        let body = request.message.body
        let parsed = try AgentRequest(parsing: body)
        #expect(parsed.operation == request.operation)
        #expect(parsed.message.body == body)
        #expect(body.prefix(2) == [AgentProtocol.version, request.operation.rawValue])
    }

    @Test("the token request is laid out as docs/agent.md's table says: version, operation, name, seconds, force")
    func tokenBytes() {
        let body = AgentRequest.token(name: "g5", minimumValidity: 60, force: false).message.body
        #expect(body == [3, 4, 0, 0, 0, 2, 0x67, 0x35, 0, 0, 0, 60, 0])
    }

    /// Writes `answer` as an agent does and reads it back as a client does.
    func roundTrip<A: AgentAnswer>(_ answer: A) throws -> A {
        var w = MessageWriter(status: 0)
        answer.write(into: &w)
        var r = MessageReader(w.body)
        try r.response()
        let read = try A(reading: &r)
        try r.finish()
        return read
    }

    @Test("each answer reads back as it was written")
    func answers() throws {
        let status = AgentProtocol.Status(unlocked: true, pid: 77, idleSecondsLeft: 900, hardSecondsLeft: 28_800)
        #expect(try roundTrip(status) == status)
        let token = TokenAnswer(accessToken: "ya29.a", tokenType: "DPoP", expiresAt: 1_800_000_000)
        #expect(try roundTrip(token) == token)
        let endless = TokenAnswer(accessToken: "t", tokenType: "Bearer", expiresAt: AgentProtocol.noExpiry)
        let id = IDTokenAnswer(idToken: "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", expiresAt: 1_800_000_600)
        #expect(try roundTrip(id) == id)
        #expect(try roundTrip(endless) == endless)
        let grant = GrantTokenAnswer(token: token, account: "ada@example.com", provider: "google", scopes: "a b")
        #expect(try roundTrip(grant) == grant)
        let authorization = AuthorizationAnswer(
            bound: true, fields: [.init(name: "Authorization", value: "DPoP t"), .init(name: "DPoP", value: "eyJ")])
        #expect(try roundTrip(authorization) == authorization)
        #expect(try roundTrip(NameHashAnswer(hash: Array(repeating: 5, count: 32))).hash.count == 32)
        #expect(try roundTrip(MACAnswer(mac: [1, 2])) == MACAnswer(mac: [1, 2]))
        #expect(
            try roundTrip(SealAnswer(nonce: [1], ciphertext: [2, 3])) == SealAnswer(nonce: [1], ciphertext: [2, 3]))
        #expect(try roundTrip(NamesAnswer(["work", "home+1a2b"])) == NamesAnswer(["work", "home+1a2b"]))

        var report = SyncReport()
        report.pulled = 3
        report.pushed = 2
        report.repaired = true
        report.rootMoved = true
        report.requests = 17
        report.bytesSent = 4096
        report.collected = 5
        report.conflicts = ["work"]
        report.renamed = ["home+1a2b"]
        #expect(try roundTrip(report) == report)
        report.passphraseTaken = true
        report.passphrases = 2
        #expect(try roundTrip(FullSyncReport(report)) == FullSyncReport(report))

        var store = StoreCheckAnswer()
        #expect(try roundTrip(store) == store)
        store.configured = true
        store.place = "s3://bucket/folder at https://s3.example"
        store.rights = [.here, .elsewhere("1a2b3c4d"), .nobody, nil]
        #expect(try roundTrip(store) == store)
        store.probe = .success(false)
        #expect(try roundTrip(store) == store)
        store.probe = .failure(VaultError(.transient, "GET vault-root: couldn't connect to server"))
        #expect(try roundTrip(store) == store)
    }

    @Test("a grant handed out carries the token and what describes it, never a refresh token")
    func handedGrant() throws {
        let answer = GrantTokenAnswer(
            token: TokenAnswer(accessToken: "ya29.a", tokenType: "Bearer", expiresAt: 1_800_000_000),
            account: "", provider: "google", scopes: "openid email")
        let grant = try roundTrip(answer).grant
        #expect(grant.accessToken == "ya29.a" && grant.account == nil && grant.refreshToken == nil)
        #expect(grant.scopes == ["openid", "email"] && grant.expiresAt?.epochSeconds == 1_800_000_000)
    }

    @Test("an open answer gives each record's payload or its error, in order")
    func openAnswer() throws {
        var w = MessageWriter(status: 0)
        OpenAnswer.write(opened: [1, 2, 3], into: &w)
        OpenAnswer.write(failed: VaultError(.tampered, "record 1 failed authentication"), into: &w)
        var r = MessageReader(w.body)
        try r.response()
        let first = try OpenAnswer.read(&r) { .success(Array($0)) }
        let second = try OpenAnswer.read(&r) { .success(Array($0)) }
        try r.finish()
        #expect(try first.get() == [1, 2, 3])
        #expect(throws: VaultError.self) { try second.get() }
    }

    @Test("an answer with more header fields than a request has is refused")
    func tooManyFields() throws {
        let many = AuthorizationAnswer(
            bound: false,
            fields: Array(repeating: .init(name: "X", value: "y"), count: AuthorizationAnswer.maxFields + 1))
        #expect(throws: VaultError.self) { try roundTrip(many) }
    }
}
