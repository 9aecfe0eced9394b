import CSodium
import Testing

@testable import VaultCrypto

@Suite("libsodium wrapper")
struct CryptoTests {
    func key(_ fill: UInt8 = 1) throws -> SecureBytes { try SecureBytes(copying: [UInt8](repeating: fill, count: 32)) }

    @Test("AEAD round trip, and any change to ciphertext, nonce, key or data fails")
    func aead() throws {
        let k = try key()
        let nonce = try Random.bytes(AEAD.nonceLength)
        let message = try SecureBytes(copying: Array("a refresh token".utf8))
        let sealed = try AEAD.seal(message, key: k, nonce: nonce, associatedData: [1, 2, 3])
        #expect(sealed.count == message.count + AEAD.tagLength)
        #expect(try AEAD.open(sealed, key: k, nonce: nonce, associatedData: [1, 2, 3]).constantTimeEquals(message))
        for i in sealed.indices {
            var bad = sealed
            bad[i] ^= 0x80
            #expect(throws: CryptoError.self) { try AEAD.open(bad, key: k, nonce: nonce, associatedData: [1, 2, 3]) }
        }
        var badNonce = nonce
        badNonce[0] ^= 1
        #expect(throws: CryptoError.self) { try AEAD.open(sealed, key: k, nonce: badNonce, associatedData: [1, 2, 3]) }
        #expect(throws: CryptoError.self) {
            try AEAD.open(sealed, key: try key(2), nonce: nonce, associatedData: [1, 2, 3])
        }
        #expect(throws: CryptoError.self) { try AEAD.open(sealed, key: k, nonce: nonce, associatedData: [1, 2]) }
        #expect(throws: CryptoError.self) { try AEAD.open([1, 2], key: k, nonce: nonce, associatedData: []) }
    }

    @Test("AEAD refuses wrong key and nonce lengths")
    func aeadLengths() throws {
        let m = try SecureBytes(count: 4)
        #expect(throws: CryptoError.self) {
            try AEAD.seal(
                m, key: try SecureBytes(count: 16), nonce: [UInt8](repeating: 0, count: 24), associatedData: [])
        }
        #expect(throws: CryptoError.self) {
            try AEAD.seal(m, key: try key(), nonce: [UInt8](repeating: 0, count: 12), associatedData: [])
        }
    }

    @Test("Argon2id is deterministic, salted, and refuses parameters outside the bounds before working")
    func argon2id() throws {
        let p = try SecureBytes(copying: Array("passphrase".utf8))
        let salt = [UInt8](repeating: 5, count: 16)
        let ops = PasswordHash.minimumOpsLimit
        let mem = PasswordHash.minimumMemLimit
        let a = try PasswordHash.deriveKey(passphrase: p, salt: salt, opsLimit: ops, memLimit: mem)
        let b = try PasswordHash.deriveKey(passphrase: p, salt: salt, opsLimit: ops, memLimit: mem)
        #expect(a.constantTimeEquals(b))
        let c = try PasswordHash.deriveKey(
            passphrase: p, salt: [UInt8](repeating: 6, count: 16), opsLimit: ops, memLimit: mem)
        #expect(!a.constantTimeEquals(c))
        for (o, m) in [(ops - 1, mem), (ops, mem - 1), (21, mem), (ops, (4 << 30) + 1)] {
            #expect(throws: CryptoError.self) {
                try PasswordHash.deriveKey(passphrase: p, salt: salt, opsLimit: o, memLimit: m)
            }
        }
        #expect(throws: CryptoError.self) {
            try PasswordHash.deriveKey(passphrase: p, salt: [1], opsLimit: ops, memLimit: mem)
        }
    }

    @Test("subkeys differ by context and id, and match libsodium's BLAKE2b construction")
    func subkeys() throws {
        let mk = try key(9)
        let a = try KeyDerivation.subkey(from: mk, id: 1, context: "vaultrec")
        #expect(!a.constantTimeEquals(try KeyDerivation.subkey(from: mk, id: 1, context: "vaultnam")))
        #expect(!a.constantTimeEquals(try KeyDerivation.subkey(from: mk, id: 2, context: "vaultrec")))
        #expect(a.constantTimeEquals(try KeyDerivation.subkey(from: mk, id: 1, context: "vaultrec")))
        #expect(throws: CryptoError.self) { try KeyDerivation.subkey(from: mk, id: 1, context: "short") }
    }

    @Test("BLAKE2b: the empty-input vector of RFC 7693's reference, keyed and unkeyed differ")
    func blake2b() throws {
        // BLAKE2b-512("abc"), RFC 7693 appendix A.
        let abc = try GenericHash.hash(Array("abc".utf8), length: 64)
        #expect(abc.prefix(8) == [0xba, 0x80, 0xa5, 0x3f, 0x98, 0x1c, 0x4d, 0x0d])
        #expect(try GenericHash.hash([1], key: key()) != GenericHash.hash([1]))
        #expect(throws: CryptoError.self) { try GenericHash.hash([1], length: 8) }
    }

    @Test("padding hides lengths to the block and round-trips", arguments: [0, 1, 255, 256, 257, 1000])
    func padding(length: Int) throws {
        let data = try SecureBytes(copying: [UInt8](repeating: 0x41, count: length))
        let padded = try Padding.pad(data, blockSize: 256)
        #expect(padded.count % 256 == 0 && padded.count > length)
        #expect(try Padding.unpad(padded, blockSize: 256).constantTimeEquals(data))
    }

    @Test("malformed padding is refused")
    func badPadding() throws {
        #expect(throws: CryptoError.self) { try Padding.unpad(try SecureBytes(count: 256), blockSize: 256) }
        #expect(throws: CryptoError.self) { try Padding.unpad(try SecureBytes(count: 100), blockSize: 256) }
    }

    @Test("unpadding agrees with libsodium's on every length and on any last block", arguments: [16, 256])
    func unpaddingAgreesWithLibsodium(block: Int) throws {
        #expect(sodium_init() == 0)
        func libsodium(_ bytes: [UInt8]) -> Int? {
            var length = 0
            return sodium_unpad(&length, bytes, bytes.count, block) == 0 ? length : nil
        }
        func ours(_ bytes: [UInt8]) -> Int? {
            bytes.withUnsafeBufferPointer {
                Padding.unpaddedLength($0.baseAddress!, count: bytes.count, blockSize: block)
            }
        }
        // Every length padded by libsodium, then every last block over
        // the bytes that matter (0x00, 0x80, other) from a seeded stream.
        for length in 0..<(3 * block) {
            var padded = [UInt8](repeating: 0x41, count: (length / block + 1) * block)
            var n = 0
            #expect(sodium_pad(&n, &padded, length, block, padded.count) == 0)
            #expect(ours(padded) == length && libsodium(padded) == length)
        }
        // All zeros; the marker at the last block's first byte; a marker
        // followed by a byte that is not zero.
        var edge = [UInt8](repeating: 0, count: 2 * block)
        #expect(ours(edge) == nil && libsodium(edge) == nil)
        edge[block] = 0x80
        #expect(ours(edge) == block && libsodium(edge) == block)
        edge[2 * block - 1] = 1
        #expect(ours(edge) == nil && libsodium(edge) == nil)
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<(320_000 / block) {
            var bytes = [UInt8](repeating: 0, count: 2 * block)
            for i in bytes.indices {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                bytes[i] = [0x00, 0x00, 0x00, 0x80, 0x41][Int(seed >> 33) % 5]
            }
            #expect(ours(bytes) == libsodium(bytes))
        }
    }

    @Test("secure bytes never print their contents")
    func redacted() throws {
        let s = try SecureBytes(copying: Array("hunter2".utf8))
        #expect("\(s)" == "SecureBytes(7 bytes, redacted)")
        #expect(String(reflecting: s) == "SecureBytes(7 bytes, redacted)")
        var copy = s.unsafeCopyToArray()
        secureZero(&copy)
        #expect(copy.isEmpty)
    }
}

