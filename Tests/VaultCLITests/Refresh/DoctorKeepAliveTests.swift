import Foundation
import Testing
import VaultTestSupport

/// `vault doctor` and a refresh token that dies of inactivity: a warning
/// when nothing keeps it alive, none while an agent that holds the vault
/// does (its keep-alive refreshes it in time, as `vault keepalive` would).
@Suite("vault doctor: inactivity a running agent keeps away")
struct DoctorKeepAliveTests {
    @Test("an inactivity deadline is a warning without an agent, and ok, saying why, with one that holds the vault")
    func agentKeepsItAlive() throws {
        let home = Home()
        try home.initKeyfileVault()
        // Nothing listens at the endpoints: doctor's other checks fail, which
        // says nothing of this one.
        try home.providerFile(
            "idle",
            [
                "authorization_endpoint": "http://127.0.0.1:9/authorize", "token_endpoint": "http://127.0.0.1:9/token",
                "client_id": "c", "refresh_token_policy": ["inactivity": "4m"],
            ])
        let grant = #"{"access_token":"t","refresh_token":"r","expires_in":3600,"provider":"idle"}"#
        #expect(try home.run("import", "work", stdin: grant).status == 0)

        let alone = try DoctorRun(try home.run("doctor", "work", "--json"))
        #expect(alone.status("lifetime", of: "work") == "warn", "\(alone.detail("lifetime", of: "work"))")

        home.allowAgent()
        #expect(try home.start("agent").wait().status == 0)
        defer { _ = try? home.run("lock") }
        let kept = try DoctorRun(try home.run("doctor", "work", "--json"))
        #expect(kept.status("lifetime", of: "work") == "ok", "\(kept.detail("lifetime", of: "work"))")
        let detail = kept.detail("lifetime", of: "work")
        #expect(
            detail.contains("unless the grant is refreshed before then: the agent (pid ")
                && detail.contains("refreshes it in time with its keep-alive while it holds the vault unlocked"),
            "\(detail)")
        #expect(kept.result.stdout.contains("(it locks in "), "\(detail)")
    }
}
