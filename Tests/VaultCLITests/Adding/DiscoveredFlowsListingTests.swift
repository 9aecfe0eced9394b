import Foundation
import Testing
import VaultTestSupport

/// `vault providers` lists, for a provider known by its issuer alone, no
/// flow that `vault add` then refuses: dpop_server.py's discovery names
/// no device authorization endpoint, so `--flow device` is refused ("it
/// offers: browser, paste"), and the listing should not offer it.
extension DPoPFixtureTests {
    @Test("providers lists no device flow for an issuer whose discovery has no device endpoint")
    func listedFlowsMatchAdd() throws {
        let list = try home.run("providers", "--json")
        #expect(list.status == 0, "\(list.stderr)")
        let all = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        let flows = try #require(all.first { $0["name"] as? String == "rfcdpop" }?["flows"] as? [String])
        let refused = try home.run("add", "rfcdpop", "tv", "--flow", "device")
        #expect(refused.status != 0, "\(refused.stderr)")
        #expect(!flows.contains("device"), "vault providers lists \(flows); vault add says: \(refused.stderr)")
    }
}