@Suite("base64 through libsodium")
struct Base64Tests {
    @Test(
        "RFC 4648 section 10 vectors, both variants",
        arguments: [
            ("", "", ""), ("f", "Zg==", "Zg"), ("fo", "Zm8=", "Zm8"), ("foo", "Zm9v", "Zm9v"),
            ("foob", "Zm9vYg==", "Zm9vYg"), ("fooba", "Zm9vYmE=", "Zm9vYmE"), ("foobar", "Zm9vYmFy", "Zm9vYmFy"),
        ])
    func vectors(plain: String, standard: String, url: String) {
        #expect(Base64.encodeString(Array(plain.utf8), .standard) == standard)
        #expect(Base64.encodeString(Array(plain.utf8), .urlSafeUnpadded) == url)
        #expect(Base64.decode(Array(standard.utf8), .standard) == Array(plain.utf8))
        #expect(Base64.decode(Array(url.utf8), .urlSafeUnpadded) == Array(plain.utf8))
    }

    @Test("the url-safe alphabet, and strict decoding")
    func strict() {
        #expect(Base64.encodeString([0xfb, 0xff], .urlSafeUnpadded) == "-_8")
        #expect(Base64.encodeString([0xfb, 0xff], .standard) == "+/8=")
        for bad in ["Zg=", "Zh", "Z", "Zm9v!", "Zm9v Yg", "-_8="] {
            #expect(Base64.decode(Array(bad.utf8), .urlSafeUnpadded) == nil, "\(bad)")
        }
        #expect(Base64.decode(Array("Zg".utf8), .standard) == nil)
    }
}
