import Foundation
import Testing
import VaultTestSupport

extension AddFlowTests {
    /// Runs as another user (`nobody`): watches the command lines of the
    /// flow's browser (its path is the second argument; other tests run
    /// flows of their own meanwhile) for the authorization, follows any
    /// loopback address it sees, and delivers a redirect of its own with
    /// whatever state it found, before the person's browser does. Prints
    /// what it saw and what it got.
    static let attacker = #"""
        import json, os, re, sys, time, urllib.error, urllib.parse, urllib.request
        done, marker = sys.argv[1], sys.argv[2]
        seen, fetched, delivered = [], [], []
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *a, **k):
                return None
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)
        def status(url):
            try:
                return opener.open(url, timeout=5).status
            except urllib.error.HTTPError as e:
                return e.code
            except Exception as e:
                return str(e)
        deadline = time.time() + 30
        while time.time() < deadline and not delivered:
            for pid in os.listdir("/proc"):
                try:
                    line = open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode()
                except Exception:
                    continue
                # Only this test's flow: other tests run theirs meanwhile.
                if marker not in line:
                    continue
                for url in re.findall(r"https?://127\.0\.0\.1:\d+/\S*", line):
                    if url in seen:
                        continue
                    seen.append(url)
                    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
                    if "state" in query:
                        target = query["redirect_uri"] + "?" + urllib.parse.urlencode(
                            {"code": "attacker-code", "state": query["state"]})
                        delivered.append([target, status(target)])
                    elif "/start/" in url:
                        fetched.append([url, status(url)])
                        port = url.split(":")[2].split("/")[0]
                        guess = "http://127.0.0.1:%s/callback?code=attacker-code&state=guess" % port
                        delivered.append([guess, status(guess)])
            time.sleep(0.01)
        open(done, "w").close()
        print(json.dumps({"saw_state": any("state=" in u for u in seen), "fetched": fetched, "delivered": delivered}))
        """#

    @Test(
        "another local user can neither read the authorization nor deliver a redirect to it",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && getuid() == 0))
    func attackerAsAnotherUser() throws {
        try localProvider()
        // A world-writable place for the attacker to say it is done; the
        // person's browser waits for it, so the attacker always goes first.
        let shared = TemporaryDirectory()
        chmod(shared.path, 0o1777)
        let done = shared.path + "/attacker-done"
        // The attacker follows the command lines of this test's browser only.
        let browser = home.path + "/slow-browser"
        let attacker = try VaultProcess.start(
            [
                "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", Self.attacker, done,
                browser,
            ],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/setpriv")
        home.write(
            browser,
            """
            #!/bin/sh
            i=0
            while [ ! -e \(done) ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
            exec \(oidc.browser("approve")) "$1"
            """)
        chmod(browser, 0o700)
        let r = try VaultProcess.run(
            ["add", "local", "corp"], environment: home.environment.merging(["BROWSER": browser]) { $1 })
        let report = attacker.wait(timeout: 60)
        #expect(report.status == 0, "\(report.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any])
        #expect(doc["saw_state"] as? Bool == false, "the authorization URL was on a command line")
        for case let attempt as [Any] in (doc["fetched"] as? [Any] ?? []) + (doc["delivered"] as? [Any] ?? []) {
            #expect(attempt.last as? Int == 403, "another user's request was answered: \(attempt)")
        }
        #expect(r.status == 0, "\(r.stderr)")
        let g = try #require(try shown("corp"))
        #expect(g["account"] as? String == s.email)
    }
}
