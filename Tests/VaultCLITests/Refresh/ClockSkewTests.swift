import Foundation
import Glibc
import Testing
import VaultHTTP
import VaultTestSupport

/// Two machines whose wall clocks are ten minutes apart (libfaketime
/// preloaded into the vault binary: one 5 minutes ahead, one 5 minutes
/// behind) refresh one synced grant whose refresh tokens are one-use. The
/// store's lease must hold whichever machine takes it first: one refresh
/// at the provider, and the same token on both.
@Suite(
    "refresh leases between machines whose clocks disagree",
    .enabled(if: FakeTime.installed, "needs libfaketime (Debian's faketime package)"))
final class ClockSkewTests {
    /// Which machine asks for the token first.
    enum First: String, CaseIterable, CustomTestStringConvertible {
        case ahead = "the machine 5 minutes ahead first"
        case behind = "the machine 5 minutes behind first"

        var testDescription: String { rawValue }
    }

    let dir = TemporaryDirectory()
    let store: WebDAVStore
    let provider: CountedProvider
    let ahead = Machine(clock: "+5m")
    let behind = Machine(clock: "-5m")

    init() throws {
        store = try WebDAVStore(in: dir.path, proxied: true)
        provider = try CountedProvider()
        try ahead.home.initKeyfileVault()
        behind.home.extra["VAULT_KEYFILE"] = ahead.home.path + "/key"
    }

    var storeURL: String { store.url }

    /// Requests the store has seen.
    func storeRequests() throws -> Int {
        try store.control("counts")["requests"] as? Int ?? 0
    }

    func state(_ r: ProcessResult) -> String? {
        let doc = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        return doc?["state"] as? String
    }

    @Test(
        "one grant, one-use refresh tokens, clocks 10 minutes apart: one refresh, one token", arguments: First.allCases)
    func oneRefreshAcrossSkew(_ first: First) throws {
        // Positive control: the preload moves the binary's clock. A token
        // with two minutes left is expired 5 minutes ahead, fresh without.
        let soon = Int(Date().timeIntervalSince1970) + 120
        try ahead.home.run("import", "probe", stdin: #"{"access_token":"p","expires_at":\#(soon),"provider":"x"}"#)
        #expect(state(try ahead.run("show", "probe", "--json")) == "expired")
        #expect(state(try ahead.home.run("show", "probe", "--json")) == "fresh")
        try ahead.home.run("remove", "probe")

        // Expired an hour ago, by either clock.
        let imported = try provider.importGrant("work", into: ahead.home, expiresIn: -3600)
        let remote = try ahead.run(
            "remote", "set", storeURL, "--user", "vault", "--password-file", ahead.home.path + "/store-password")
        try #require(remote.status == 0, "\(remote.stderr)")
        try #require(try ahead.run("sync").status == 0)
        let joined = try behind.run(
            "join", storeURL, "--user", "vault", "--password-file", behind.home.path + "/store-password")
        try #require(joined.status == 0, "\(joined.stderr)")

        let (one, two) = first == .ahead ? (ahead, behind) : (behind, ahead)
        let before = try provider.refreshes()
        // The provider holds refresh requests at its door until released,
        // so the first machine is mid-refresh, its lease taken, while the
        // second one decides.
        try provider.control("/__hold")
        let p1 = try one.start("token", "work")
        let reached = try eventually { try provider.refreshes() > before || !p1.isRunning }
        #expect(reached && p1.isRunning, "the first machine's refresh never reached the provider")
        let seen = try storeRequests()
        let p2 = try two.start("token", "work")
        // The second machine either sends a refresh of its own (the lease
        // did not hold) or keeps looking at the lease, a round of store
        // requests a second; then the first machine's request goes on.
        _ = try eventually(within: 15) {
            try provider.refreshes() > before + 1 || (try storeRequests()) >= seen + 8 || !p2.isRunning
        }
        try provider.control("/__release")
        let r1 = p1.wait(timeout: 90)
        let r2 = p2.wait(timeout: 90)

        #expect(r1.status == 0, "first: \(r1.status) \(r1.stderr)")
        #expect(r2.status == 0, "second: \(r2.status) \(r2.stderr)")
        #expect(try provider.refreshes() == before + 1, "the one-use refresh token was spent once")
        // Tokens are compared, never printed.
        let sameToken = r1.stdout == r2.stdout
        let newToken = r1.stdout.count > 100 && r1.stdout != imported + "\n"
        #expect(sameToken, "both machines printed the same token")
        #expect(newToken, "a new access token")
    }
}

/// A test machine whose wall clock is off: every vault command of its home
/// runs with libfaketime preloaded, moving the wall clock by `clock`
/// ("+5m", "-5m"), the monotonic clock untouched (as on a machine without
/// NTP).
///
/// The preload goes through Debian's `faketime` wrapper, which sets it up
/// before starting vault. Preloaded bare, libfaketime adds a variable to
/// the environment as it starts, glibc moves the environment off the stack,
/// and the Swift runtime, which finds argv by walking back from it, then
/// sees no arguments at all.
final class Machine {
    let home = Home()
    let clock: String

