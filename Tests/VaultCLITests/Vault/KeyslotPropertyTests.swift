import Foundation
import Glibc
import Testing
import VaultTestSupport

/// Random sequences of init, passwd, keyslot add/remove (key file,
/// passphrase, Secret Service), sync and join (with a key, or a pairing
/// code): after every step, each way of unlocking the sequence left opens
/// the vault, and vault refuses exactly the removals that would leave none.
/// The seed is printed; `VAULT_PROPERTY_SEED` replays one.
@Suite(
    "keyslot sequences never lock a vault",
    .enabled(
        if: FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-run-session")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/gnome-keyring-daemon"),
        "needs dbus and gnome-keyring"))
final class KeyslotPropertyTests {
    static let sequences = 6
    static let steps = 10

    let dir = TemporaryDirectory()
    let dav: WebDAVStore
    var storeBase: String { dav.directURL }
    let keyring: RunningProcess
    let sleeper: Int32
    let bus: String

    init() throws {
        dav = try WebDAVStore(in: dir.path)
        // A private session bus with an unlocked keyring, kept for the suite.
        let script = dir.path + "/session.sh"
        let out = dir.path + "/bus"
        _ = FileManager.default.createFile(
            atPath: script,
            contents: Data(
                """
                printf 'keyring password' | gnome-keyring-daemon --unlock --components=secrets >/dev/null
                echo "$$ $DBUS_SESSION_BUS_ADDRESS" > "\(out).tmp" && mv "\(out).tmp" "\(out)"
                exec sleep 600

                """.utf8))
        keyring = try VaultProcess.start(
            ["--", "/bin/sh", script], environment: ["PATH": "/usr/bin:/bin", "HOME": dir.path],
            executable: "/usr/bin/dbus-run-session")
        _ = eventually { FileManager.default.fileExists(atPath: out) }
        let words = ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: " ")
        sleeper = words.first.flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0
        bus = words.count > 1 ? words[1].trimmingCharacters(in: .whitespacesAndNewlines) : ""
    }

    /// Ends the session's child: dbus-run-session then stops its bus, and
    /// the keyring daemon leaves with it.
    deinit {
        if sleeper > 0 { kill(sleeper, SIGTERM) }
        _ = keyring.wait(timeout: 30)
    }

    @Test("every step leaves a vault that each remaining slot opens")
    func randomSequences() throws {
        try #require(!bus.isEmpty, "the session bus did not start")
        let seed =
            ProcessInfo.processInfo.environment["VAULT_PROPERTY_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 0...UInt64.max)
        print("keyslot property: seed \(seed) (VAULT_PROPERTY_SEED=\(seed) replays it)")
        var rng = SplitMix(seed)
        var runs = 0
        for sequence in 0..<Self.sequences {
            // Each sequence's vault has a collection of its own in the store.
            let collection = dav.files + "/seq\(sequence)"
            try FileManager.default.createDirectory(
                atPath: collection, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
            chmod(collection, 0o777)
            var machine = SlotMachine(home: Home(), bus: bus, store: storeBase + "seq\(sequence)/", seed: seed)
            var trace = [try machine.initialize(&rng)]
            try machine.check(trace)
            for _ in 0..<Self.steps {
                trace.append(try machine.step(&rng))
                try machine.check(trace)
                runs += 1
            }
        }
        print("keyslot property: \(Self.sequences) sequences, \(runs) steps, each checked with every remaining slot")
    }
}

/// A small deterministic generator (SplitMix64), so a seed replays a run.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One machine's vault and what the sequence believes opens it.
struct SlotMachine {
    let home: Home
    let bus: String
    let store: String
    let seed: UInt64
    var passphrase: String?
    var keyfiles: [Int64: String] = [:]
    var keyringSlots: Set<Int64> = []
    var counter = 0
    var remoteSet = false

    init(home: Home, bus: String, store: String, seed: UInt64) {
        self.home = home
        self.bus = bus
        self.store = store
        self.seed = seed
        home.write(home.path + "/store-password", "store password\n")
    }

    enum Way {
        case passphrase(String)
        case keyfile(String)
        case keyring
    }

    var ways: [Way] {
        (passphrase.map { [Way.passphrase($0)] } ?? []) + keyfiles.keys.sorted().map { .keyfile(keyfiles[$0]!) }
            + (keyringSlots.isEmpty ? [] : [.keyring])
    }

    var slotCount: Int { (passphrase == nil ? 0 : 1) + keyfiles.count + keyringSlots.count }

    static let cheap = ["--kdf-memory", "64", "--kdf-passes", "2"]

    /// The environment that unlocks with `way` alone (the keyring only
    /// when asked for, or for commands that need it).
    func environment(_ way: Way?, keyring: Bool = true) -> [String: String] {
        var env = VaultProcess.environment(home: home.path, extra: ["VAULT_AGENT": "off"])
        if keyring { env["DBUS_SESSION_BUS_ADDRESS"] = bus }
        switch way {
        case .passphrase(let file)?: env["VAULT_PASSPHRASE_FILE"] = file
        case .keyfile(let file)?: env["VAULT_KEYFILE"] = file
        case .keyring?, nil: break
        }
        return env
    }

    mutating func fresh(_ stem: String) -> String {
        counter += 1
        return home.path + "/\(stem)-\(counter)"
    }

    mutating func newPassphrase() -> String {
        let file = fresh("passphrase")
        home.write(file, "passphrase \(counter) of \(seed)\n")
        return file
    }

    func run(_ args: [String], _ env: [String: String]) throws -> ProcessResult {
        try VaultProcess.run(args, environment: env)
    }

    func any<G: RandomNumberGenerator>(_ rng: inout G) -> Way { ways.randomElement(using: &rng)! }

    static func slotNumber(_ stderr: String) -> Int64? {
        guard let range = stderr.range(of: "added keyslot ") else { return nil }
        return Int64(stderr[range.upperBound...].prefix { $0.isNumber })
    }

    mutating func initialize<G: RandomNumberGenerator>(_ rng: inout G) throws -> String {
        if Bool.random(using: &rng) {
            let key = fresh("key")
            let r = try run(["init", "--keyfile", key], environment(nil))
            try #require(r.status == 0, "\(r.stderr)")
            keyfiles[1] = key
            return "init --keyfile"
        }
        let file = newPassphrase()
        let r = try run(["init"] + SlotMachine.cheap, environment(.passphrase(file)))
        try #require(r.status == 0, "\(r.stderr)")
        passphrase = file
        return "init (passphrase)"
    }

    mutating func step<G: RandomNumberGenerator>(_ rng: inout G) throws -> String {
        let way = any(&rng)
        let env = environment(way)
        switch Int.random(in: 0..<8, using: &rng) {
        case 0:
            let file = newPassphrase()
            let r = try run(["passwd", "--new-passphrase-file", file] + SlotMachine.cheap, env)
            #expect(r.status == 0, "passwd: \(r.stderr)")
            if r.status == 0 { passphrase = file }
            return "passwd"
        case 1:
            let key = fresh("key")
            let r = try run(["keyslot", "add", "--new-keyfile", key], env)
            #expect(r.status == 0, "add key file: \(r.stderr)")
            if let n = SlotMachine.slotNumber(r.stderr) { keyfiles[n] = key }
            return "keyslot add --new-keyfile"
        case 2:
            let file = newPassphrase()
            var e = env
            e["VAULT_NEW_PASSPHRASE_FILE"] = file
            let r = try run(["keyslot", "add", "--passphrase"] + SlotMachine.cheap, e)
            #expect((r.status == 0) == (passphrase == nil), "add passphrase: \(r.stderr)")
            if r.status == 0 { passphrase = file }
            return "keyslot add --passphrase"
        case 3:
            let r = try run(["keyslot", "add", "--secret-service"], env)
            #expect(r.status == 0, "add secret service: \(r.stderr)")
            if let n = SlotMachine.slotNumber(r.stderr) { keyringSlots.insert(n) }
            return "keyslot add --secret-service"
        case 4, 5:
            let listed = try run(["keyslot", "list", "--json"], env)
            let slots = try #require(
                try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]],
                "\(listed.stderr)")
            let victim = slots.randomElement(using: &rng)!
            let number = Int64(victim["slot"] as! Int)
            let r = try run(["keyslot", "remove", "\(number)"], env)
            let expected = slotCount > 1
            #expect((r.status == 0) == expected, "remove \(number) of \(slotCount): \(r.stderr)")
            if r.status == 0 {
                switch victim["kind"] as? String {
                case "passphrase": passphrase = nil
                case "key file": keyfiles[number] = nil
                default: keyringSlots.remove(number)
                }
            }
            return "keyslot remove \(number) (\(victim["kind"] ?? "?"))"
        case 6:
            try sync(env)
            return "sync"
        default:
            return try join(&rng, env)
        }
    }

    mutating func sync(_ env: [String: String]) throws {
        if !remoteSet {
            let r = try run(
                ["remote", "set", store, "--user", "vault", "--password-file", home.path + "/store-password"], env)
            try #require(r.status == 0, "remote set: \(r.stderr)")
            remoteSet = true
        }
        let r = try run(["sync"], env)
        #expect(r.status == 0, "sync: \(r.stderr)")
    }

    /// Another machine joins (with a key the sequence left, or a pairing
    /// code) and must open with a key the sequence left.
    mutating func join<G: RandomNumberGenerator>(_ rng: inout G, _ env: [String: String]) throws -> String {
        try sync(env)
        let portable = ways.filter { if case .keyring = $0 { false } else { true } }
        let other = Home()
        other.write(other.path + "/store-password", "store password\n")
        let args = ["join", store, "--user", "vault", "--password-file", other.path + "/store-password"]
        var joinEnv = VaultProcess.environment(home: other.path, extra: ["VAULT_AGENT": "off"])
        let pairing = Bool.random(using: &rng) || portable.isEmpty
        var extra: [String] = []
        if pairing {
            let code = try run(["pair"], env)
            try #require(code.status == 0, "pair: \(code.stderr)")
            other.write(other.path + "/code", code.stdout)
            extra = ["--pairing-code-file", other.path + "/code"]
        } else {
            switch portable.randomElement(using: &rng)! {
            case .passphrase(let f): joinEnv["VAULT_PASSPHRASE_FILE"] = f
            case .keyfile(let f): joinEnv["VAULT_KEYFILE"] = f
            case .keyring: break
            }
        }
        let r = try VaultProcess.run(args + extra, environment: joinEnv)
        guard !portable.isEmpty else {
            // Only keyring slots: their keys stay in this machine's keyring.
            #expect(r.status != 0, "a pairing join with only Secret Service slots is refused")
            #expect(!FileManager.default.fileExists(atPath: other.vaultFile))
            return "join (pairing, refused: keyring-only)"
        }
        #expect(r.status == 0, "join: \(r.stderr)")
        for way in portable {
            var e = VaultProcess.environment(home: other.path, extra: ["VAULT_AGENT": "off"])
            switch way {
            case .passphrase(let f): e["VAULT_PASSPHRASE_FILE"] = f
            case .keyfile(let f): e["VAULT_KEYFILE"] = f
            case .keyring: continue
            }
            let opened = try VaultProcess.run(["list"], environment: e)
            #expect(opened.status == 0, "the joined vault opens: \(opened.stderr)")
        }
        return pairing ? "join (pairing code)" : "join (key)"
    }

    /// Every way the sequence left opens the vault, alone.
    func check(_ trace: [String]) throws {
        #expect(slotCount > 0, "the sequence left no slot: \(trace)")
        for way in ways {
            let keyring: Bool
            if case .keyring = way { keyring = true } else { keyring = false }
            let r = try run(["list"], environment(way, keyring: keyring))
            #expect(r.status == 0, "after \(trace): \(way) does not open the vault: \(r.stderr)")
        }
    }
}
