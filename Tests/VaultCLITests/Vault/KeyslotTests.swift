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

    @Test("each Secret Service slot has its own keyring item; a slot whose item is gone does not count")
    func secretServiceSlotsApart() throws {
        let home = Home()
        try home.initKeyfileVault()
        try home.run("import", "g", stdin: Home.tokenJSON("from-keyring"))
        let other = Home()
        try other.initKeyfileVault()
        home.write(home.path + "/session.sh", Self.twoSlots)
        var env = home.environment
        env["VAULT"] = VaultProcess.binary
        env["KEYFILE"] = home.path + "/key"
        env["OTHER_HOME"] = other.path + "/vault"
        env["OTHER_KEYFILE"] = other.path + "/key"
        env["VAULT_KEYFILE"] = nil
        env["VAULT_AGENT"] = "off"
        let r = try VaultProcess.start(
            ["--", "/bin/bash", home.path + "/session.sh"], environment: env, executable: "/usr/bin/dbus-run-session"
        ).wait(timeout: 60)
        let out = r.stdout.split(separator: "\n").map(String.init)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        for line in [
            "first: 0", "second: 0", "items: 2", "remove key file: 0", "remove 2: 0", "token: from-keyring",
            "last refused", "token again: from-keyring", "other added: 0", "other cleared",
            "other remove key file: 1", "other opens with its key file",
        ] {
            #expect(out.contains(line), "\(line): \(r.stdout)")
        }
    }

    /// Two Secret Service slots on one vault, removed in turn; then a vault
    /// whose keyring item vanished keeps its key file slot.
    static let twoSlots = #"""
        set -u
        printf 'keyring password' | gnome-keyring-daemon --unlock --components=secrets >/dev/null
        "$VAULT" keyslot add --secret-service --keyfile "$KEYFILE" 2>/dev/null
        echo "first: $?"
        "$VAULT" keyslot add --secret-service --keyfile "$KEYFILE" 2>/dev/null
        echo "second: $?"
        echo "items: $(secret-tool search --all xdg:schema vault.Keyslot 2>/dev/null | grep -c '^secret')"
        "$VAULT" keyslot remove 1 --keyfile "$KEYFILE" 2>/dev/null
        echo "remove key file: $?"
        # From here the keyring alone opens the vault.
        "$VAULT" keyslot remove 2 2>/dev/null
        echo "remove 2: $?"
        echo "token: $("$VAULT" token g 2>&1)"
        "$VAULT" keyslot remove 3 2>&1 | grep -q "is the last one" && echo "last refused"
        echo "token again: $("$VAULT" token g 2>&1)"

        export VAULT_HOME="$OTHER_HOME"
        ids() { secret-tool search --all xdg:schema vault.Keyslot 2>&1 | awk '$1 == "attribute.vault-id" { print $3 }' | sort -u; }
        before=$(ids)
        "$VAULT" keyslot add --secret-service --keyfile "$OTHER_KEYFILE" 2>/dev/null
        echo "other added: $?"
        id=$(comm -13 <(echo "$before") <(ids))
        secret-tool clear vault-id "$id" && echo "other cleared"
        "$VAULT" keyslot remove 1 --keyfile "$OTHER_KEYFILE" 2>/dev/null
        echo "other remove key file: $?"
        "$VAULT" list --keyfile "$OTHER_KEYFILE" >/dev/null 2>&1 && echo "other opens with its key file"
        exit 0
        """#

    @Test("without libsecret installed, vault works the same with its other slots")
    func withoutLibsecret() throws {
        let library = "/usr/lib/x86_64-linux-gnu/libsecret-1.so.0"
        try #require(FileManager.default.fileExists(atPath: library), "libsecret-1-0 is installed by Tools/setup")
        let home = Home()
        try home.initKeyfileVault()
        try home.run("import", "g", stdin: Home.tokenJSON("t"))
        // The vault gets a Secret Service slot in a keyring session first.
        home.write(
            home.path + "/add.sh",
            "printf pw | gnome-keyring-daemon --unlock --components=secrets >/dev/null\n"
                + "exec \"$VAULT\" keyslot add --secret-service\n")
        var session = home.environment
        session["VAULT"] = VaultProcess.binary
        let added = try VaultProcess.start(
            ["--", "/bin/sh", home.path + "/add.sh"], environment: session, executable: "/usr/bin/dbus-run-session"
        ).wait(timeout: 60)
        #expect(added.status == 0, "\(added.stderr)")
        var env = home.environment
        env["VAULT_KEYFILE"] = nil
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(home.path)/no-bus"
        // Without the library, the Secret Service slot is skipped and the
        // key file opens the vault.
        #expect(try hidden("token", "g").status == 77, "no key file: locked, no hang, no crash")
        env["VAULT_KEYFILE"] = home.path + "/key"
        // A private mount namespace where the library is an empty file.
        func hidden(_ args: String...) throws -> ProcessResult {
            let words =
                [
                    "-m", "/bin/sh", "-c", "mount --bind /dev/null \"$0\" && exec \"$@\"", library,
                    VaultProcess.binary,
                ] + args
            return try VaultProcess.start(words, environment: env, executable: "/usr/bin/unshare").wait()
        }
        #expect(try hidden("token", "g").stdout == "t\n")
        let add = try hidden("keyslot", "add", "--secret-service")
        #expect(add.status == 1 && add.stderr.contains("libsecret is not installed"), "\(add.stderr)")
        #expect(try hidden("keyslot", "list").stdout.contains("Secret Service"))
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
