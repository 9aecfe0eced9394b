import Foundation
import Testing
import VaultCrypto
import VaultStorage
import VaultTestSupport

@testable import VaultCore

/// Direct access to the vault file's rows, as an attacker with the disk has.
struct RawVault {
    let db: Database

    init(_ location: VaultLocation) throws {
        db = try Database(path: location.databasePath, mode: .readWrite)
    }

    func meta(_ key: String) throws -> [UInt8] {
        let s = try db.prepare("SELECT value FROM meta WHERE key = ?")
        try s.bind(.text(key))
        try s.step()
        return s.blob(at: 0)
    }

    func setMeta(_ key: String, _ value: [UInt8]) throws {
        try db.prepare("UPDATE meta SET value = ? WHERE key = ?").run(.blob(value), .text(key))
    }

    func slots() throws -> [(Int64, [UInt8])] {
        let s = try db.prepare("SELECT slot, value FROM keyslots ORDER BY slot")
        var out: [(Int64, [UInt8])] = []
        while try s.step() { out.append((s.int64(at: 0), s.blob(at: 1))) }
        return out
    }

    func setSlot(_ n: Int64, _ value: [UInt8]) throws {
        try db.prepare("UPDATE keyslots SET value = ? WHERE slot = ?").run(.blob(value), .integer(n))
    }

    /// All columns of all records, in id order.
    func rows() throws -> [[StorageValue]] {
        let s = try db.prepare("SELECT id, name_hash, version, deleted, nonce, ciphertext FROM records ORDER BY id")
        var out: [[StorageValue]] = []
        while try s.step() {
            out.append([
                .blob(s.blob(at: 0)), .blob(s.blob(at: 1)), .integer(s.int64(at: 2)), .integer(s.int64(at: 3)),
                .blob(s.blob(at: 4)), .blob(s.blob(at: 5)),
            ])
        }
        return out
    }

    func replaceRows(_ rows: [[StorageValue]]) throws {
        try db.execute("DELETE FROM records")
        for r in rows {
            let s = try db.prepare("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)")
            for (i, v) in r.enumerated() { try s.bind(v, at: Int32(i + 1)) }
            try s.step()
        }
    }
}

extension [UInt8] {
    func flipping(_ i: Int) -> [UInt8] {
        var c = self
        c[i] ^= 0x01
        return c
    }
}

@Suite("tamper detection")
struct TamperTests {
    let dir = TemporaryDirectory()
    var key: KeySource { .keyfile(try! TestKeys.keyfileSecret()) }
    let names = ["alpha", "bravo", "charlie"]

    func makeVault() throws {
        let vault = try Vault.create(at: dir.location, key: key, kdf: .minimum)
        for (i, n) in names.enumerated() { try vault.save(TestKeys.grant(token: "token-\(i)"), as: n) }
    }

    func open() throws(VaultError) -> Vault { try Vault.open(at: dir.location, key: key) }

