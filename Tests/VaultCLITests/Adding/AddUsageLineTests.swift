import Testing

@testable import VaultCLI

/// `vault help add` names in its usage line the options of the modern
/// flows that README.md's tour and docs/cli.md use
/// (`vault add corp --issuer URL --register --dpop`), as it names every
/// other option of `add`.
@Suite("vault add's usage line")
struct AddUsageLineTests {
    @Test("add's usage line names --register and --dpop, like its other options")
    func registerAndDPoPInUsage() {
        let add = Commands.named("add")!
        let usage = add.usage
        let missing = add.documentedOptions.map { "--" + $0.name }.filter {
            !["--json", "--keyfile", "--help"].contains($0) && !usage.contains($0)
        }
        #expect(missing.isEmpty, "vault add's usage line leaves out \(missing): \(usage)")
    }
}
