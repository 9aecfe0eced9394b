import Foundation
import Glibc
import Testing
import VaultTestSupport

/// The Debian package Tools/package builds, named by `VAULT_PACKAGE`
/// (Tools/test builds one and sets it; the release build it needs cannot
/// run inside `swift test`).
enum DebianPackage {
    static var path: String? {
        guard let p = ProcessInfo.processInfo.environment["VAULT_PACKAGE"], !p.isEmpty else { return nil }
        return p
    }

    /// Runs a bash script with `arguments` as $1, $2, ...
    static func bash(
        _ script: String, _ arguments: [String] = [], environment: [String: String] = ["PATH": "/usr/bin:/bin"]
    ) throws -> ProcessResult {
        try VaultProcess.start(
            ["-c", "set -euo pipefail\n" + script, "bash"] + arguments, environment: environment,
            executable: "/bin/bash"
        ).wait()
    }

    /// The value of a field of the package's control file.
    static func field(_ name: String) throws -> String {
        let r = try bash(#"dpkg-deb --field "$1" "$2""#, [try #require(path), name])
        try #require(r.status == 0, "\(r.stderr)")
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The package names of a relation field (`a (>= 1), b | c`), every alternative.
    static func names(_ relations: String) -> Set<String> {
        Set(
            relations.split(whereSeparator: { $0 == "," || $0 == "|" }).compactMap {
                $0.split(separator: " ").first.map(String.init)
            })
    }
}

/// The package unpacked with `dpkg -x` into a fresh folder.
final class UnpackedPackage {
    let dir = TemporaryDirectory()
    var root: String { dir.path + "/root" }
    var binary: String { root + "/usr/bin/vault" }

    init() throws {
        let r = try DebianPackage.bash(#"dpkg -x "$1" "$2""#, [try #require(DebianPackage.path), dir.path + "/root"])
        try #require(r.status == 0, "\(r.stderr)")
    }

    func text(_ path: String) throws -> String {
        try String(contentsOfFile: root + path, encoding: .utf8)
    }

    func gunzip(_ path: String) throws -> String {
        let r = try DebianPackage.bash(#"gzip -dc "$1""#, [root + path])
        try #require(r.status == 0, "\(r.stderr)")
        return r.stdout
    }

    /// A home with a key-file vault made by the packaged binary, holding `work-mail`.
    func homeWithGrant() throws -> (home: String, environment: [String: String]) {
        let home = dir.path + "/home"
        var env = VaultProcess.environment(home: home, extra: ["VAULT_KEYFILE": home + "/key"])
        env["PATH"] = root + "/usr/bin:/usr/bin:/bin"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let made = try VaultProcess.start(["init", "--keyfile", home + "/key"], environment: env, executable: binary)
            .wait()
        try #require(made.status == 0, "\(made.stderr)")
        let imported = try VaultProcess.start(
            ["import", "work-mail"], environment: env, stdin: #"{"access_token":"a","provider":"p"}"#,
            executable: binary
        ).wait()
        try #require(imported.status == 0, "\(imported.stderr)")
        return (home, env)
    }
}

@Suite(
    "the Debian package (Tools/package)",
    .enabled(if: DebianPackage.path != nil, "needs VAULT_PACKAGE, a package from Tools/package (Tools/test sets it)"))
struct PackageTests {
    /// Every path in the package, with its type and permissions.
    static let expected: [String: mode_t] = {
        let directories = [
            "", "/usr", "/usr/bin", "/usr/lib", "/usr/lib/systemd", "/usr/lib/systemd/user", "/usr/share",
            "/usr/share/bash-completion", "/usr/share/bash-completion/completions", "/usr/share/doc",
            "/usr/share/doc/vault", "/usr/share/fish", "/usr/share/fish/vendor_completions.d", "/usr/share/lintian",
            "/usr/share/lintian/overrides", "/usr/share/man", "/usr/share/man/man1", "/usr/share/zsh",
            "/usr/share/zsh/vendor-completions",
        ]
        let files = [
            "/usr/lib/systemd/user/vault-agent.service", "/usr/lib/systemd/user/vault-keepalive.service",
            "/usr/lib/systemd/user/vault-keepalive.timer", "/usr/share/bash-completion/completions/vault",
            "/usr/share/doc/vault/README.md.gz", "/usr/share/doc/vault/changelog.gz", "/usr/share/doc/vault/copyright",
            "/usr/share/fish/vendor_completions.d/vault.fish", "/usr/share/lintian/overrides/vault",
            "/usr/share/man/man1/vault.1.gz", "/usr/share/zsh/vendor-completions/_vault",
        ]
        var modes: [String: mode_t] = ["/usr/bin/vault": S_IFREG | 0o755]
        for d in directories { modes[d] = S_IFDIR | 0o755 }
        for f in files { modes[f] = S_IFREG | 0o644 }
        return modes
    }()

    @Test("holds exactly the expected files, owned by root, with their modes")
    func files() throws {
        let package = try UnpackedPackage()
        var found: [String: mode_t] = [:]
        func walk(_ path: String) {
            var st = stat()
            guard lstat(package.root + path, &st) == 0 else { return }
            found[path] = st.st_mode
            guard st.st_mode & S_IFMT == S_IFDIR else { return }
            for name in (try? FileManager.default.contentsOfDirectory(atPath: package.root + path)) ?? [] {
                walk(path + "/" + name)
            }
        }
        walk("")
        for path in Set(found.keys).union(Self.expected.keys).sorted() {
            #expect(
                found[path] == Self.expected[path],
                "\(path): \(found[path].map { String($0, radix: 8) } ?? "missing"), expected \(Self.expected[path].map { String($0, radix: 8) } ?? "none")"
            )
        }
        let listing = try DebianPackage.bash(#"dpkg-deb --contents "$1""#, [try #require(DebianPackage.path)])
        let lines = listing.stdout.split(separator: "\n")
        #expect(lines.count == Self.expected.count)
        for line in lines { #expect(line.split(separator: " ", omittingEmptySubsequences: true)[1] == "root/root") }
    }

    @Test("its files are what the packaged binary and the repository say")
    func contents() throws {
        let package = try UnpackedPackage()
        func vault(_ args: String...) throws -> String {
            let r = try VaultProcess.start(args, environment: ["PATH": "/usr/bin:/bin"], executable: package.binary)
                .wait()
            try #require(r.status == 0, "\(r.stderr)")
            return r.stdout
        }
        let version = try vault("--version").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version == "vault " + (try DebianPackage.field("Version")))
        #expect(try package.gunzip("/usr/share/man/man1/vault.1.gz") == (try vault("completion", "man")))
        #expect(try package.text("/usr/share/bash-completion/completions/vault") == (try vault("completion", "bash")))
        #expect(try package.text("/usr/share/zsh/vendor-completions/_vault") == (try vault("completion", "zsh")))
        #expect(
            try package.text("/usr/share/fish/vendor_completions.d/vault.fish") == (try vault("completion", "fish")))
        let repository = FixtureServer.root.path
        for unit in ["vault-agent.service", "vault-keepalive.service", "vault-keepalive.timer"] {
            #expect(
                try package.text("/usr/lib/systemd/user/" + unit)
                    == (try String(contentsOfFile: repository + "/contrib/systemd/" + unit, encoding: .utf8)))
        }
        #expect(
            try package.text("/usr/share/doc/vault/copyright")
                == (try String(contentsOfFile: repository + "/contrib/debian/copyright", encoding: .utf8)))
        #expect(
            try package.gunzip("/usr/share/doc/vault/README.md.gz")
                == (try String(contentsOfFile: repository + "/README.md", encoding: .utf8)))
        let changelog = try package.gunzip("/usr/share/doc/vault/changelog.gz")
        #expect(changelog.hasPrefix("vault (\(try DebianPackage.field("Version"))) "), "\(changelog.prefix(80))")
        #expect(
            try package.text("/usr/share/lintian/overrides/vault")
                == (try String(contentsOfFile: repository + "/contrib/debian/lintian-overrides", encoding: .utf8)))
    }

    /// What each library vault opens with dlopen is for, and so which field names its package.
    static let loaded: [String: String] = [
        "libsodium.so.23": "Depends", "libsqlite3.so.0": "Depends", "libcurl.so.4": "Depends",
        "libcrypto.so.3": "Recommends", "libsecret-1.so.0": "Recommends",
    ]

    @Test("every library vault loads or links is provided by a package it depends on or recommends")
    func libraries() throws {
        let package = try UnpackedPackage()
        // The libraries the C shims open, from their sources: a new one
        // fails here until Tools/package (and this table) name its package.
        let sources = try DebianPackage.bash(
            #"grep -ohE 'dlopen\("[^"]+"' "$1"/Sources/C*/*.c | sed -E 's/dlopen\("([^"]+)"/\1/' | sort -u"#,
            [FixtureServer.root.path])
        let opened = sources.stdout.split(separator: "\n").map(String.init)
        #expect(Set(opened) == Set(Self.loaded.keys), "libraries vault opens: \(opened)")
        let linked = try DebianPackage.bash(
            #"objdump -p "$1" | awk '$1 == "NEEDED" { print $2 }'"#, [package.binary])
        try #require(linked.status == 0, "\(linked.stderr)")
        let needed = linked.stdout.split(separator: "\n").map(String.init)
        // The C++ runtime and libgcc_s are linked in (config/link): the
        // loader binds nothing of theirs at every start.
        #expect(
            !needed.isEmpty && !needed.contains { $0.hasPrefix("libstdc++") || $0.hasPrefix("libgcc_s") },
            "the binary links \(needed)")
        let depends = DebianPackage.names(try DebianPackage.field("Depends"))
        let recommends = DebianPackage.names(try DebianPackage.field("Recommends"))
        for soname in opened + needed {
            let owner = try DebianPackage.bash(#"dpkg -S "*/$1" | head -n1 | cut -d: -f1"#, [soname])
            let name = owner.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!name.isEmpty, "no installed package provides \(soname)")
            let field = Self.loaded[soname] ?? "Depends"
            #expect(
                (field == "Depends" ? depends : recommends).contains(name),
                "\(soname) comes from \(name), which \(field) does not name")
        }
    }

    @Test(
        "vault runs in a root that holds only the package and what its Depends pull in",
        .enabled(if: getuid() == 0, "needs root for chroot"))
    func dependsSuffice() throws {
        let package = try UnpackedPackage()
        let chroot = package.dir.path + "/chroot"
        // Every package Depends names, and theirs, first installed
        // alternative: the files dpkg lists for them, copied into an empty
        // root with Debian 12's merged /usr.
        let built = try DebianPackage.bash(
            #"""
            root=$1 deb=$2
            mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib" "$root/usr/lib64" "$root/tmp" "$root/proc"
            for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
            installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
            declare -A seen=()
            queue=()
            relations() { tr ',' '\n' | while IFS= read -r item; do
              IFS='|' read -ra alternatives <<<"$item"
              for alternative in "${alternatives[@]}"; do
                name=$(sed -E 's/\(.*\)//; s/:any//; s/[[:space:]]//g' <<<"$alternative")
                if [ -n "$name" ] && installed "$name"; then echo "$name"; break; fi
              done
            done; }
            mapfile -t queue < <(dpkg-deb --field "$deb" Depends | relations)
            while [ ${#queue[@]} -gt 0 ]; do
              p=${queue[0]}
              queue=("${queue[@]:1}")
              [ -z "${seen[$p]:-}" ] || continue
              seen[$p]=1
              mapfile -t -O ${#queue[@]} queue < <(dpkg-query -W -f='${Depends}, ${Pre-Depends}\n' "$p" | relations)
            done
            for p in "${!seen[@]}"; do dpkg-query -L "$p"; done | while IFS= read -r f; do
              if [ -L "$f" ] || [ ! -d "$f" ]; then printf '%s\n' "${f#/}"; fi
            done | sort -u | tar -C / -cf - --no-recursion --ignore-failed-read -T - 2>/dev/null | tar -C "$root" -xf -
            dpkg -x "$deb" "$root"
            printf '%s\n' "${!seen[@]}" | sort
            """#, [chroot, try #require(DebianPackage.path)])
        try #require(built.status == 0, "\(built.stderr)")
        let copied = Set(built.stdout.split(separator: "\n").map(String.init))
        #expect(copied.isSuperset(of: ["libsodium23", "libsqlite3-0", "libcurl4", "libc6"]), "\(copied.sorted())")

        let env = [
            "PATH": "/usr/bin", "HOME": "/home", "VAULT_HOME": "/home/vault", "VAULT_KEYFILE": "/home/key",
            "XDG_CONFIG_HOME": "/home/config", "LANG": "C.UTF-8",
        ]
        // The Swift runtime reads the arguments from /proc/self/cmdline: the
        // root gets the kernel's /proc, in a mount namespace of its own.
        func vault(_ args: [String], stdin: String? = nil) throws -> ProcessResult {
            try VaultProcess.start(
                [
                    "--mount", "--propagation", "private", "/bin/sh", "-c",
                    #"root=$1; shift; mount --rbind /proc "$root/proc" && exec /usr/sbin/chroot "$root" /usr/bin/vault "$@""#,
                    "sh", chroot,
                ] + args, environment: env, stdin: stdin, executable: "/usr/bin/unshare"
            ).wait()
        }
        let version = try vault(["--version"])
        #expect(version.status == 0 && version.stdout.hasPrefix("vault "), "\(version.stderr)")
        // libsodium and SQLite: a vault made, a grant stored and listed.
        try FileManager.default.createDirectory(atPath: chroot + "/home", withIntermediateDirectories: true)
        let made = try vault(["init", "--keyfile", "/home/key"])
        #expect(made.status == 0, "\(made.stderr)")
        let imported = try vault(["import", "work-mail"], stdin: #"{"access_token":"a","provider":"p"}"#)
        #expect(imported.status == 0, "\(imported.stderr)")
        let listed = try vault(["list"])
        #expect(listed.status == 0 && listed.stdout.contains("work-mail"), "\(listed.stderr)")
        // libcurl and what it links: a request to a loopback port nothing
        // listens on fails as a network failure (75), not as a library
        // that cannot be loaded.
        let port = try closedLoopbackPort()
        let request = try vault(["add", "corp", "--issuer", "http://127.0.0.1:\(port)", "--client-id", "c"])
        #expect(request.status == 75, "\(request.stderr)")
        #expect(!request.stderr.contains("cannot load"), "\(request.stderr)")
    }

    /// A loopback port that was free a moment ago.
    func closedLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(bound == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test("man renders the page without a warning")
    func manPage() throws {
        let package = try UnpackedPackage()
        let r = try DebianPackage.bash(
            #"man --warnings -E UTF-8 -l -Tutf8 -Z "$1" >/dev/null"#, [package.root + "/usr/share/man/man1/vault.1.gz"],
            environment: ["PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "MANWIDTH": "80", "MANROFFSEQ": ""])
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
    }

    @Test(
        "bash-completion loads the packaged completion and it completes a grant name",
        .enabled(
            if: FileManager.default.fileExists(atPath: "/usr/share/bash-completion/bash_completion"),
            "needs bash-completion (Tools/setup)"))
    func bash() throws {
        let package = try UnpackedPackage()
        var (_, env) = try package.homeWithGrant()
        env["XDG_DATA_DIRS"] = package.root + "/usr/share"
        let r = try DebianPackage.bash(
            #"""
            source /usr/share/bash-completion/bash_completion
            __load_completion vault
            complete -p vault
            COMP_WORDS=(vault token wo); COMP_CWORD=2; _vault
            printf '%s\n' "${COMPREPLY[@]}"
            """#, environment: env)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "complete -F _vault vault\nwork-mail\n", "\(r.stdout)")
    }

    @Test(
        "zsh's compinit finds the packaged completion and it completes a grant name",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/zsh"), "needs zsh (Tools/setup)"))
    func zsh() throws {
        let package = try UnpackedPackage()
        let (home, env) = try package.homeWithGrant()
        // compadd is a builtin of completion widgets only: a function of the
        // same name prints what the completion offers instead.
        let r = try VaultProcess.start(
            [
                "-f", "-c",
                #"""
                fpath=("$1" $fpath)
                autoload -Uz compinit && compinit -u -d "$2/zcompdump"
                print -r -- "vault: $_comps[vault]"
                compadd() { print -rl -- "$@" }
                words=(vault token "")
                CURRENT=3
                _vault
                """#, "zsh", package.root + "/usr/share/zsh/vendor-completions", home,
            ], environment: env, executable: "/usr/bin/zsh"
        ).wait()
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "vault: _vault" && lines.contains("work-mail"), "\(r.stdout)")
    }

    @Test(
        "fish autoloads the packaged completion and it completes a grant name",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/fish"), "needs fish (Tools/setup)"))
    func fish() throws {
        let package = try UnpackedPackage()
        var (_, env) = try package.homeWithGrant()
        env["XDG_DATA_DIRS"] = package.root + "/usr/share"
        let r = try VaultProcess.start(
            ["-c", "complete -C 'vault token wo'"], environment: env, executable: "/usr/bin/fish"
        )
        .wait()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "work-mail\n", "\(r.stdout)")
    }

    @Test(
        "systemd-analyze verifies the units where the package puts them",
        .enabled(if: getuid() == 0, "needs root for a private mount namespace"))
    func units() throws {
        let package = try UnpackedPackage()
        // In a mount namespace of its own, the package's files lie over
        // /usr/bin and /usr/share/man, as if installed: verify checks that
        // ExecStart's program exists and that man finds Documentation's page.
        let runtime = package.dir.path + "/runtime"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let r = try DebianPackage.bash(
            #"""
            root=$1
            exec unshare --mount --propagation private bash -c '
              set -euo pipefail
              root=$1
              mount -t overlay overlay -o "lowerdir=$root/usr/bin:/usr/bin" /usr/bin
              mount -t overlay overlay -o "lowerdir=$root/usr/share/man:/usr/share/man" /usr/share/man
              exec systemd-analyze verify --user "$root"/usr/lib/systemd/user/vault-agent.service \
                "$root"/usr/lib/systemd/user/vault-keepalive.service "$root"/usr/lib/systemd/user/vault-keepalive.timer
            ' bash "$root"
            """#, [package.root], environment: ["PATH": "/usr/bin:/usr/sbin:/bin", "XDG_RUNTIME_DIR": runtime])
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
    }

    @Test(
        "lintian finds no error and no warning that the package does not explain",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/lintian"), "needs lintian (Tools/setup)"))
    func lintian() throws {
        let r = try DebianPackage.bash(
            #"lintian --fail-on error,warning "$1""#,
            [try #require(DebianPackage.path)])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(!r.stdout.contains("E: ") && !r.stdout.contains("W: "), "\(r.stdout)")
    }
}