    @Test("every single-bit change of the header is detected and named")
    func header() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        let original = try raw.meta("header")
        for i in original.indices {
            try raw.setMeta("header", original.flipping(i))
            do throws(VaultError) {
                _ = try open()
                Issue.record("header byte \(i) change went unnoticed")
            } catch {
                #expect(error.reason.contains("vault header"), "byte \(i): \(error.reason)")
            }
        }
        try raw.setMeta("header", original)
        #expect(try open().list().grants.count == 3)
    }

    @Test("a header change with a recomputed checksum still fails authentication")
    func forgedHeader() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        let h = try Header(decoding: raw.meta("header"))
        var forged = h
        forged.vaultID[0] ^= 1
        try raw.setMeta("header", try forged.encoded())
        #expect { try open() } throws: { ($0 as? VaultError)?.code == .wrongKey }
        forged = h
        forged.created += 1  // not used by the keyslot AD, but covered by the state MAC
        try raw.setMeta("header", try forged.encoded())
        #expect { try open().load("alpha") } throws: {
            ($0 as? VaultError)?.reason.contains("vault state failed authentication") == true
        }
    }

    @Test("every single-bit change of a keyslot is detected and named")
    func keyslot() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        let (n, original) = try raw.slots()[0]
        for i in original.indices {
            try raw.setSlot(n, original.flipping(i))
            do throws(VaultError) {
                _ = try open()
                Issue.record("keyslot byte \(i) change went unnoticed")
            } catch {
                #expect(error.reason.contains("keyslot \(n)"), "byte \(i): \(error.reason)")
            }
        }
    }

    @Test("a keyslot change with a recomputed checksum fails to unwrap")
    func forgedKeyslot() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        let (n, original) = try raw.slots()[0]
        let body = Array(original.dropLast(16))
        for i in 11..<body.count {  // nonce and wrapped key
            try raw.setSlot(n, try Checksum.seal(body.flipping(i)))
            #expect(throws: VaultError.self, "byte \(i)") { try open() }
        }
    }

    @Test("every single-bit change of the state is detected and named")
    func state() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        let original = try raw.meta("state")
        for i in original.indices {
            try raw.setMeta("state", original.flipping(i))
            do throws(VaultError) {
                _ = try open().load("alpha")
                Issue.record("state byte \(i) change went unnoticed")
            } catch {
                #expect(error.reason.contains("vault state"), "byte \(i): \(error.reason)")
            }
        }
    }

    @Test("a handle that read the state before checks it again after any change made beside it")
    func stateChangedUnderOpenHandle() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        let original = try raw.meta("state")
        let vault = try open()
        #expect(try vault.load("alpha").accessToken == "token-0")
        for i in original.indices {
            try raw.setMeta("state", original.flipping(i))
            do throws(VaultError) {
                _ = try vault.load("alpha")
                Issue.record("state byte \(i) change went unnoticed by an open handle")
            } catch {
                #expect(error.reason.contains("vault state"), "byte \(i): \(error.reason)")
            }
            // Put back, the state is read and trusted again.
            try raw.setMeta("state", original)
            #expect(try vault.load("alpha").accessToken == "token-0")
        }
    }

    @Test("an open handle sees its own writes and another handle's, and an older state put back is checked")
    func openHandleFollowsWrites() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        let vault = try open()
        let other = try open()
        _ = try vault.load("alpha")
        let before = try raw.meta("state")
        try other.save(TestKeys.grant(token: "from-other"), as: "alpha")
        #expect(try vault.load("alpha").accessToken == "from-other")
        try vault.save(TestKeys.grant(token: "from-self"), as: "alpha")
        #expect(try vault.load("alpha").accessToken == "from-self")
        #expect(try other.load("alpha").accessToken == "from-self")
        // The state of two writes ago, authentic but older than the record
        // rows: the rows no longer match it, whoever reads.
        try raw.setMeta("state", before)
        #expect { try vault.load("alpha") } throws: { ($0 as? VaultError)?.code == .tampered }
        #expect { try open().load("alpha") } throws: { ($0 as? VaultError)?.code == .tampered }
    }

    @Test("every single-bit change of a record is detected and named; the other grants stay readable")
    func records() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        let original = try raw.rows()
        var flips = 0
        for row in original.indices {
            for column in original[row].indices {
                let variants: [StorageValue]
                switch original[row][column] {
                case .blob(let b): variants = b.indices.map { .blob(b.flipping($0)) }
                case .integer(let v): variants = [.integer(v + 1), .integer(v ^ 1), .integer(v - 1)]
                default: variants = []
                }
                for variant in variants {
                    var rows = original
                    rows[row][column] = variant
                    try raw.replaceRows(rows)
                    let listing = try open().list()
                    #expect(!listing.problems.isEmpty, "row \(row) column \(column) change went unnoticed")
                    #expect(listing.problems.allSatisfy { $0.reason.hasPrefix("record ") })
                    #expect(listing.grants.count == 2, "row \(row) column \(column): \(listing.problems)")
                    flips += 1
                }
            }
        }
        try raw.replaceRows(original)
        #expect(try open().list().grants.count == 3)
        #expect(flips > 900)
    }

    @Test("a ciphertext moved to another record fails authentication")
    func movedCiphertext() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        var rows = try raw.rows()
        rows[1][4] = rows[0][4]
        rows[1][5] = rows[0][5]
        try raw.replaceRows(rows)
        let listing = try open().list()
        #expect(listing.problems.count == 1)
        #expect(listing.problems[0].reason.contains("failed authentication"))
    }

    @Test("an older version of a record put back is detected as a rollback")
    func replayedVersion() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        let old = try raw.rows()
        let vault = try open()
        try vault.save(TestKeys.grant(token: "rotated"), as: "alpha")
        let oldAlpha = try old.first { row in
            guard case .blob(let h) = row[1] else { return false }
            return h == (try vault.keys.nameHash("alpha"))
        }!
        var rows = try raw.rows()
        let i = rows.firstIndex { $0[0].bytes == oldAlpha[0].bytes }!
        rows[i] = oldAlpha
        try raw.replaceRows(rows)
        #expect { try open().load("alpha") } throws: {
            ($0 as? VaultError)?.reason.contains("does not match the vault state (rolled back or replaced)") == true
        }
        #expect(try open().load("bravo").accessToken == "token-1")
    }

    @Test("a dropped record is reported missing")
    func droppedRecord() throws {
        try makeVault()
        let raw = try RawVault(dir.location)
        try raw.replaceRows(Array(try raw.rows().dropFirst()))
        let listing = try open().list()
        #expect(listing.grants.count == 2)
        #expect(listing.problems.map(\.reason).contains { $0.contains("is missing") })
    }

    @Test("a record from another vault fails authentication")
    func foreignRecord() throws {
        try makeVault()
        let other = TemporaryDirectory()
        let otherStore = try Vault.create(at: other.location, key: key, kdf: .minimum)
        try otherStore.save(TestKeys.grant(token: "foreign"), as: "alpha")
        let foreign = try RawVault(other.location).rows()[0]
        let raw = try RawVault(dir.location)
        var rows = try raw.rows()
        let vault = try open()
        let target = try rows.firstIndex { $0[1].bytes == (try vault.keys.nameHash("alpha")) }!
        rows[target][4] = foreign[4]
        rows[target][5] = foreign[5]
        try raw.replaceRows(rows)
        #expect { try open().load("alpha") } throws: { ($0 as? VaultError)?.code == .tampered }
    }
}