    init(clock: String) {
        self.clock = clock
        home.extra["VAULT_AGENT"] = "off"
        home.write(home.path + "/store-password", "store password\n")
    }

    var environment: [String: String] {
        var env = home.environment
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        return env
    }

    func start(_ args: String...) throws -> RunningProcess {
        try VaultProcess.start(
            ["-f", clock, VaultProcess.binary] + args, environment: environment, executable: FakeTime.wrapper)
    }

    @discardableResult
    func run(_ args: String..., stdin: String? = nil) throws -> ProcessResult {
        try VaultProcess.start(
            ["-f", clock, VaultProcess.binary] + args, environment: environment, stdin: stdin,
            executable: FakeTime.wrapper
        ).wait()
    }
}

/// Tokens that arrive from a machine whose clock is off: their expiry is
/// taken into this machine's clock from the lifetime they had and the time
/// that passed by the store's clock (docs/sync.md, "Times from another
/// machine"), so no machine's clock decides another's expiry.
@Suite(
    "expiries that come from machines whose clocks are off",
    .enabled(if: FakeTime.installed, "needs libfaketime (Debian's faketime package)"))
final class ForeignExpiryTests {
    let dir = TemporaryDirectory()
    let store: WebDAVStore
    let here = Machine(clock: "+0")
    let ahead = Machine(clock: "+3m")
    let behind = Machine(clock: "-3m")

    init() throws {
        store = try WebDAVStore(in: dir.path)
        try here.home.initKeyfileVault()
        for m in [ahead, behind] { m.home.extra["VAULT_KEYFILE"] = here.home.path + "/key" }
    }

    func join(_ m: Machine) throws {
        let r = try m.run("join", store.url, "--user", "vault", "--password-file", m.home.path + "/store-password")
        try #require(r.status == 0, "\(r.stderr)")
    }

    /// Imports a token without a refresh token that lives `seconds` more,
    /// its expiry written by the machine's clock (`offset` seconds off).
    func importToken(_ name: String, on m: Machine, offset: Int, living seconds: Int) throws {
        let at = Int(Date().timeIntervalSince1970) + offset + seconds
        let r = try m.run(
            "import", name, stdin: #"{"access_token":"\#(name)-token","expires_at":\#(at),"provider":"x"}"#)
        try #require(r.status == 0, "\(r.stderr)")
    }

    func expiry(_ name: String) throws -> Int {
        let r = try here.home.run("show", name, "--json")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        return try #require(doc["expires_at"] as? Int)
    }

    @Test(
        "a token from a machine ahead is not handed out past its real expiry; one from a machine behind is not cut short"
    )
    func foreignExpiry() throws {
        let remote = try here.home.run(
            "remote", "set", store.url, "--user", "vault", "--password-file", here.home.path + "/store-password")
        try #require(remote.status == 0, "\(remote.stderr)")
        try #require(try here.home.run("sync").status == 0)
        try join(ahead)
        try join(behind)
        let start = Int(Date().timeIntervalSince1970)
        // Real lifetimes: expired already, 30 s (less than the 60 s a token
        // must have), 10 minutes.
        try importToken("gone", on: ahead, offset: 180, living: -10)
        try importToken("short", on: ahead, offset: 180, living: 30)
        try importToken("long", on: ahead, offset: 180, living: 600)
        try importToken("late", on: behind, offset: -180, living: 600)
        for m in [ahead, behind] { try #require(try m.run("sync").status == 0) }
        try #require(try here.home.run("sync").status == 0)
        let end = Int(Date().timeIntervalSince1970)

        // No token is handed out that its provider would take as expired,
        // or with less than a minute left by the real clock.
        for name in ["gone", "short"] {
            let r = try here.home.run("token", name)
            #expect(r.status == 2 && r.stdout.isEmpty, "\(name): \(r.status) \(r.stderr)")
        }
        #expect(try here.home.run("token", "long").stdout == "long-token\n")
        // The expiry here is the real one, less the time the records took
        // (and a margin), never the other machine's clock's idea of it.
        let long = try expiry("long")
        #expect(long <= start + 600 + 1 && long >= end + 600 - 20, "ahead: \(long - start) s from the start")
        let late = try expiry("late")
        #expect(late <= start + 600 + 1 && late >= end + 600 - 20, "behind: \(late - start) s from the start")
    }
}

/// Debian's faketime package: libfaketime and the wrapper that preloads it.
enum FakeTime {
    static let wrapper = "/usr/bin/faketime"

    /// True when both are installed.
    static let installed: Bool =
        FileManager.default.isExecutableFile(atPath: wrapper)
        && ["x86_64-linux-gnu", "aarch64-linux-gnu"].contains {
            FileManager.default.fileExists(atPath: "/usr/lib/\($0)/faketime/libfaketime.so.1")
        }
}
