import Foundation
import Testing

@testable import VaultCore

@Suite("DPoP keys and their place in the payload")
struct DPoPKeyTests {
    /// A JWS segment as a JSON object.
    func object(_ segment: Substring) throws -> [String: Any] {
        var text = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        let data = try #require(Data(base64Encoded: text))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("a proof names its key, the request, the token's hash and the nonce", arguments: ["ES256", "EdDSA"])
    func proof(_ algorithm: String) throws {
        let key = try DPoPKey.generate(algorithm: algorithm)
        #expect(key.algorithm == algorithm)
        #expect(key.thumbprint.count == 43)
        let now = Date(epochSeconds: 1_800_000_000)
        let proof = try key.proof(
            method: "POST", url: "https://api.example.com/items?page=2#top", accessToken: "tok", nonce: "n-1", at: now)
        let parts = proof.split(separator: ".")
        #expect(parts.count == 3)
        let header = try object(parts[0])
        let claims = try object(parts[1])
        #expect(header["typ"] as? String == "dpop+jwt")
        #expect(header["alg"] as? String == algorithm)
        let jwk = try #require(header["jwk"] as? [String: String])
        #expect(jwk["d"] == nil)
        #expect(jwk["kty"] == (algorithm == "ES256" ? "EC" : "OKP"))
        #expect(claims["htm"] as? String == "POST")
        #expect(claims["htu"] as? String == "https://api.example.com/items")
        #expect(claims["iat"] as? Int == 1_800_000_000)
        #expect(claims["nonce"] as? String == "n-1")
        // SHA-256("tok"), base64url.
        #expect(claims["ath"] as? String == "GnZ0607njffhrEOak8P6jjyUV4TU3sn9jjARc4svHWI")
        let again = try key.proof(method: "POST", url: "https://api.example.com/items", at: now)
        #expect(try object(again.split(separator: ".")[1])["jti"] as? String != claims["jti"] as? String)
        #expect(try object(again.split(separator: ".")[1])["ath"] == nil)
    }

    @Test("ES256 is preferred, EdDSA taken when it is the only one listed, nothing else signs")
    func algorithmChoice() {
        #expect(DPoPKey.algorithm(for: nil) == "ES256")
        #expect(DPoPKey.algorithm(for: ["RS256", "EdDSA", "ES256"]) == "ES256")
        #expect(DPoPKey.algorithm(for: ["PS256", "EdDSA"]) == "EdDSA")
        #expect(DPoPKey.algorithm(for: ["RS256"]) == nil)
        #expect(throws: VaultError.self) { try DPoPKey.generate(algorithm: "RS256") }
    }

    @Test("a nonce the server sends is used only when RFC 9449 allows its characters")
    func nonceGrammar() throws {
        let key = try DPoPKey.generate()
        #expect(throws: VaultError.self) {
            try key.proof(method: "GET", url: "https://a.example/", nonce: "a b", at: Date())
        }
        #expect(throws: VaultError.self) {
            try key.proof(method: "GET", url: "https://a.example/", nonce: "a\"b", at: Date())
        }
    }

    func payload(_ grant: Grant) throws -> [UInt8] {
        try Payload(name: "n", grant: grant).sealedBytes().unsafeCopyToArray()
    }

    @Test("a bound grant is stored as oauth2_dpop with its key, read back whole, and listed without the private key")
    func storedAndRead() throws {
        let key = try DPoPKey.generate(algorithm: "EdDSA")
        let grant = Grant(
            provider: "p", accessToken: "a", refreshToken: "r", tokenType: "DPoP", createdAt: Date(epochSeconds: 1),
            dpopKey: key)
        let bytes = try payload(grant)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains(#""kind":"oauth2_dpop""#))
        let read = try #require(bytes.withUnsafeBytes { Payload.read($0) })
        // Compared aside, so that a failure prints no key.
        let same = read.grant == grant
        #expect(same)
        #expect(read.grant?.kind == .oauth2)
        let listed = try #require(bytes.withUnsafeBytes { Payload.read($0, secrets: false) })
        #expect(listed.grant?.dpopKey?.privateKey == "")
        #expect(listed.grant?.dpopKey?.thumbprint == key.thumbprint)
        let sameByFoundation = Payload.decodedWithFoundation(bytes)?.grant == grant
        #expect(sameByFoundation)
        // A bearer grant keeps its kind.
        #expect(
            String(decoding: try payload(Grant(provider: "p", createdAt: Date())), as: UTF8.self).contains(
                #""kind":"oauth2""#))
    }

    @Test("a key without the oauth2_dpop kind, or the kind without a key, is refused by both readers")
    func mismatchRefused() throws {
        let key = #"{"alg":"ES256","jkt":"x","private_key":"y"}"#
        for grant in [
            #"{"provider":"p","kind":"oauth2","created_at":1,"dpop_key":\#(key)}"#,
            #"{"provider":"p","created_at":1,"dpop_key":\#(key)}"#,
            #"{"provider":"p","kind":"oauth2_dpop","created_at":1}"#,
            #"{"provider":"p","kind":"oauth2_dpop","created_at":1,"dpop_key":{"alg":"ES256","jkt":"x"}}"#,
        ] {
            let bytes = Array(#"{"name":"n","grant":\#(grant)}"#.utf8)
            #expect(bytes.withUnsafeBytes { Payload.read($0) } == nil, "\(grant)")
            #expect(Payload.decodedWithFoundation(bytes) == nil, "\(grant)")
        }
    }

    @Test("a refresh keeps the key with the tokens; a merge that takes the other side's tokens takes its key")
    func keyFollowsTokens() throws {
        let key = try DPoPKey.generate()
        let bound = Grant(provider: "p", accessToken: "a", refreshToken: "r", createdAt: Date(), dpopKey: key)
        let metadata = Grant(provider: "p", account: "ada", accessToken: "x", refreshToken: "y", createdAt: Date())
        let keyFollows = metadata.withTokens(of: bound).dpopKey == key
        #expect(keyFollows)
        #expect(bound.withTokens(of: metadata).dpopKey == nil)
    }
}
