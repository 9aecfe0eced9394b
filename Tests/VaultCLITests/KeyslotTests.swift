import Foundation
import Glibc
import Testing
import VaultTestSupport

@Suite("keyslots: key files and the Secret Service")
struct KeyslotTests {
    @Test("a key-file slot opens the vault with no terminal; the last slot cannot be removed")
    func keyfileSlots() throws {
        let home = Home()
        home.extra["VAULT_AGENT"] = "off"
        try home.initPassphraseVault("first passphrase")
        try home.run("import", "g", stdin: Home.tokenJSON("t"))
        let key = home.path + "/ci.key"
        let added = try home.run("keyslot", "add", "--new-keyfile", key)
        #expect(added.status == 0 && added.stderr.contains("added keyslot 2"), "\(added.stderr)")
        #expect(try home.run("keyslot", "add", "--new-keyfile", key).status != 0, "an existing key file is kept")
        var st = stat()
        #expect(stat(key, &st) == 0 && st.st_mode & 0o777 == 0o600)

        // The key file alone, no passphrase source and no terminal.
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        home.extra["VAULT_KEYFILE"] = key
        #expect(try home.run("token", "g").stdout == "t\n")
        let listed = try home.run("keyslot", "list", "--json")
        let slots = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]]
        #expect(slots?.compactMap { $0["kind"] as? String } == ["passphrase", "key file"])

        // Without the passphrase slot, the passphrase opens nothing.
        #expect(try home.run("keyslot", "remove", "1").status == 0)
        var withPassphrase = home.environment
        withPassphrase["VAULT_KEYFILE"] = nil
        withPassphrase["VAULT_PASSPHRASE_FILE"] = home.path + "/passphrase"
        let refused = try VaultProcess.run(["list"], environment: withPassphrase)
        #expect(refused.status == 77 && refused.stderr.contains("this vault has no passphrase"), "\(refused.stderr)")
        let last = try home.run("keyslot", "remove", "2")
        #expect(last.status == 1 && last.stderr.contains("is the last one"), "\(last.stderr)")
        #expect(try home.run("token", "g").stdout == "t\n")
        // A passphrase can be added back.
        home.write(home.path + "/second", "second passphrase\n")
        home.extra["VAULT_NEW_PASSPHRASE_FILE"] = home.path + "/second"
        #expect(try home.run("keyslot", "add", "--passphrase", "--kdf-memory", "64", "--kdf-passes", "2").status == 0)
        withPassphrase["VAULT_PASSPHRASE_FILE"] = home.path + "/second"
        #expect(try VaultProcess.run(["token", "g"], environment: withPassphrase).stdout == "t\n")
        let twice = try home.run("keyslot", "add", "--passphrase", "--kdf-memory", "64", "--kdf-passes", "2")
        #expect(twice.status == 1 && twice.stderr.contains("already has a passphrase"), "\(twice.stderr)")
    }

    @Test("a Secret Service slot opens the vault without a prompt inside a keyring session, and only there")
    func secretService() throws {
        let home = Home()
        try home.initKeyfileVault()
        try home.run("import", "g", stdin: Home.tokenJSON("from-keyring"))
        home.write(home.path + "/session.sh", Self.session)
        var env = home.environment
        env["VAULT"] = VaultProcess.binary
        env["KEYFILE"] = home.path + "/key"
        env["VAULT_KEYFILE"] = nil
        let r = try VaultProcess.start(
            ["--", "/bin/bash", home.path + "/session.sh"], environment: env, executable: "/usr/bin/dbus-run-session"
        ).wait(timeout: 60)
        let out = r.stdout.split(separator: "\n").map(String.init)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(out.contains("added: 0"), "\(r.stdout) \(r.stderr)")
        #expect(out.contains("token: from-keyring"), "\(r.stdout)")
        #expect(out.contains("stored in keyring: yes"), "\(r.stdout)")
        #expect(out.contains("after remove: 77"), "\(r.stdout)")
        #expect(out.contains("in keyring after remove: no"), "\(r.stdout)")

        // Outside the session there is no Secret Service: the slot is skipped.
        var outside = home.environment
        outside["VAULT_KEYFILE"] = nil
        outside["DBUS_SESSION_BUS_ADDRESS"] = nil
        let locked = try VaultProcess.run(["token", "g"], environment: outside)
        #expect(locked.status == 77 && locked.stderr.contains("no terminal"), "\(locked.stderr)")
        #expect(try home.run("token", "g").stdout == "from-keyring\n")
    }

    /// Runs inside `dbus-run-session`: a private keyring, unlocked, then vault.
    static let session = #"""
        set -u
        printf 'keyring password' | gnome-keyring-daemon --unlock --components=secrets >/dev/null
        "$VAULT" keyslot add --secret-service --keyfile "$KEYFILE" 2>/dev/null
        echo "added: $?"
        # No key file and no passphrase from here: the keyring alone.
        echo "token: $("$VAULT" token g 2>&1)"
        stored=$(secret-tool search --all xdg:schema vault.Keyslot 2>/dev/null | grep -c '^secret')
        [ "$stored" = 1 ] && echo "stored in keyring: yes"
        slot=$("$VAULT" keyslot list --keyfile "$KEYFILE" | awk '$2 == "Secret" { print $1 }')
        "$VAULT" keyslot remove "$slot" --keyfile "$KEYFILE" 2>/dev/null
        "$VAULT" token g >/dev/null 2>&1
        echo "after remove: $?"
        count=$(secret-tool search --all xdg:schema vault.Keyslot 2>/dev/null | grep -c '^secret')
        [ "$count" = 0 ] && echo "in keyring after remove: no"
        exit 0
        """#
}
