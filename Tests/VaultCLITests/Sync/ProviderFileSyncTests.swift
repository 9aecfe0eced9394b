import Foundation
import Testing
import VaultTestSupport

/// Provider files stay on the machine that has them (docs/providers.md):
/// a grant that syncs to another machine refreshes there with the
/// endpoints and client it carries, and that machine says what it does
/// not know without the file.
@Suite("a provider file on one machine only")
struct ProviderFileSyncTests {
    @Test("the other machine's list and doctor say its provider file is missing, with where it goes")
    func missingElsewhere() throws {
        let machines = try DavMachines(count: 2)
        let (a, b) = (machines.homes[0], machines.homes[1])
        try a.providerFile(
            "corp",
            [
                "authorization_endpoint": "http://127.0.0.1:9/authorize", "token_endpoint": "http://127.0.0.1:9/token",
                "client_id": "vault-corp",
                "refresh_token_policy": ["lifetime": "3d"],
            ])
        #expect(try a.run("import", "work", stdin: Home.tokenJSON("t", provider: "corp")).status == 0)
        try machines.connectAll()

        let here = try a.run("list")
        #expect(here.status == 0, "\(here.stderr)")
        #expect(here.stdout.contains("REFRESH EXPIRES"))
        #expect(!here.stderr.contains("no provider file"))

        let there = try b.run("list")
        #expect(there.status == 0, "\(there.stderr)")
        #expect(!there.stdout.contains("REFRESH EXPIRES"), "the lifetime is not known there")
        #expect(
            there.stderr.contains(
                "no provider file for 'corp' on this machine (\(b.path)/config/vault/providers/corp.json)"),
            "\(there.stderr)")
        let doctor = try b.run("doctor", "work")
        #expect(doctor.stdout.contains("WARN work: provider: no provider file for 'corp'"), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("provider files do not sync"))
        #expect(!(try a.run("doctor", "work")).stdout.contains("no provider file"))
    }
}
