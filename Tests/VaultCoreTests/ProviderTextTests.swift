import Testing

@testable import VaultCore

/// RFC 6749 Appendix A's characters for what providers send, and free text
/// made safe for a terminal.
@Suite("provider text: RFC 6749 characters and terminal-safe descriptions")
struct ProviderTextTests {
    @Test(
        "token, error code and token type characters (RFC 6749 appendix A)",
        arguments: [
            ("ya29.a0AfH6SM-_~+/=", true, true, false),
            ("with space", true, true, false),
            ("Bearer", true, true, true),
            ("N_A-1.0", true, true, true),
            ("", false, false, false),
            ("a\r\nX-Injected: 1", false, false, false),
            ("a\u{1b}[2J", false, false, false),
            ("t\u{f6}ken", false, false, false),
            ("a\u{7f}", false, false, false),
            ("say \"hi\"", true, false, false),
            ("back\\slash", true, false, false),
        ])
    func syntax(_ s: String, token: Bool, errorCode: Bool, tokenType: Bool) {
        #expect(ProviderText.isToken(s) == token)
        #expect(ProviderText.isErrorCode(s) == errorCode)
        #expect(ProviderText.isTokenType(s) == tokenType)
    }

    @Test(
        "free text loses C0, DEL, C1, line separators and bidirectional controls, and is cut short",
        arguments: [
            ("plain words", "plain words"),
            ("a\u{1b}[31mred", "a[31mred"),
            ("csi\u{9b}31m", "csi31m"),
            ("\u{202e}evil\u{202c}", "evil"),
            ("\u{2066}iso\u{2069} \u{200f}mark\u{061c}", "iso mark"),
            ("two\nlines\u{2028}", "twolines"),
            ("caf\u{e9} \u{1f600}", "caf\u{e9} \u{1f600}"),
        ])
    func sanitized(_ raw: String, _ shown: String) {
        #expect(ProviderText.sanitized(raw) == shown)
        #expect(ProviderText.sanitized(String(repeating: "x", count: 500)).count == 300)
    }
}
