import Foundation
import Testing

@testable import VaultAgent
@testable import VaultCore

/// What a notify command receives: vault's own words in the reason, the
/// provider's text apart, and a line safe for a notification's markup.
@Suite("notify command variables")
struct NoticeVariablesTests {
    static func notice(account: String?, reason: String, detail: String) -> GrantNotice {
        var grant = Grant(provider: "acme", accessToken: "t", createdAt: Date(epochSeconds: 1_800_000_000))
        grant.account = account
        return GrantNotice(
            event: .expiring, name: "work", record: [UInt8](repeating: 1, count: 16), grant: grant, reason: reason,
            detail: detail, deadline: Date(epochSeconds: 1_800_086_400))
    }

    @Test("an error code stands as a reason only when it is one")
    func errorCodes() {
        #expect(GrantNotice.errorCode("invalid_grant") == "invalid_grant")
        #expect(GrantNotice.errorCode("AADSTS700082.expired-token") != nil)
        for hostile in ["<b>invalid_grant</b>", "invalid grant", "", String(repeating: "a", count: 65), "é", "a\nb"] {
            #expect(GrantNotice.errorCode(hostile) == nil, "\(hostile)")
        }
    }

    @Test("markup and control characters from outside are escaped in the markup line, kept as they are elsewhere")
    func markupLine() throws {
        let link = #"<a href="https://evil.example/">x</a> & 'y'"#
        let v = GrantNotifier.variables(Self.notice(account: "<i>ada</i>", reason: "lifetime", detail: link + "\nz"))
        #expect(v["VAULT_NOTIFY_DETAIL"] == link + "\nz")
        #expect(v["VAULT_NOTIFY_ACCOUNT"] == "<i>ada</i>")
        let line = try #require(v["VAULT_NOTIFY_MARKUP"])
        #expect(!line.contains("<") && !line.contains(">") && !line.contains("\"") && !line.contains("'"))
        #expect(!line.contains("\n"))
        #expect(line.hasPrefix("work expiring: &lt;i&gt;ada&lt;/i&gt;: lifetime (&lt;a href=&quot;"), "\(line)")
        #expect(line.contains("&amp; &#39;y&#39;") && line.hasSuffix("; refresh token until 2027-01-16T08:00:00Z"))
        // No account: the provider stands for it.
        let bare = GrantNotifier.variables(Self.notice(account: nil, reason: "lifetime", detail: ""))
        #expect(bare["VAULT_NOTIFY_MARKUP"]?.hasPrefix("work expiring: acme: lifetime; refresh") == true)
    }
}
