import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultCore

@Suite("the GTMAppAuth-style store")
struct VaultStoreTests {
    let dir = TemporaryDirectory()

    func makeVault(_ key: KeySource? = nil) throws -> Vault {
        try Vault.create(at: dir.location, key: key ?? .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
    }

    @Test("keyslots: each kind opens only with its own source; the last slot stays")
    func keyslotKinds() throws {
        let vault = try makeVault()
        let secret = try TestKeys.keyfileSecret(9)
        let number = try vault.keyslots.add(.secretService(secret))
        #expect(try vault.keyslots.list().map(\.kind) == [.keyfile, .secretService])
        // The same 32 bytes as a key file do not open a Secret Service slot.
        #expect { try Vault.open(at: dir.location, key: .keyfile(secret)) } throws: {
            ($0 as? VaultError)?.code == .wrongKey
        }
        #expect(try Vault.open(at: dir.location, key: .secretService(secret)).keyslots.list().count == 2)
        // A Secret Service slot whose key is not in a keyring opens nothing.
        #expect { try vault.keyslots.remove(1) } throws: {
            ($0 as? VaultError)?.reason.contains("counts only while its key is in the keyring") == true
        }
        let other = try TestKeys.keyfileSecret(3)
        try vault.keyslots.addKeyfile(other)
        try vault.keyslots.remove(1)
        try vault.keyslots.remove(number)
        #expect { try vault.keyslots.remove(3) } throws: { ($0 as? VaultError)?.code == .invalidInput }
        #expect { try vault.keyslots.remove(7) } throws: { ($0 as? VaultError)?.code == .notFound }
        #expect { try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret())) } throws: {
            ($0 as? VaultError)?.code == .wrongKey
        }
        _ = try Vault.open(at: dir.location, key: .keyfile(other))
    }

    @Test("of two concurrent keyslot changes the later is refused and changes nothing")
    func concurrentKeyslotChanges() throws {
        let first = try makeVault(TestKeys.passphrase("old passphrase"))
        _ = first
        let a = try Vault.open(at: dir.location, key: TestKeys.passphrase("old passphrase"))
        let b = try Vault.open(at: dir.location, key: TestKeys.passphrase("old passphrase"))
        try a.keyslots.changePassphrase(to: TestKeys.passphrase("from a"), kdf: .minimum)
        #expect { try b.keyslots.changePassphrase(to: TestKeys.passphrase("from b"), kdf: .minimum) } throws: {
            ($0 as? VaultError)?.code == .busy
        }
        #expect { try b.keyslots.add(.keyfile(TestKeys.keyfileSecret(5))) } throws: {
            ($0 as? VaultError)?.code == .busy
        }
        #expect { try b.keyslots.remove(1) } throws: { ($0 as? VaultError)?.code == .busy }
        _ = try Vault.open(at: dir.location, key: TestKeys.passphrase("from a"))
        #expect { try Vault.open(at: dir.location, key: TestKeys.passphrase("from b")) } throws: {
            ($0 as? VaultError)?.code == .wrongKey
        }
        // The winner goes on from what it left.
        try a.keyslots.addKeyfile(TestKeys.keyfileSecret(6))
        #expect(try a.keyslots.list().count == 2)
    }

    @Test("save, load, replace and remove by name")
    func saveLoadRemove() throws {
        let vault = try makeVault()
        let g = TestKeys.grant()
        try vault.save(g, as: "work")
        #expect(try vault.load("work") == g)
        var g2 = g
        g2.accessToken = "ya29.second"
        try vault.save(g2, as: "work")
        #expect(try vault.load("work").accessToken == "ya29.second")
        #expect(
            throws: VaultError(.alreadyExists, "grant 'work' already exists", remedy: .replaceExisting)
        ) {
            try vault.save(g, as: "work", mode: .insertOnly)
        }
        try vault.remove("work")
        #expect { try vault.load("work") } throws: { ($0 as? VaultError)?.code == .notFound }
        #expect { try vault.remove("work") } throws: { ($0 as? VaultError)?.code == .notFound }
        #expect(try vault.list().grants.isEmpty)
    }

    @Test("a re-added grant keeps its record and raises its version")
    func readdKeepsIdentity() throws {
        let vault = try makeVault()
        #expect(try vault.save(TestKeys.grant(), as: "work") == 1)
        try vault.remove("work")
        #expect(try vault.save(TestKeys.grant(), as: "work") == 3)
        #expect(try vault.allRows().count == 1)
    }

    @Test("rename moves a grant and refuses a taken name")
    func rename() throws {
        let vault = try makeVault()
        try vault.save(TestKeys.grant(token: "a"), as: "one")
        try vault.save(TestKeys.grant(token: "b"), as: "two")
        #expect { try vault.rename("one", to: "two") } throws: { ($0 as? VaultError)?.code == .alreadyExists }
        try vault.rename("one", to: "three")
        #expect(try vault.load("three").accessToken == "a")
        #expect { try vault.load("one") } throws: { ($0 as? VaultError)?.code == .notFound }
        #expect(try vault.list().grants.map(\.name) == ["three", "two"])
    }

    @Test(
        "names are the app's keys: empty, control characters and over 512 bytes are refused",
        arguments: ["", "a\u{1b}[2Jb", "line\nbreak", "nul\u{0}", "c1\u{85}", String(repeating: "a", count: 513)])
    func invalidNames(name: String) throws {
        let vault = try makeVault()
        #expect { try vault.save(TestKeys.grant(), as: name) } throws: { ($0 as? VaultError)?.code == .invalidInput }
    }

    @Test(
        "any other name is stored and found again, whatever the command line allows",
        arguments: [
            "-x", ".hidden", "ada@example.com/gmail", "with space", "naïve", String(repeating: "a", count: 512),
        ])
    func libraryNames(name: String) throws {
        let vault = try makeVault()
        try vault.save(TestKeys.grant(), as: name)
        #expect(try vault.load(name).accessToken == "ya29.sample")
        #expect(throws: VaultError.self) { try GrantName.validateForCommandLine(name) }
    }

    @Test("canAuthorize follows GTMAppAuth: usable access token or refresh token, and not dead")
    func canAuthorize() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let vault = try Vault.create(
            at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum, time: FixedTime(now))
        var g = TestKeys.grant(now: now)
        try vault.save(g, as: "fresh")
        g.refreshToken = nil
        g.expiresAt = now.addingTimeInterval(-1)
        try vault.save(g, as: "expired")
        g.refreshToken = "r"
        g.dead = true
        try vault.save(g, as: "dead")
        #expect(try vault.canAuthorize("fresh"))
        #expect(try !vault.canAuthorize("expired"))
        #expect(try !vault.canAuthorize("dead"))
    }

    @Test("a new passphrase replaces the old one and leaves grants alone")
    func changePassphrase() throws {
        let vault = try makeVault(TestKeys.passphrase("old passphrase"))
        try vault.save(TestKeys.grant(), as: "work")
        let before = try vault.allRows().map(\.ciphertext)
        try vault.keyslots.changePassphrase(to: TestKeys.passphrase("new passphrase"), kdf: .minimum)
        #expect(try vault.allRows().map(\.ciphertext) == before)
        #expect { try Vault.open(at: dir.location, key: TestKeys.passphrase("old passphrase")) } throws: {
            ($0 as? VaultError)?.code == .wrongKey
        }
        let reopened = try Vault.open(at: dir.location, key: TestKeys.passphrase("new passphrase"))
        #expect(try reopened.load("work") == TestKeys.grant(now: try reopened.load("work").createdAt))
    }

    @Test("NFC and NFD spellings of a passphrase open the same vault")
    func unicodeNormalization() throws {
        _ = try makeVault(TestKeys.passphrase("caf\u{E9}"))
        _ = try Vault.open(at: dir.location, key: TestKeys.passphrase("cafe\u{301}"))
    }

    @Test("wrong keys name what failed")
    func wrongKeys() throws {
        let vault = try makeVault(TestKeys.passphrase("right"))
        #expect { try Vault.open(at: dir.location, key: TestKeys.passphrase("wrong")) } throws: {
            ($0 as? VaultError) == VaultError(.wrongKey, "wrong passphrase")
        }
        #expect { try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret())) } throws: {
            ($0 as? VaultError)?.reason == "this vault has no key file slot; it opens with a passphrase"
        }
        try vault.keyslots.addKeyfile(TestKeys.keyfileSecret())
        _ = try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()))
        #expect { try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret(1))) } throws: {
            ($0 as? VaultError)?.reason == "the key file does not open this vault"
        }
    }

    @Test("an existing vault is never replaced by create")
    func createRefusesExisting() throws {
        let vault = try makeVault()
        try vault.save(TestKeys.grant(), as: "work")
        #expect { try makeVault() } throws: { ($0 as? VaultError)?.code == .alreadyExists }
        #expect(
            try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret())).load("work").provider == "google")
    }

    @Test("files are private whatever the umask")
    func permissions() throws {
        let old = umask(0)
        defer { umask(old) }
        let vault = try makeVault()
        try vault.save(TestKeys.grant(), as: "work")
        var st = stat()
        stat(dir.location.directory, &st)
        #expect(st.st_mode & 0o777 == 0o700)
        for suffix in ["", "-wal", "-shm"] {
            guard stat(dir.location.databasePath + suffix, &st) == 0 else { continue }
            #expect(st.st_mode & 0o777 == 0o600, "vault.db\(suffix)")
        }
    }

    @Test("a group- or world-writable vault directory is refused")
    func insecureDirectory() throws {
        _ = try makeVault()
        chmod(dir.location.directory, 0o777)
        #expect { try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret())) } throws: {
            ($0 as? VaultError)?.code == .insecurePath
        }
    }

    @Test("a missing vault is reported as such")
    func noVault() throws {
        #expect { try Vault.open(at: dir.location, key: .keyfile(TestKeys.keyfileSecret())) } throws: {
            ($0 as? VaultError)?.code == .noVault
        }
    }
}

