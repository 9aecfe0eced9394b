import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultCore

@Suite("names near a grant name that is not found")
struct NearNameTests {
    static let stored = ["work", "personal", "gh", "github", "mail-old", "mail-new", "Backup"]

    @Test(
        "a typo finds the stored names near it, nearest first; nothing close finds none",
        arguments: [
            ("wrok", ["work"]),  // two letters swapped
            ("wor", ["work"]),  // one missing
            ("workk", ["work"]),  // one added
            ("persnal", ["personal"]),
            ("prsnal", ["personal"]),  // two edits, for a longer name
            ("backup", ["Backup"]),  // case ignored
            ("mail-ol", ["mail-old"]),
            ("mail-nwe", ["mail-new"]),
            ("mail-nld", ["mail-old", "mail-new"]),  // nearest first
            ("gth", ["gh"]),
            ("hg", ["gh"]),
            // Nothing near: no suggestion at all.
            ("g", []),  // one letter is near everything short
            ("zzzz", []),
            ("nosuch", []),
            ("w", []),
            ("rowk", []),  // three edits for four letters
        ])
    func nearest(_ typed: String, _ expected: [String]) {
        #expect(GrantName.nearest(to: typed, among: Self.stored) == expected)
    }

    @Test("the list is short, and the name itself is never suggested")
    func shortList() {
        let many = ["ab1", "ab2", "ab3", "ab4", "ab5"]
        #expect(GrantName.nearest(to: "ab", among: many) == ["ab1", "ab2", "ab3"])
        #expect(GrantName.nearest(to: "work", among: ["work"]).isEmpty)
    }

    @Test("a grant that is not found carries the live names near it; removed grants are not suggested")
    func vaultNotFound() throws {
        let dir = TemporaryDirectory()
        let vault = try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
        for name in ["work", "personal", "gone"] { try vault.save(TestKeys.grant(), as: name) }
        try vault.remove("gone")
        func remedy(_ body: () throws -> Void) -> VaultError.Remedy? {
            do { try body() } catch let error as VaultError {
                #expect(error.code == .notFound && error.reason.hasPrefix("grant '"), "\(error.reason)")
                return error.remedy
            } catch { Issue.record("\(error)") }
            return nil
        }
        #expect(remedy { _ = try vault.load("wrok") } == .nearGrantNames(["work"]))
        #expect(remedy { try vault.remove("personl") } == .nearGrantNames(["personal"]))
        #expect(remedy { try vault.rename("wrk", to: "job") } == .nearGrantNames(["work"]))
        #expect(remedy { _ = try vault.load("gon") } == .listGrants)
        #expect(remedy { _ = try vault.load("zzzz") } == .listGrants)
    }
}
