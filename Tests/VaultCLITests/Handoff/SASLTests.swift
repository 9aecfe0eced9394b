import Foundation
import Glibc
import Testing
import VaultTestSupport

@Suite("SASL responses")
struct SASLTests {
    @Test("an account with ^A or a line break cannot add SASL fields")
    func controlsInAccount() throws {
        for account in [#"victim\u0001auth=Bearer forged\u0001\u0001"#, #"a\r\nb"#, #"a\u0000"#] {
            let home = try hostileHome("")
            try home.run(
                "import", "m", "--replace",
                stdin: #"{"access_token":"tok","expires_in":3600,"provider":"p","account":"\#(account)"}"#)
            for extra in [[], ["--oauthbearer"], ["--base64"]] {
                let r = try VaultProcess.run(["xoauth2", "m"] + extra, environment: home.environment)
                #expect(r.status == 1, "\(account) \(extra)")
                #expect(r.stdout.isEmpty, "\(account) \(extra): \(r.stdout.debugDescription)")
                #expect(r.stderr.contains("contains control characters"), "\(r.stderr)")
            }
        }
    }

    @Test("--host and --port must fit RFC 7628; the authzid is escaped")
    func hostAndPort() throws {
        let home = Home()
        try home.initKeyfileVault()
        try home.run(
            "import", "m", stdin: #"{"access_token":"tok","expires_in":3600,"provider":"p","account":"a,b=c"}"#)
        // Positive control: a well-formed request.
        let ok = try home.run("xoauth2", "m", "--oauthbearer", "--host", "imap.example.com", "--port", "993")
        #expect(ok.status == 0)
        #expect(ok.stdout == "n,a=a=2Cb=3Dc,\u{1}host=imap.example.com\u{1}port=993\u{1}auth=Bearer tok\u{1}\u{1}")
        #expect(try home.run("xoauth2", "m", "--oauthbearer", "--host", "[::1]").status == 0)
        for bad in [
            ["--host", "imap\u{1}auth=Bearer x"], ["--host", "a b"], ["--host", "a,b"], ["--host", ""],
            ["--port", "99999"], ["--port", "0"], ["--port", "993\u{1}"], ["--port", "-1"], ["--port", "x"],
        ] {
            let r = try VaultProcess.run(["xoauth2", "m", "--oauthbearer"] + bad, environment: home.environment)
            #expect(r.status == 64, "\(bad)")
            #expect(r.stdout.isEmpty, "\(bad)")
        }
    }

    @Test("a token that is not a bearer token is not sent")
    func badToken() throws {
        let home = Home()
        try home.initKeyfileVault()
        try home.run(
            "import", "m", stdin: #"{"access_token":"t\u0001x","expires_in":3600,"provider":"p","account":"a"}"#)
        let r = try home.run("xoauth2", "m")
        #expect(r.status == 1 && r.stdout.isEmpty, "\(r.stderr)")
        let h = try home.run("header", "m")
        #expect(h.status == 1 && h.stdout.isEmpty, "\(h.stderr)")
    }
}
