import Foundation
import Testing
import VaultHTTP

@testable import VaultCore

struct PKCEVectors: Decodable {
    struct Case: Decodable {
        let verifier_octets: [UInt8]
        let verifier, challenge: String
    }
    let cases: [Case]

    static func load() throws -> [Case] {
        let url = Bundle.module.url(forResource: "pkce", withExtension: "json", subdirectory: "Vectors")!
        return try JSONDecoder().decode(PKCEVectors.self, from: Data(contentsOf: url)).cases
    }
}

@Suite("OAuth primitives")
struct OAuthPrimitiveTests {
    @Test("PKCE S256 matches RFC 7636 Appendix B", arguments: try PKCEVectors.load())
    func pkceVector(c: PKCEVectors.Case) throws {
        let pkce = try PKCE(verifierBytes: c.verifier_octets)
        #expect(pkce.verifier == c.verifier)
        #expect(pkce.challenge == c.challenge)
        #expect(pkce.method == "S256")
        #expect(try PKCE(verifier: c.verifier).challenge == c.challenge)
    }

    @Test("fresh PKCE verifiers, states and nonces are unique and well-formed")
    func fresh() throws {
        let a = try PKCE()
        let b = try PKCE()
        #expect(a.verifier != b.verifier && a.verifier.count == 43)
        #expect(a.verifier.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(try RandomToken.make() != RandomToken.make())
        #expect(throws: VaultError.self) { try PKCE(verifier: "short") }
    }

    @Test("form encoding escapes everything but unreserved characters, and round-trips")
    func formEncoding() {
        #expect(
            FormEncoding.encode([("scope", "openid email"), ("redirect_uri", "http://127.0.0.1:8/cb?x=1&y")])
                == "scope=openid%20email&redirect_uri=http%3A%2F%2F127.0.0.1%3A8%2Fcb%3Fx%3D1%26y")
        #expect(FormEncoding.percentEncode("a-b.c_d~e+é") == "a-b.c_d~e%2B%C3%A9")
        let pairs = FormEncoding.decode("code=a%2Fb&state=s+t&empty=&flag&bad=%zz")
        #expect(pairs.map(\.0) == ["code", "state", "empty", "flag", "bad"])
        #expect(pairs.map(\.1) == ["a/b", "s t", "", "", "%zz"])
        #expect(FormEncoding.appendQuery("https://x/auth?a=1", [("b", "2")]) == "https://x/auth?a=1&b=2")
        #expect(FormEncoding.appendQuery("https://x/auth", [("b", "2")]) == "https://x/auth?b=2")
    }
}
