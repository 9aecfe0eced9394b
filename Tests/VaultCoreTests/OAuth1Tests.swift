import Foundation
import Testing
import VaultCrypto
import VaultHTTP

@testable import VaultCore

struct OAuth1Vector: Decodable, CustomTestStringConvertible {
    let name, method, url, nonce, signature_method, signature, consumer_key: String
    let body_form, consumer_secret, consumer_secret_file, token, token_secret, base_string: String?
    let timestamp: Int64
    let include_version: Bool
    let extra: [[String]]

    var testDescription: String { name }

    static func load() throws -> [OAuth1Vector] {
        struct File: Decodable { let cases: [OAuth1Vector] }
        let url = Bundle.module.url(forResource: "oauth1", withExtension: "json", subdirectory: "Vectors")!
        return try JSONDecoder().decode(File.self, from: Data(contentsOf: url)).cases
    }

    func credentials() throws -> OAuth1Credentials {
        let secret: [UInt8]
        if let file = consumer_secret_file {
            let url = Bundle.module.url(forResource: file, withExtension: nil, subdirectory: "Vectors")!
            secret = [UInt8](try Data(contentsOf: url))
        } else {
            secret = Array((consumer_secret ?? "").utf8)
        }
        return OAuth1Credentials(
            consumerKey: consumer_key, consumerSecret: try SecureBytes(copying: secret), token: token,
            tokenSecret: token_secret, method: OAuth1SignatureMethod(rawValue: signature_method)!)
    }
}

@Suite("OAuth 1.0a signatures (RFC 5849)")
struct OAuth1Tests {
    @Test("known answers", arguments: try OAuth1Vector.load())
    func vectors(v: OAuth1Vector) throws {
        let params = try OAuth1.sign(
            method: v.method, url: v.url, bodyForm: v.body_form, credentials: v.credentials(), nonce: v.nonce,
            timestamp: v.timestamp, extra: v.extra.map { ($0[0], $0[1]) }, includeVersion: v.include_version)
        #expect(params.last?.0 == "oauth_signature")
        #expect(params.last?.1 == v.signature)
        if let expected = v.base_string {
            let base = try OAuth1.signatureBaseString(
                method: v.method, url: v.url, bodyForm: v.body_form,
                oauthParameters: params.filter { $0.0 != "oauth_signature" })
            #expect(base == expected)
        }
    }

    @Test(
        "base string URIs: lower case, no default port, no query or fragment",
        arguments: [
            ("HTTP://EXAMPLE.COM:80/r%20v/X?id=123", "http://example.com/r%20v/X"),
            ("https://www.example.net:8080/?q=1", "https://www.example.net:8080/"),
            ("https://example.com:443", "https://example.com/"),
            ("http://user:pw@Example.com/a#frag", "http://example.com/a"),
        ])
    func baseURI(url: String, expected: String) throws {
        #expect(try OAuth1.baseURI(url) == expected)
    }

    @Test("the Authorization header and the signed URL encode every value")
    func placement() throws {
        let params = [("oauth_consumer_key", "a b"), ("oauth_signature", "x+/=")]
        #expect(
            OAuth1.authorizationHeader(params, realm: "Example")
                == #"OAuth realm="Example", oauth_consumer_key="a%20b", oauth_signature="x%2B%2F%3D""#)
        #expect(
            OAuth1.signedURL("https://h/p?x=1#f", params)
                == "https://h/p?x=1&oauth_consumer_key=a%20b&oauth_signature=x%2B%2F%3D#f")
    }

    @Test("PLAINTEXT is refused over plain http except to loopback")
    func plaintextNeedsTLS() throws {
        let c = OAuth1Credentials(
            consumerKey: "k", consumerSecret: try SecureBytes(copying: Array("s".utf8)), method: .plaintext)
        #expect(throws: VaultError.self) {
            try OAuth1.sign(method: "GET", url: "http://api.example.com/x", credentials: c, nonce: "n", timestamp: 1)
        }
        _ = try OAuth1.sign(method: "GET", url: "https://api.example.com/x", credentials: c, nonce: "n", timestamp: 1)
        _ = try OAuth1.sign(method: "GET", url: "http://127.0.0.1:8/x", credentials: c, nonce: "n", timestamp: 1)
    }

    @Test("a wrong key or a tampered request changes the signature")
    func sensitivity() throws {
        let v = try OAuth1Vector.load()[3]  // RFC 5849 1.2, protected resource
        let good = try OAuth1.sign(
            method: v.method, url: v.url, credentials: v.credentials(), nonce: v.nonce, timestamp: v.timestamp,
            includeVersion: false)
        let other = try OAuth1.sign(
            method: v.method, url: v.url + "x", credentials: v.credentials(), nonce: v.nonce, timestamp: v.timestamp,
            includeVersion: false)
        #expect(good.last?.1 != other.last?.1)
        #expect(try OAuth1.nonce() != OAuth1.nonce())
    }
}
