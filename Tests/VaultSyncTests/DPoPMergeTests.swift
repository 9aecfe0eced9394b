import Foundation
import Testing
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// A grant bound to a DPoP key, merged with a concurrent version of it:
/// the key goes with the tokens it signs for, and the value reads back.
@Suite("merging a grant bound to a DPoP key")
struct DPoPMergeTests {
    /// Authorized again with an OAuth 1.0a provider on one machine while
    /// the other refreshed the bound grant: whichever tokens win, the
    /// merged value is a record the vault reads back.
    @Test("a bound grant's refresh racing its replacement by an OAuth 1.0a grant merges into a readable record")
    func boundRefreshAgainstOAuth1Replacement() throws {
        var bound = TestKeys.grant(token: "a0", now: Date(epochSeconds: 1_800_000_000))
        bound.refreshToken = "rt1"
        bound.dpopKey = try DPoPKey.generate()
        bound.tokenType = "DPoP"
        let base = Payload(name: "g", grant: nil).edited(name: "g", grant: bound)
        var refreshed = bound
        refreshed.accessToken = "a1"
        refreshed.refreshToken = "rt2"
        let b = base.edited(name: "g", grant: refreshed, as: .refresh)
        var oauth1 = TestKeys.grant(token: "t", now: Date(epochSeconds: 1_800_000_100))
        oauth1.kind = .oauth1
        oauth1.tokenSecret = "s"
        oauth1.refreshToken = nil
        oauth1.dpopKey = nil
        oauth1.tokenType = nil
        let a = base.edited(name: "g", grant: oauth1)
        for aWins in [true, false] {
            let m = GrantMerge(.init(payload: a, deleted: false), .init(payload: b, deleted: false), aWins: aWins)
            let bytes = try m.value.sealedBytes()
            let read = Result { () throws(VaultError) in try Payload(json: bytes, label: "g") }
            guard case .failure(let error) = read else { continue }
            Issue.record("aWins \(aWins): the merged record cannot be read back: \(error.code)")
        }
    }
}
