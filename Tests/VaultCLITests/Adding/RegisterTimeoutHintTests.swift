import Foundation
import Testing
import VaultTestSupport

/// When the browser never comes back to `vault add --register`, the hint
/// names only the flows `--register` can run: `--flow device` is a usage
/// error with `--register` (docs/cli.md), so suggesting it sends the
/// person to a second error.
extension DynamicRegistrationTests {
    @Test("add --register whose browser never comes back: the hint offers --flow paste, not --flow device")
    func timeoutHintFitsRegister() throws {
        let issuer = try oidc.registrationIssuer("reg")
        let r = try add(["slowreg", "--issuer", issuer, "--register", "--timeout", "2"], browser: "nothing")
        #expect(r.status == 75, "\(r.stderr)")
        #expect(r.stderr.contains("no answer from the browser"), "\(r.stderr)")
        #expect(!r.stderr.contains("--flow device"), "\(r.stderr)")
        // What the hint offers works with --register: it is not a usage error.
        let offered = try add(["slowreg", "--issuer", issuer, "--register", "--flow", "device"])
        let device = r.stderr.contains("--flow device") && offered.status == 64
        #expect(!device, "the hint offers a flow --register refuses: \(offered.stderr)")
    }
}