extension StorageValue {
    var bytes: [UInt8] {
        if case .blob(let b) = self { return b }
        return []
    }
}

@Suite("damaged files")
struct DamagedFileTests {
    let dir = TemporaryDirectory()

    func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    @Test("an empty vault file is reported and left as it is")
    func empty() throws {
        try FileManager.default.createDirectory(
            atPath: dir.location.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        _ = FileManager.default.createFile(
            atPath: dir.location.databasePath, contents: Data(), attributes: [.posixPermissions: 0o600])
        #expect { try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret())) } throws: {
            ($0 as? VaultError)?.reason.contains("is empty") == true
        }
        #expect(contents(dir.location.databasePath) == Data())
        #expect { try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum) } throws: {
            ($0 as? VaultError)?.code == .alreadyExists
        }
    }

    @Test("a truncated vault file is reported and not overwritten", arguments: [50, 4096, 8192])
    func truncated(length: Int) throws {
        let vault = try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
        for i in 0..<20 { try vault.save(TestKeys.grant(token: "t\(i)"), as: "g\(i)") }
        _ = consume vault
        let full = contents(dir.location.databasePath)!
        let cut = full.prefix(length)
        _ = FileManager.default.createFile(
            atPath: dir.location.databasePath, contents: cut, attributes: [.posixPermissions: 0o600])
        let key = KeySource.keyfile(try TestKeys.keyfileSecret())
        do throws(VaultError) {
            let opened = try Vault.open(at: dir.location, key: key)
            _ = try opened.list()
            Issue.record("a truncated file opened")
        } catch {
            #expect(error.code == .damaged || error.code == .io, "\(error)")
        }
        #expect(contents(dir.location.databasePath) == cut)
    }

    @Test("an SQLite file that is not a vault is refused and left as it is")
    func foreignDatabase() throws {
        try FileManager.default.createDirectory(
            atPath: dir.location.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let db = try Database(path: dir.location.databasePath, mode: .readWriteCreate)
        try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        _ = consume db
        // Private, as vault's own files are: only the contents are wrong.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: dir.location.databasePath)
        let before = contents(dir.location.databasePath)
        #expect { try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret())) } throws: {
            ($0 as? VaultError)?.reason.contains("not a vault") == true
        }
        #expect(contents(dir.location.databasePath) == before)
    }
}
