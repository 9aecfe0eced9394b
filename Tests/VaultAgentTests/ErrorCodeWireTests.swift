import Testing

@testable import VaultAgent
@testable import VaultCore

/// Error codes are open to new ones: a code a newer agent sends is kept as
/// it came, when it has a code's form; anything else is an internal error.
@Suite("error codes on the agent's wire")
struct ErrorCodeWireTests {
    @Test("a code this build does not know is kept; a malformed one becomes internalError")
    func unknownCodes() {
        #expect(VaultError.Code(wire: "vault.not_found") == .notFound)
        let future = VaultError.Code(wire: "vault.some_later_code")
        #expect(future.rawValue == "vault.some_later_code")
        // What an app writes: a switch with a default, which any new code reaches.
        let handled: String
        switch future {
        case .notFound: handled = "not found"
        case .transient: handled = "try again"
        default: handled = "failed, nothing changed"
        }
        #expect(handled == "failed, nothing changed")
        for bad in ["", "vault.", "other.code", "vault.Bad", "vault.a b", String(repeating: "x", count: 80)] {
            #expect(VaultError.Code(wire: bad) == .internalError, "\(bad)")
        }
    }
}
