import Foundation
import Testing
import VaultTestSupport

/// `vault import` with a provider file that names only an issuer: the
/// endpoints come from discovery at the real provider (glewlwyd), as for
/// `vault add`, and an issuer that does not answer gets a hint that works.
extension ImportFromToolsTests {
    /// The tokens of a code flow of the confidential client, as token JSON naming `provider`.
    func tokenJSON(provider: String) throws -> String {
        let t = try tokens()
        return try json([
            "access_token": t["access_token"]!, "refresh_token": t["refresh_token"]!, "expires_at": 1_000_000_000,
            "provider": provider,
        ])
    }

    @Test("the endpoints are discovered from the issuer, and the grant refreshes there with the file's client")
    func discovered() throws {
        try home.providerFile(
            "corp", ["issuer": s.issuer, "client_id": s.confidential_client, "client_secret": s.client_secret])
        let r = try home.run("import", "work", stdin: try tokenJSON(provider: "corp"))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("warning"), "\(r.stderr)")
        let g = try shown("work")
        #expect(g["endpoints_source"] as? String == "discovery", "\(g)")
        #expect(g["state"] as? String == "refreshable", "\(g)")
        let refreshed = try home.run("refresh", "work")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        #expect(try home.run("check", "work").status == 0)
    }

    @Test("an issuer that does not answer: the grant is kept, and the hint says to import again once it does")
    func issuerDown() throws {
        // Port 9 (discard) has no listener on the test machines.
        try home.providerFile(
            "corp",
            [
                "issuer": "http://127.0.0.1:9/api/oidc", "client_id": s.confidential_client,
                "client_secret": s.client_secret,
            ])
        let json = try tokenJSON(provider: "corp")
        let r = try home.run("import", "work", stdin: json)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("vault: warning: could not discover provider 'corp': "), "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: warning: 'work' cannot be refreshed: no token endpoint; provider 'corp' names only its "
                    + "issuer, and discovery at http://127.0.0.1:9/api/oidc failed: import it again with --replace "
                    + "once the issuer answers"), "\(r.stderr)")
        #expect(!r.stderr.contains("write "), "no provider file to write: it is there \(r.stderr)")
        // Once the issuer answers (here: the file names the right one), the hint works as printed.
        try home.providerFile(
            "corp", ["issuer": s.issuer, "client_id": s.confidential_client, "client_secret": s.client_secret])
        let again = try home.run("import", "work", "--replace", stdin: json)
        #expect(again.status == 0 && !again.stderr.contains("warning"), "\(again.stderr)")
        let refreshed = try home.run("refresh", "work")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
    }
}

extension AddFlowTests {
    @Test("a grant imported while its issuer did not answer: 'vault add NAME', as refresh's hint says, discovers it")
    func addAfterUndiscoveredImport() throws {
        try providerFile(
            "corp",
            [
                "issuer": s.issuer, "client_id": s.confidential_client, "client_secret": s.client_secret,
                "redirect_uri": s.redirect_uri,
            ])
        let t = try oidc.confidentialTokens()
        let json = String(
            decoding: try JSONSerialization.data(withJSONObject: [
                "access_token": t["access_token"]!, "refresh_token": t["refresh_token"]!, "provider": "corp",
            ]), as: UTF8.self)
        // The issuer cannot be reached while importing: a proxy nobody listens on.
        home.extra["http_proxy"] = "http://127.0.0.1:9"
        let imported = try home.run("import", "work", stdin: json)
        home.extra["http_proxy"] = nil
        #expect(imported.status == 0 && imported.stderr.contains("could not discover"), "\(imported.stderr)")
        let refresh = try home.run("refresh", "work")
        #expect(refresh.status == 1, "\(refresh.stderr)")
        #expect(refresh.stderr.contains("vault: hint: run 'vault add work' to authorize it again"), "\(refresh.stderr)")
        let added = try add(["work"])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(try shown("work")?["endpoints_source"] as? String == "discovery")
        #expect(try home.run("refresh", "work").status == 0)
    }
}
