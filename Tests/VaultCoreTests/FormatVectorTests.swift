import Foundation
import Testing
import VaultCrypto
import VaultStorage
import VaultTestSupport

@testable import VaultCore

/// The vectors of Tools/vectors/generate.py, an independent implementation
/// of docs/format.md: the Swift code must open exactly those bytes.
struct FormatVectors: Decodable {
    struct Row: Decodable {
        let id, name_hash, nonce, ciphertext: String
        let version: UInt64
        let deleted: Int
    }
    struct VaultVector: Decodable {
        let master_key, passphrase, passphrase_nfc, keyfile, header, state: String
        let keyslots: [String]
        let records: [Row]
        let grants: [ExpectedGrant]
        let name_hashes: [String: String]
    }
    struct ExpectedGrant: Decodable {
        let name: String
        let grant: Grant
    }
    struct Refused: Decodable {
        let why, hex, error: String
    }
    let vault: VaultVector
    let refused_keyslots: [Refused]
    let refused_headers: [Refused]

    static func load() throws -> FormatVectors {
        let url = Bundle.module.url(forResource: "format-v1", withExtension: "json", subdirectory: "Vectors")!
        return try JSONDecoder().decode(FormatVectors.self, from: Data(contentsOf: url))
    }

    /// Writes the vector's rows into a fresh vault file at `location`.
    func materialize(at location: VaultLocation) throws {
        try FileManager.default.createDirectory(
            atPath: location.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let db = try Database(path: location.databasePath, mode: .readWriteCreate)
        try db.execute("PRAGMA journal_mode = WAL")
        try Schema.migrations.apply(to: db)
        let meta = try db.prepare("INSERT INTO meta (key, value) VALUES (?, ?)")
        try meta.run(.text("header"), .blob([UInt8](hex: vault.header)))
        try meta.run(.text("state"), .blob([UInt8](hex: vault.state)))
        for slot in vault.keyslots {
            try db.prepare("INSERT INTO keyslots (value) VALUES (?)").run(.blob([UInt8](hex: slot)))
        }
        for r in vault.records {
            try db.prepare("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)").run(
                .blob([UInt8](hex: r.id)), .blob([UInt8](hex: r.name_hash)), .integer(Int64(r.version)),
                .integer(Int64(r.deleted)), .blob([UInt8](hex: r.nonce)), .blob([UInt8](hex: r.ciphertext)))
        }
        // SQLite creates files under the umask; vault refuses one others can read.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: location.databasePath)
    }
}

@Suite("format vectors")
struct FormatVectorTests {
    @Test("the vector vault opens with its NFD passphrase and lists the expected grants")
    func opensWithPassphrase() throws {
        let v = try FormatVectors.load()
        let dir = TemporaryDirectory()
        try v.materialize(at: dir.location)
        // The vector holds the NFD form; Swift's == would call the two equal.
        #expect(Array(v.vault.passphrase.utf8) != Array(v.vault.passphrase_nfc.utf8))
        let vault = try Vault.open(at: dir.location, key: TestKeys.passphrase(v.vault.passphrase))
        let listing = try vault.list()
        #expect(listing.problems.isEmpty)
        #expect(listing.grants.map(\.name) == v.vault.grants.map(\.name))
        for (got, want) in zip(listing.grants, v.vault.grants) { #expect(got.grant == want.grant) }
        #expect(vault.keys.masterKey?.unsafeCopyToArray() == [UInt8](hex: v.vault.master_key))
        #expect(throws: VaultError.self) { try vault.load("old") }
    }

    @Test("the vector vault opens with its key file")
    func opensWithKeyfile() throws {
        let v = try FormatVectors.load()
        let dir = TemporaryDirectory()
        try v.materialize(at: dir.location)
        let secret = try Keyfile.decode(SecureBytes(copying: Array(v.vault.keyfile.utf8)))
        let vault = try Vault.open(at: dir.location, key: .keyfile(secret))
        #expect(try vault.load("work").refreshToken == "1//vector-refresh")
        #expect(try vault.load("flickr").state(at: Date()) == .dead)
    }

    @Test("name lookup hashes match the vectors")
    func nameHashes() throws {
        let v = try FormatVectors.load()
        let dir = TemporaryDirectory()
        try v.materialize(at: dir.location)
        let secret = try Keyfile.decode(SecureBytes(copying: Array(v.vault.keyfile.utf8)))
        let vault = try Vault.open(at: dir.location, key: .keyfile(secret))
        for (name, hash) in v.vault.name_hashes {
            #expect(try vault.keys.nameHash(name) == [UInt8](hex: hash), "\(name)")
        }
    }

    @Test("keyslots out of bounds or malformed are refused before any key derivation")
    func refusedKeyslots() throws {
        let v = try FormatVectors.load()
        for c in v.refused_keyslots {
            let started = Date()
            do throws(VaultError) {
                _ = try Keyslot(decoding: [UInt8](hex: c.hex), what: "keyslot")
                Issue.record("accepted: \(c.why)")
            } catch {
                #expect(error.code.rawValue == c.error, "\(c.why)")
            }
            // Parsing alone never runs Argon2id, so it is immediate.
            #expect(Date().timeIntervalSince(started) < 1, "\(c.why)")
        }
    }

    @Test("headers with another version, magic or length are refused")
    func refusedHeaders() throws {
        let v = try FormatVectors.load()
        for c in v.refused_headers {
            #expect(throws: VaultError.self, "\(c.why)") { try Header(decoding: [UInt8](hex: c.hex)) }
            do throws(VaultError) { _ = try Header(decoding: [UInt8](hex: c.hex)) } catch {
                #expect(error.code.rawValue == c.error, "\(c.why)")
            }
        }
    }

    @Test("what Swift writes, Swift and the vector layout both read: header and keyslot round trip")
    func roundTrip() throws {
        let header = Header(vaultID: [UInt8](repeating: 9, count: 16), keyEpoch: 1, created: 42)
        #expect(try Header(decoding: header.encoded()) == header)
        #expect(try header.encoded().count == 54)
        let mk = try SecureBytes(randomCount: 32)
        let slot = try Keyslot(
            wrapping: mk, for: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum, vaultID: header.vaultID)
        let parsed = try Keyslot(decoding: slot.encoded(), what: "keyslot")
        let opened = try parsed.unwrap(with: .keyfile(TestKeys.keyfileSecret()), vaultID: header.vaultID)
        #expect(opened?.constantTimeEquals(mk) == true)
        #expect(try parsed.unwrap(with: .keyfile(TestKeys.keyfileSecret(8)), vaultID: header.vaultID) == nil)
        #expect(
            try parsed.unwrap(with: .keyfile(TestKeys.keyfileSecret()), vaultID: [UInt8](repeating: 1, count: 16))
                == nil)
    }
}
