import Foundation
import Testing
import VaultTestSupport

/// `list` and `show` say when each grant's refresh token dies, by which
/// rule, and when it was last refreshed and used on this machine.
@Suite("grant lifetimes in list and show")
struct GrantLifetimeTests {
    static func json(_ r: ProcessResult) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(r.stdout.utf8))
    }

    @Test("Microsoft's 90 days unused: the preset's rule, its source, the last refresh and the last use")
    func microsoftInactivity() throws {
        let scene = try ProviderScene("microsoft")
        let added = try scene.add()
        #expect(added.status == 0, "\(added.stderr)")
        var shown = try #require(try scene.shown())
        #expect(shown["refresh_token_deadline_rule"] as? String == "inactivity")
        #expect(shown["refresh_token_deadline_renewable"] as? Bool == true)
        #expect(
            shown["refresh_token_policy_source"] as? String
                == "https://learn.microsoft.com/en-us/entra/identity-platform/refresh-tokens")
        let created = try #require(shown["created_at"] as? Double)
        let dies = try #require(shown["refresh_token_deadline_at"] as? Double)
        #expect(dies == created + 90 * 86400)
        #expect(shown["last_used_at"] == nil)
        // A token handed out is a use on this machine; a refresh moves the deadline.
        #expect(try scene.home.run("token", "work").status == 0)
        #expect(try scene.home.run("refresh", "work").status == 0)
        shown = try #require(try scene.shown())
        let refreshed = try #require(shown["refreshed_at"] as? Double)
        #expect(try #require(shown["refresh_token_deadline_at"] as? Double) == refreshed + 90 * 86400)
        #expect(shown["last_used_at"] is Double)
        let text = try scene.home.run("show", "work")
        #expect(text.stdout.contains("refresh until:") && text.stdout.contains("after 90d unused"))
        #expect(text.stdout.contains("(on this machine)"))
        let list = try scene.home.run("list")
        #expect(list.stdout.contains("REFRESH EXPIRES") && list.stdout.contains("after 90d unused"), "\(list.stdout)")
        // Refreshed and used a moment ago: never "in 0s".
        #expect(!list.stdout.contains("in 0s"), "\(list.stdout)")
        #expect(list.stdout.contains("REFRESHED") && list.stdout.contains("USED"))
        let listed = try #require(try Self.json(try scene.home.run("list", "--json")) as? [[String: Any]])
        #expect(listed.first?["refresh_token_deadline_rule"] as? String == "inactivity")
        #expect(listed.first?["last_used_at"] is Double)
    }

    @Test("a Google app in testing: a provider file's 7-day lifetime runs from the authorization")
    func googleTestingLifetime() throws {
        let scene = try ProviderScene(
            "google", providerFields: ["refresh_token_policy": ["lifetime": "7d", "inactivity": "180d"]])
        #expect(try scene.add().status == 0)
        var shown = try #require(try scene.shown())
        let created = try #require(shown["created_at"] as? Double)
        #expect(shown["refresh_token_deadline_rule"] as? String == "lifetime")
        #expect(shown["refresh_token_deadline_renewable"] as? Bool == false)
        #expect(try #require(shown["refresh_token_deadline_at"] as? Double) == created + 7 * 86400)
        // Refreshing does not move a lifetime.
        #expect(try scene.home.run("refresh", "work").status == 0)
        shown = try #require(try scene.shown())
        #expect(try #require(shown["refresh_token_deadline_at"] as? Double) == created + 7 * 86400)
        // Within the notify lead (7 days by default): doctor fails it with
        // the date and the remedy, and keepalive says it cannot save it.
        let end = Date(timeIntervalSince1970: created + 7 * 86400)
        let date = ISO8601DateFormatter().string(from: end)
        let doctor = try scene.home.run("doctor", "work")
        #expect(doctor.status == 1, "\(doctor.stdout)\(doctor.stderr)")
        #expect(
            doctor.stdout.contains(
                "FAIL work: lifetime: the refresh token dies at \(date) (in "),
            "\(doctor.stdout)")
        #expect(doctor.stdout.contains("d), 7d after authorization, and no refresh moves that"), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("what to do: run 'vault add work' before \(date) to authorize it again"))
        let sent = try scene.log("token").count
        let kept = try scene.home.run("keepalive")
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(
            kept.stderr.contains(
                "vault: warning: 'work' cannot be kept alive: its refresh token dies at \(date) (in "),
            "\(kept.stderr)")
        #expect(try scene.log("token").count == sent, "keepalive sent nothing")
        // Outside a shorter lead: ok, and keepalive is quiet about it.
        scene.home.extra["VAULT_NOTIFY_LEAD"] = "3d"
        let later = try scene.home.run("doctor", "work", "--json")
        #expect(later.stdout.contains("\"check\" : \"lifetime\""), "\(later.stdout)")
        #expect(!later.stdout.contains("no refresh moves that: the grant then needs"), "\(later.stdout)")
        #expect(!(try scene.home.run("keepalive").stderr.contains("cannot be kept alive")))
    }

    @Test("the provider's refresh_token_expires_in wins (a GitHub App)")
    func githubSays() throws {
        let scene = try ProviderScene("github", settings: ["github_app": true])
        #expect(try scene.add().status == 0)
        let shown = try #require(try scene.shown())
        #expect(shown["refresh_token_deadline_rule"] as? String == "refresh_token_expires_in")
        let created = try #require(shown["created_at"] as? Double)
        #expect(try #require(shown["refresh_token_deadline_at"] as? Double) == created + 15_897_600)
        // A listing reads less of each grant than `show`, but the same rule.
        let listed = try #require(try Self.json(try scene.home.run("list", "--json")) as? [[String: Any]])
        #expect(listed.first?["refresh_token_deadline_rule"] as? String == "refresh_token_expires_in")
        #expect(listed.first?["refresh_token_deadline_at"] as? Double == created + 15_897_600)
        let table = try scene.home.run("list")
        #expect(table.stdout.contains("the provider says so"), "\(table.stdout)")
        // The keep-alive pass reads the same: a refresh moves this deadline
        // (GitHub rotates the refresh token), so the grant is refreshed.
        let kept = try scene.home.run("keepalive", "--within", "200d", "--json")
        #expect(kept.status == 0, "\(kept.stderr)")
        let reports = try #require(try Self.json(kept) as? [[String: Any]])
        #expect(reports.first?["result"] as? String == "refreshed", "\(kept.stdout)")
        #expect(reports.first?["rule"] as? String == "refresh_token_expires_in")
    }

    @Test("a provider that documents nothing: no deadline, said as unknown")
    func unknown() throws {
        let home = Home()
        try home.initKeyfileVault()
        #expect(try home.run("import", "work", stdin: Home.tokenJSON("abc", provider: "plain")).status == 0)
        let shown = try #require(try Self.json(try home.run("show", "work", "--json")) as? [String: Any])
        #expect(shown["refresh_token_deadline_at"] == nil && shown["refresh_token_deadline_rule"] == nil)
        #expect(try home.run("show", "work").stdout.contains("unknown (the provider documents no limit"))
        #expect(!(try home.run("list").stdout.contains("REFRESH EXPIRES")))
    }
}
