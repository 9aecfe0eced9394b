import Foundation
import Testing
import VaultHTTP
import VaultTestSupport

extension AddFlowTests {
    /// A provider file for glewlwyd's issuer at `/api/NAME` with `features` on.
    func featureProvider(_ name: String, _ features: [String], extra: [String: Any] = [:]) throws -> String {
        let issuer = try oidc.featureIssuer(name, features)
        var fields: [String: Any] = ["issuer": issuer, "client_id": s.public_client, "redirect_uri": s.redirect_uri]
        for (k, v) in extra { fields[k] = v }
        try providerFile(name, fields)
        return issuer
    }

    @Test("glewlwyd with iss on: its own iss is accepted; declared, another is refused before any exchange")
    func glewlwydIssuer() throws {
        // glewlwyd's draft does not say in its metadata that it sends iss: the provider file does.
        _ = try featureProvider("issfeat", ["iss"], extra: ["authorization_response_iss_parameter_supported": true])
        let r = try add(["issfeat", "withiss"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try shown("withiss")?["account"] as? String == s.email)
        let bad = try add(["issfeat", "mixup"], browser: "wrong-iss")
        #expect(bad.status == 1, "\(bad.stderr)")
        #expect(bad.stderr.contains("comes from another server ('https://attacker.example'"), "\(bad.stderr)")
        try expectNothingStored("mixup")
    }

    @Test("glewlwyd with pushed authorization requests, taken and required: found by discovery and used")
    func glewlwydPushed() throws {
        for (name, feature) in [("parfeat", "par"), ("parreq", "par-required")] {
            let issuer = try featureProvider(name, [feature])
            let r = try add([name, name + "-grant"])
            #expect(r.status == 0, "\(name): \(r.stderr)")
            // The address shown and opened carries the handle, not the request.
            #expect(r.stderr.contains("\(issuer)/auth?client_id=\(s.public_client)&request_uri="), "\(r.stderr)")
            #expect(!r.stderr.contains("code_challenge") && !r.stderr.contains("redirect_uri="), "\(r.stderr)")
            let g = try #require(try shown(name + "-grant"))
            #expect(g["account"] as? String == s.email)
            let token = try #require(g["access_token"] as? String)
            let info = try CurlTransport().send(
                HTTPRequest(method: "GET", url: issuer + "/userinfo", headers: [("Authorization", "Bearer \(token)")]))
            #expect(info.status == 200, "the access token does not work at its issuer")
        }
    }

    @Test("glewlwyd requiring pushed requests refuses an authorization that was not pushed")
    func glewlwydPushedRequired() throws {
        // A provider file naming its endpoints (not glewlwyd's pushed-request one) sends the request in the address.
        let issuer = try oidc.featureIssuer("parreq", ["par-required"])
        try providerFile(
            "parplain",
            [
                "issuer": issuer, "authorization_endpoint": issuer + "/auth", "token_endpoint": issuer + "/token",
                "client_id": s.public_client, "redirect_uri": s.redirect_uri,
            ])
        let r = try add(["parplain", "--timeout", "5"])
        #expect(r.status != 0, "\(r.stderr)")
        try expectNothingStored("parplain")
    }
}