@Suite("grants and token JSON")
struct GrantTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(
        "state at a given time",
        arguments: [
            (3600.0, true, false, GrantState.fresh),
            (61, false, false, .fresh),
            (60, true, false, .refreshable),
            (30, false, false, .expired),
            (-5, true, false, .refreshable),
            (3600, true, true, .dead),
        ])
    func state(expiresIn: Double, refresh: Bool, dead: Bool, expected: GrantState) {
        var g = TestKeys.grant(now: now)
        g.expiresAt = now.addingTimeInterval(expiresIn)
        if !refresh { g.refreshToken = nil }
        g.dead = dead
        #expect(g.state(at: now) == expected)
    }

    @Test("a token response without expiry is fresh (GitHub)")
    func noExpiry() throws {
        let json = #"{"access_token":"gho_1","token_type":"bearer","scope":"repo,gist","provider":"github"}"#
        let g = try TokenResponse(json: SecureBytes(copying: Array(json.utf8))).importedGrant(now: now)
        #expect(g.state(at: now) == .fresh)
        #expect(g.scopes == ["repo", "gist"])
    }

    @Test("expires_in as a string, scope as a list, account from the ID token")
    func lenientFields() throws {
        let payload = String(
            decoding: Base64.encode(Array(#"{"sub":"42","email":"ada@example.com"}"#.utf8), .urlSafeUnpadded),
            as: UTF8.self)
        let json = """
            {"access_token":"a","refresh_token":"r","expires_in":"3599","scope":["openid","email"],
             "id_token":"e30.\(payload).sig","provider":"test","unknown_field":{"x":1}}
            """
        let g = try TokenResponse(json: SecureBytes(copying: Array(json.utf8))).importedGrant(now: now)
        #expect(g.expiresAt == now.addingTimeInterval(3599))
        #expect(g.scopes == ["openid", "email"])
        #expect(g.account == "ada@example.com")
    }

    @Test(
        "bad token JSON is refused with a clear reason",
        arguments: [
            (#"[]"#, "the token JSON is not a JSON object"),
            (#"{"access_token":"a"}"#, "the token JSON has no 'provider'"),
            (#"{"provider":"p"}"#, "the token JSON has neither 'access_token' nor 'refresh_token'"),
            (#"{"provider":"p","access_token":5}"#, "the token JSON has a wrong type for 'access_token'"),
            (#"{"provider":"p","access_token":"a","expires_in":"soon"}"#, "'expires_in' is not a number"),
            (#"{"provider":"p","access_token":"a","expires_in":-1}"#, "'expires_in' is out of range"),
            (#"{"provider":"p","access_token":"a""#, "the token JSON is not a JSON object"),
        ])
    func badJSON(json: String, reason: String) throws {
        let input = try SecureBytes(copying: Array(json.utf8))
        do throws(VaultError) {
            _ = try TokenResponse(json: input).importedGrant(now: now)
            Issue.record("accepted \(json)")
        } catch {
            #expect(error.reason == reason)
            #expect(error.code == .invalidInput)
        }
    }

    @Test("key files parse strictly")
    func keyfileParsing() throws {
        let secret = try TestKeys.keyfileSecret()
        let text = try Keyfile.encode(secret)
        #expect(try Keyfile.decode(text).constantTimeEquals(secret))
        for bad in [
            "", "vault-keyfile-v1:", "vault-keyfile-v2:" + String(repeating: "A", count: 43),
            "vault-keyfile-v1:" + String(repeating: "A", count: 42) + "B\n\n",
        ] {
            #expect(throws: VaultError.self) { try Keyfile.decode(SecureBytes(copying: Array(bad.utf8))) }
        }
    }
}

@Suite("where the vault lives")
struct LocationTests {
    @Test("VAULT_HOME, then XDG_DATA_HOME, then HOME; configuration beside XDG_CONFIG_HOME or HOME")
    func resolution() throws {
        let a = try VaultLocation.resolve(environment: ["HOME": "/h"])
        #expect(a.directory == "/h/.local/share/vault" && a.configDirectory == "/h/.config/vault")
        let b = try VaultLocation.resolve(environment: ["HOME": "/h", "XDG_DATA_HOME": "/d", "XDG_CONFIG_HOME": "/c"])
        #expect(b.directory == "/d/vault" && b.configDirectory == "/c/vault")
        let c = try VaultLocation.resolve(environment: ["HOME": "/h", "VAULT_HOME": "/v", "XDG_DATA_HOME": "/d"])
        #expect(c.directory == "/v" && c.databasePath == "/v/vault.db")
        let d = try VaultLocation.resolve(environment: ["VAULT_HOME": "/v", "XDG_CONFIG_HOME": "/c"])
        #expect(d.directory == "/v" && d.configDirectory == "/c/vault")
        #expect(throws: VaultError.self) { try VaultLocation.resolve(environment: ["VAULT_HOME": "/v"]) }
        #expect(throws: VaultError.self) { try VaultLocation.resolve(environment: [:]) }
        #expect(throws: VaultError.self) { try VaultLocation.resolve(environment: ["HOME": "relative"]) }
        // Empty variables count as unset, as the XDG specification says.
        #expect(
            try VaultLocation.resolve(environment: ["HOME": "/h", "XDG_DATA_HOME": ""]).directory
                == "/h/.local/share/vault")
    }
}
