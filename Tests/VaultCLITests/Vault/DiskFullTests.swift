import Foundation
import Glibc
import Testing
import VaultTestSupport

/// A vault on a small tmpfs that the test fills: every write that fails is
/// reported as a full disk with its path, and a refresh spends no refresh
/// token it could not store.
@Suite(
    "a full disk",
    .enabled(if: SmallDisk.mountable, "needs permission to mount a tmpfs (root, or a user namespace)"))
struct DiskFullTests {
    @Test("a full disk is named with the path, and a refresh spends nothing it cannot store")
    func fullDisk() throws {
        let disk = try SmallDisk()
        let home = Home()
        home.extra["VAULT_HOME"] = disk.path + "/vault"
        home.extra["VAULT_AGENT"] = "off"
        try home.initKeyfileVault()
        let provider = try CountedProvider()
        try provider.importGrant("g", into: home)
        let vaultFile = disk.path + "/vault/vault.db"

        disk.fill()
        let token = try home.run("token", "g")
        #expect(token.status == 1, "\(token.stderr)")
        #expect(token.stderr.contains("the disk is full: cannot write \(vaultFile)"), "\(token.stderr)")
        #expect(try provider.refreshes() == 0, "no refresh token is spent while the vault cannot store the next")

        let imported = try home.run("import", "other", stdin: Home.tokenJSON("o"))
        #expect(imported.status == 1, "\(imported.stderr)")
        #expect(imported.stderr.contains("the disk is full: cannot write \(vaultFile)"), "\(imported.stderr)")
        let key = try home.run("keyslot", "add", "--new-keyfile", disk.path + "/second.key")
        #expect(key.status == 1, "\(key.stderr)")
        #expect(key.stderr.contains("the disk is full: cannot write \(disk.path)"), "\(key.stderr)")
        // A key file written to the full disk for a vault elsewhere.
        let fresh = Home()
        fresh.extra["VAULT_AGENT"] = "off"
        let keyfile = disk.path + "/fresh.key"
        let made = try fresh.run("init", "--keyfile", keyfile)
        #expect(made.status == 1, "\(made.stderr)")
        #expect(made.stderr.contains("the disk is full: cannot write \(keyfile)"), "\(made.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fresh.vaultFile))

        disk.empty()
        let refreshed = try home.run("token", "g")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        #expect(try provider.refreshes() == 1)
    }
}

/// A 1 MiB tmpfs mounted for one test, unmounted when it ends.
final class SmallDisk {
    let dir = TemporaryDirectory()
    var path: String { dir.path + "/disk" }

    /// True when this process may mount a tmpfs.
    static let mountable: Bool = {
        guard getuid() == 0 else { return false }
        guard let disk = try? SmallDisk() else { return false }
        _ = disk
        return true
    }()

    init() throws {
        mkdir(path, 0o700)
        guard SmallDisk.run("/bin/mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", path) == 0 else {
            throw CocoaError(.fileWriteNoPermission)
        }
    }

    deinit { _ = SmallDisk.run("/bin/umount", "-l", path) }

    /// Takes every free byte.
    func fill() {
        _ = SmallDisk.run("/bin/dd", "if=/dev/zero", "of=\(path)/fill", "bs=1k")
    }

    /// Gives the space back.
    func empty() { unlink(path + "/fill") }

    @discardableResult
    static func run(_ executable: String, _ arguments: String...) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }
}
