import Foundation
import Testing

@testable import VaultCore

@Suite("the payload JSON reader")
struct PayloadCodecTests {
    func read(_ text: String) -> Payload? {
        Array(text.utf8).withUnsafeBytes { Payload.read($0) }
    }

    /// `value` in a key the reader skips: it must still be valid JSON.
    func readWithExtra(_ value: String) -> Payload? { read(#"{"name":"n","extra":"# + value + "}") }

    @Test(
        "refuses what RFC 8259 refuses, even in keys it skips",
        arguments: [
            "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "-", "1.", ".5", "1e", "+1", "tru", "nul",
            "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"a\u{1}\"", "\"\\u12g4\"", "{\"a\" 1}",
            "[1 2]", "\"unterminated", "1 2", "[]]",
            String(repeating: "[", count: 33) + String(repeating: "]", count: 33),
        ])
    func refuses(_ value: String) {
        #expect(readWithExtra(value) == nil, "\(value)")
    }

    @Test("reads every form, escapes and surrogate pairs included")
    func reads() throws {
        #expect(readWithExtra(#" {"a" : [1, -0, 2.5, 1e3, true, false, null, "x", {}, []]} "#) != nil)
        #expect(read(#"{"name":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}"#)?.name == "\"\\/\u{8}\u{c}\n\r\té😀")
        #expect(read(#"{"name":"é","grant":null}"#) == Payload(name: "é", grant: nil))
        let deep = String(repeating: "[", count: 30) + String(repeating: "]", count: 30)
        #expect(readWithExtra(deep) != nil)
        // Invalid UTF-8 inside a string, a key given twice, a missing name.
        #expect(
            ([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d] as [UInt8]).withUnsafeBytes {
                Payload.read($0)
            } == nil)
        #expect(read(#"{"name":"a","name":"b"}"#) == nil)
        #expect(read(#"{"grant":null}"#) == nil)
        // Grant fields keep their types; created_at and provider are required.
        #expect(read(#"{"name":"n","grant":{"provider":"p","created_at":1.5}}"#) == nil)
        #expect(read(#"{"name":"n","grant":{"provider":"p"}}"#) == nil)
        #expect(read(#"{"name":"n","grant":{"provider":"p","created_at":1,"expires_at":"soon"}}"#) == nil)
        #expect(read(#"{"name":"n","grant":{"provider":"p","created_at":1,"kind":"saml"}}"#) == nil)
        #expect(read(#"{"name":"n","grant":{"provider":"p","created_at":9223372036854775808}}"#) == nil)
        #expect(read(#"{"name":"n","grant":{"provider":"p","created_at":1,"scopes":["a",1]}}"#) == nil)
    }

    @Test("grants written before the token response was kept still read; a kept response is read strictly")
    func keptResponse() throws {
        let old = read(#"{"name":"n","grant":{"provider":"p","created_at":1,"access_token":"a","dead":false}}"#)
        #expect(old?.grant?.tokenResponse == nil && old?.grant?.refreshTokenExpiresAt == nil)
        let new = read(
            #"{"name":"n","grant":{"provider":"p","created_at":1,"refresh_token_expires_at":5,"token_response":{"a":[1,2.5,"x",null,true,{"b":{}}]}}}"#
        )
        #expect(new?.grant?.refreshTokenExpiresAt == Date(epochSeconds: 5))
        #expect(
            new?.grant?.tokenResponse == [
                "a": .array([.number(1), .number(2.5), .string("x"), .null, .bool(true), .object(["b": .object([:])])])
            ])
        // A key given twice, a response that is no object, a number out of range.
        for bad in [#"{"a":1,"a":2}"#, "[1]", #"{"a":1e400}"#] {
            #expect(read(#"{"name":"n","grant":{"provider":"p","created_at":1,"token_response":"# + bad + "}}") == nil)
        }
    }

    @Test("agrees with Foundation's decoder on what vault writes")
    func agreesWithFoundation() throws {
        let grant = Grant(
            provider: "google", account: "a@example.com", accessToken: "ya29.\"quoted\"/\\", refreshToken: "1//r",
            tokenType: "Bearer", expiresAt: Date(epochSeconds: 1_800_000_000), scopes: ["openid", "emoji 😀"],
            idToken: "h.p.s",
            providerConfiguration: ProviderConfiguration(tokenEndpoint: "https://oauth2.example/token", clientID: "c"),
            createdAt: Date(epochSeconds: 1_700_000_000), dead: true, deadReason: "invalid_grant")
        for payload in [Payload(name: "wörk", grant: grant), Payload(name: "gone", grant: nil)] {
            let bytes = try payload.sealedBytes().unsafeCopyToArray()
            let ours = try bytes.withUnsafeBytes { try Payload(json: $0, label: "record") }
            #expect(ours == payload)
            #expect(Payload.decodedWithFoundation(bytes) == ours)
        }
    }

    @Test("each key of a provider configuration reaches the property Foundation's decoder gives it")
    func providerConfigurationKeys() throws {
        let keys = [
            "name", "issuer", "authorization_endpoint", "token_endpoint", "device_authorization_endpoint",
            "revocation_endpoint", "userinfo_endpoint", "client_id", "client_secret", "token_endpoint_auth_method",
            "signature_method", "redirect_uri", "account_claim", "client_private_key", "client_key_id", "subject",
            "endpoints_source", "registration_endpoint", "registration_client_uri", "registration_access_token",
        ]
        // Each value names its key, so a key stored in the wrong property shows.
        let object = "{" + keys.map { "\"\($0)\":\"v-\($0)\"" }.joined(separator: ",") + "}"
        let expected = try JSONDecoder().decode(ProviderConfiguration.self, from: Data(object.utf8))
        let record = #"{"name":"n","grant":{"provider":"p","created_at":1,"provider_config":"# + object + "}}"
        #expect(read(record)?.grant?.providerConfiguration == expected)
        // A listing keeps only whether a token endpoint and a client id
        // are named (what a grant's state reads), each as an empty string,
        // and where the endpoints came from (what its notes read).
        var listed = ProviderConfiguration()
        listed.tokenEndpoint = ""
        listed.clientID = ""
        listed.endpointsSource = "v-endpoints_source"
        let withoutSecrets = Array(record.utf8).withUnsafeBytes { Payload.read($0, secrets: false) }
        #expect(withoutSecrets?.grant?.providerConfiguration == listed)
        #expect(withoutSecrets?.grant?.hasRefreshRoute == false)
    }

    @Test("a listing reads what a grant's state and deadline need, and checks what it drops")
    func listingReading() throws {
        let grant = Grant(
            provider: "p", account: "a@example.com", accessToken: "at", refreshToken: "rt",
            expiresAt: Date(epochSeconds: 50), scopes: ["openid"],
            providerConfiguration: ProviderConfiguration(
                tokenEndpoint: "https://idp.example/token", clientID: "c", clientSecret: "cs"),
            createdAt: Date(epochSeconds: 1), refreshTokenExpiresAt: Date(epochSeconds: 86401),
            tokenResponse: ["refresh_token_expires_in": .number(86400), "scope": .string("openid")])
        let bytes = try Payload(name: "n", grant: grant).sealedBytes().unsafeCopyToArray()
        // Foundation's encoder writes `/` as `\/`: the escapes are read through.
        #expect(String(decoding: bytes, as: UTF8.self).contains(#"https:\/\/idp.example\/token"#))
        let full = try #require(bytes.withUnsafeBytes { Payload.read($0) }?.grant)
        let listed = try #require(bytes.withUnsafeBytes { Payload.read($0, secrets: false) }?.grant)
        #expect(listed.providerConfiguration?.tokenEndpoint == "" && listed.providerConfiguration?.clientSecret == nil)
        #expect(listed.hasRefreshRoute && listed.state(at: Date(epochSeconds: 100)) == .refreshable)
        // What the provider said of its refresh token's life is kept, so
        // the listing gives the deadline `show` gives.
        #expect(listed.tokenResponse == ["refresh_token_expires_in": .number(86400)])
        #expect(listed.refreshTokenDeadline(policy: nil) == full.refreshTokenDeadline(policy: nil))
        #expect(listed.refreshTokenDeadline(policy: nil)?.rule == .providerSaid)
        // A dropped value is still checked: broken JSON in it refuses the record.
        for broken in [#""token_endpoint":"a\qb""#, #""issuer":"a\ud800""#, "\"issuer\":\"a\u{01}\""] {
            let record = #"{"name":"n","grant":{"provider":"p","created_at":1,"provider_config":{"# + broken + "}}}"
            #expect(Array(record.utf8).withUnsafeBytes { Payload.read($0, secrets: false) } == nil, "\(broken)")
            #expect(Array(record.utf8).withUnsafeBytes { Payload.read($0) } == nil, "\(broken)")
        }
        let invalidUTF8 =
            Array(#"{"name":"n","grant":{"provider":"p","created_at":1,"provider_config":{"issuer":""#.utf8)
            + [0xC3, 0x28] + Array(#""}}}"#.utf8)
        #expect(invalidUTF8.withUnsafeBytes { Payload.read($0, secrets: false) } == nil)
        // What the full reading refuses, a listing refuses too: a field of
        // the wrong type, a key given twice, a malformed lineage, a token
        // response that is not an object, a derived token without its token.
        let head = #""grant":{"provider":"p","created_at":1"#
        for record in [
            #"{"name":"n",\#(head),"provider_config":{"issuer":1}}}"#,
            #"{"name":"n",\#(head),"provider_config":{"issuer":"a","issuer":"b"}}}"#,
            #"{"name":"n",\#(head),"provider_config":{"scopes":["a",null]}}}"#,
            #"{"name":"n","lineage":{"spent":"x"},\#(head)}}"#,
            #"{"name":"n",\#(head),"token_response":[]}}"#,
            #"{"name":"n",\#(head),"token_response":{"a":1,"a":2}}}"#,
            #"{"name":"n",\#(head),"derived_tokens":[{"target":{"resource":"r"},"issued_at":1}]}}"#,
        ] {
            #expect(Array(record.utf8).withUnsafeBytes { Payload.read($0) } == nil, "\(record)")
            #expect(Array(record.utf8).withUnsafeBytes { Payload.read($0, secrets: false) } == nil, "\(record)")
        }
    }

    @Test("every property of a grant is in its one list of stored fields, once, and reads back by key")
    func fieldsListedOnce() throws {
        let grant = Grant(
            provider: "p", kind: .oauth2, account: "a", accessToken: "at", refreshToken: "rt", tokenType: "MAC",
            expiresAt: Date(epochSeconds: 2), scopes: ["s"], idToken: "it", tokenSecret: "ts",
            providerConfiguration: ProviderConfiguration(clientID: "c", clientSecret: "cs"),
            createdAt: Date(epochSeconds: 1), refreshedAt: Date(epochSeconds: 3), dead: true, deadReason: "r",
            refreshTokenRotates: true, refreshTokenExpiresAt: Date(epochSeconds: 4), tokenResponse: ["x": .bool(true)],
            // A key makes the stored kind oauth2_dpop, not the default.
            dpopKey: DPoPKey(algorithm: "ES256", thumbprint: "t", privateKey: "k"),
            derivedTokens: [
                DerivedToken(
                    target: try TokenTarget(resource: "https://api.example/", scopes: ["b", "a"]), accessToken: "dt",
                    tokenType: "Bearer", expiresAt: Date(epochSeconds: 5), scopes: ["a"],
                    issuedAt: Date(epochSeconds: 4)),
                DerivedToken(
                    target: try TokenTarget(audience: "aud", exchange: true), accessToken: "dx", tokenType: nil,
                    expiresAt: nil, scopes: [], issuedAt: Date(epochSeconds: 4)),
            ])
        let properties = Mirror(reflecting: grant).children.compactMap(\.label)
        let fields = Grant.storedFields
        #expect(fields.count == properties.count, "\(properties)")
        #expect(Set(fields.map(\.key)).count == fields.count)
        // Each field's functions reach one property of its own, and what
        // is set through them reads back.
        let blank = Grant(provider: "", createdAt: Date(epochSeconds: 0))
        func changed(_ g: Grant) -> [String] {
            zip(Mirror(reflecting: blank).children, Mirror(reflecting: g).children)
                .filter { before, after in String(describing: before.value) != String(describing: after.value) }
                .compactMap { before, _ in before.label }
        }
        var reached: [String] = []
        for field in fields {
            var g = blank
            switch field.value {
            case .text(let p):
                g[p] = "x"
                #expect(g[p] == "x")
            case .optionalText(let p, _):
                g[p] = "x"
                #expect(g[p] == "x")
            case .texts(let p):
                g[p] = ["x"]
                #expect(g[p] == ["x"])
            case .date(let p):
                g[p] = Date(epochSeconds: 7)
                #expect(g[p] == Date(epochSeconds: 7))
            case .optionalDate(let p):
                g[p] = Date(epochSeconds: 7)
                #expect(g[p] == Date(epochSeconds: 7))
            case .flag(let p):
                g[p] = true
                #expect(g[p])
            case .optionalFlag(let p):
                g[p] = true
                #expect(g[p] == true)
            case .object(let p):
                g[p] = ["x": .string("x")]
                #expect(g[p] == ["x": .string("x")])
            case .kind, .providerConfiguration, .dpopKey, .derivedTokens:
                continue
            }
            let labels = changed(g)
            #expect(labels.count == 1, "\(field.key) sets \(labels)")
            reached += labels
        }
        reached += ["kind", "providerConfiguration", "dpopKey", "derivedTokens"]
        #expect(Set(reached).count == fields.count)

        // Every field set to something other than its default comes back,
        // through both readers; without secrets, the secret ones are blanked.
        let bytes = try Payload(name: "n", grant: grant).sealedBytes().unsafeCopyToArray()
        let text = String(decoding: bytes, as: UTF8.self)
        for field in fields { #expect(text.contains("\"\(field.key)\":"), "\(field.key)") }
        #expect(try bytes.withUnsafeBytes { try Payload(json: $0, label: "r") }.grant == grant)
        #expect(Payload.decodedWithFoundation(bytes)?.grant == grant)
        let listed = try #require(try bytes.withUnsafeBytes { try Payload(json: $0, label: "r", secrets: false) }.grant)
        #expect([listed.accessToken, listed.refreshToken, listed.idToken, listed.tokenSecret] == ["", "", "", ""])
        #expect(listed.providerConfiguration == ProviderConfiguration(clientID: ""))
        #expect(listed.tokenResponse == nil)
        #expect(listed.dpopKey?.privateKey == "" && listed.dpopKey?.thumbprint == "t")
        #expect(listed.derivedTokens.isEmpty && text.contains("\"dt\""))
        #expect(listed.account == "a" && listed.expiresAt == grant.expiresAt && listed.dead)
    }

    @Test("derived tokens: strict reading, and records without them read as before")
    func derivedTokensRead() {
        func read(_ json: String) -> Payload? { Array(json.utf8).withUnsafeBytes { Payload.read($0) } }
        let base = #"{"name":"n","grant":{"provider":"p","created_at":1"#
        #expect(read(base + "}}")?.grant?.derivedTokens == [])
        let good =
            #","derived_tokens":[{"target":{"resource":"https://r/","scopes":["s"]},"access_token":"t","issued_at":2,"expires_at":9}]"#
        let g = read(base + good + "}}")?.grant
        #expect(g?.derivedTokens.first?.target.resource == "https://r/")
        #expect(g?.derivedTokens.first?.expiresAt == Date(epochSeconds: 9))
        // No target, no token, a key given twice, a wrong type.
        for bad in [
            #","derived_tokens":[{"access_token":"t","issued_at":2}]"#,
            #","derived_tokens":[{"target":{},"issued_at":2}]"#,
            #","derived_tokens":[{"target":{},"access_token":"t","access_token":"u","issued_at":2}]"#,
            #","derived_tokens":{"target":{}}"#,
        ] {
            #expect(read(base + bad + "}}") == nil, "\(bad)")
        }
    }
}
