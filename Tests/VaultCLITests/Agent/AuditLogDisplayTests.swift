import Foundation
import Testing
import VaultTestSupport

/// `vault log` shows what the agent checked before what the other machine
/// claims, so a claim cannot pose as the request a proof was signed for.
@Suite("vault log and what a forwarded peer claims")
struct AuditLogDisplayTests {
    @Test("a claimed program cannot pose as the request a DPoP proof was signed for in vault log")
    func claimCannotPoseAsTheProofsRequest() throws {
        let home = Home()
        try FileManager.default.createDirectory(atPath: home.path + "/vault", withIntermediateDirectories: true)
        // A bearer token handed out (operation 11) to a program that calls
        // itself "curl; proof for GET https://api.example/harmless", and a
        // proof signed for one request for a program claiming another.
        let forged = "curl; proof for GET https://api.example/harmless"
        let lines = [
            #"{"claimed":{"command":"\#(forged)","host":"server","pid":7,"uid":0},"grant":"work","#
                + #""origin":"forwarded","outcome":"allowed","pid":1,"time":1800000000,"uid":1000}"#,
            #"{"claimed":{"command":"\#(forged)","host":"server","pid":7,"uid":0},"grant":"work","#
                + #""origin":"forwarded","outcome":"allowed","pid":1,"request":"DELETE https://api.example/all","#
                + #""time":1800000001,"uid":1000}"#,
        ]
        home.write(home.path + "/vault/audit.log", lines.joined(separator: "\n") + "\n")
        let r = try home.run("log")
        try #require(r.status == 0, "\(r.stderr)")
        let rows = r.stdout.split(separator: "\n").dropFirst().map(String.init)
        try #require(rows.count == 2, "\(r.stdout)")
        // What comes before the claims is what the agent itself knows.
        let checked = rows.map { $0.components(separatedBy: "says:")[0] }
        #expect(!checked[0].contains("proof for"), "\(rows[0])")
        #expect(checked[1].contains("proof for DELETE https://api.example/all"), "\(rows[1])")
        #expect(!checked[1].contains("harmless"), "\(rows[1])")
    }

    @Test("vault log merges tokens handed out and refusals by time, and shows counted refusals as × N")
    func countedRefusals() throws {
        let home = Home()
        try FileManager.default.createDirectory(atPath: home.path + "/vault", withIntermediateDirectories: true)
        let peer = #""origin":"forwarded","pid":1,"uid":1000"#
        home.write(
            home.path + "/vault/audit.log",
            #"{"grant":"work","outcome":"allowed","time":1800000000,\#(peer)}"# + "\n"
                + #"{"grant":"work","outcome":"confirmed","time":1800000300,\#(peer)}"# + "\n")
        home.write(
            home.path + "/vault/audit-refused.log",
            #"{"grant":"work","outcome":"not-asked","reason":"asked again too soon after a refusal","#
                + #""time":1800000100,\#(peer)}"# + "\n"
                + #"{"grant":"work","outcome":"not-asked","reason":"asked again too soon after a refusal","#
                + #""repeated":57,"time":1800000200,\#(peer)}"# + "\n")
        let r = try home.run("log")
        try #require(r.status == 0, "\(r.stderr)")
        let rows = r.stdout.split(separator: "\n").dropFirst().map(String.init)
        try #require(rows.count == 4, "\(r.stdout)")
        #expect(rows[0].contains("allowed") && rows[3].contains("confirmed"), "\(r.stdout)")
        #expect(rows[1].contains("not-asked (asked again too soon after a refusal)") && !rows[1].contains("×"))
        #expect(rows[2].contains("not-asked (asked again too soon after a refusal) × 57"), "\(rows[2])")
        let json = try home.run("log", "--json")
        #expect(json.stdout.contains(#""repeated" : 57"#), "\(json.stdout)")
    }
}
