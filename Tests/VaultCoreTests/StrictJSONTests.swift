import Foundation
import Testing

@testable import VaultCore

/// Provider files are JSON as RFC 8259 has it: what the JSON decoder also
/// takes (a trailing comma, a leading zero, a name given twice) is refused
/// with the line and column where the text goes wrong.
@Suite("strict JSON for provider files")
struct StrictJSONTests {
    @Test(
        "RFC 8259 texts pass",
        arguments: [
            #"{}"#, #"[]"#, #"{"a": [1, -2.5e+3, 0, 0.5, 1E9], "b": {"c": null}, "d": true, "e": false}"#,
            "\t{\r\n \"a\" :\"x\\\"y\\\\z\\/\\b\\f\\n\\r\\t\\u00e9\" }\n", #""just a string""#, "\u{FEFF}{}",
            #"{"ä": "ü €𝄞"}"#, "3",
        ])
    func valid(_ text: String) throws {
        try StrictJSON.check(Array(text.utf8))
    }

    @Test(
        "what the decoder would take, or is not JSON at all, is refused where it goes wrong",
        arguments: [
            ("{\"a\": 1,}", 1, 8, "a comma after the last member (JSON allows none before '}')"),
            ("{\n  \"a\": [1,\n    2,\n  ]\n}", 3, 6, "a comma after the last element (JSON allows none before ']')"),
            (#"{"a": 1, "b": 2, "a": 3}"#, 1, 18, "a second member named 'a' in one object"),
            (#"{"a": {"b": 1}, "c": {"b": 2}}"#, -1, -1, ""),
            (#"{"a": 01}"#, 1, 7, "a number with a leading zero"),
            (#"{"a": 1.}"#, 1, 9, "a number needs a digit after '.'"),
            (#"{"a": 0x1F}"#, 1, 7, "not a JSON number (decimal digits only)"),
            (#"{"a": NaN}"#, 1, 7, "a word without double quotes where a value should be"),
            (#"{a: 1}"#, 1, 2, "a word without double quotes where a member's name should be"),
            (#"{'a': 1}"#, 1, 2, "a single quote (JSON strings take double quotes)"),
            ("// note\n{}", 1, 1, "a comment (JSON has none)"),
            ("{\"a\": \"x\ny\"}", 1, 9, "a control character in a string (a line break: write \\n)"),
            (#"{"a": "\x"}"#, 1, 8, "an escape JSON does not have (\\x)"),
            (#"{"a": "\u12"}"#, 1, 12, "'\\u' takes four hexadecimal digits"),
            (#"{"a": 1} {"b": 2}"#, 1, 10, "more text after the JSON value"),
            ("  \n", 2, 1, "no JSON value (the text is empty or blank)"),
            (#"{"a": "é", "#, 1, 12, "the text ends where a member's name should be"),
            (#"{"a" 1}"#, 1, 6, "unexpected '1' where ':' should be"),
        ])
    func invalid(_ text: String, line: Int, column: Int, reason: String) {
        do {
            try StrictJSON.check(Array(text.utf8))
            #expect(line == -1, "\(text) passed")
        } catch {
            #expect(error == StrictJSON.Problem(line: line, column: column, reason: reason), "\(text)")
        }
    }

    @Test("bytes that are not UTF-8, and nesting past the limit, are refused")
    func bytes() {
        for bad: [UInt8] in [
            [0x22, 0xFF, 0x22], [0x22, 0xC0, 0xAF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xE2, 0x82],
        ] {
            #expect(throws: StrictJSON.Problem.self) { try StrictJSON.check(bad) }
        }
        let deep = Array(repeating: UInt8(ascii: "["), count: 65) + Array(repeating: UInt8(ascii: "]"), count: 65)
        #expect(throws: StrictJSON.Problem(line: 1, column: 65, reason: "nested deeper than 64 levels")) {
            try StrictJSON.check(deep)
        }
        let ok = Array(repeating: UInt8(ascii: "["), count: 64) + Array(repeating: UInt8(ascii: "]"), count: 64)
        #expect(throws: Never.self) { try StrictJSON.check(ok) }
    }

    @Test("a provider file is read strictly, and the error names the file, line and column")
    func providerFile() throws {
        let text = "{\n  \"token_endpoint\": \"https://id.example/token\",\n}\n"
        #expect(throws: VaultError.self) { try ProviderFile.parse(Array(text.utf8), source: "/p/corp.json") }
        do {
            _ = try ProviderFile.parse(Array(text.utf8), source: "/p/corp.json")
        } catch {
            #expect(
                error.reason
                    == "/p/corp.json: not JSON (RFC 8259) at line 2, column 47: a comma after the last member (JSON allows none before '}')"
            )
        }
        // The same file without the comma, and with a byte order mark, is read.
        let file = try ProviderFile.parse(
            [0xEF, 0xBB, 0xBF] + Array(text.replacingOccurrences(of: ",\n}", with: "\n}").utf8), source: "/p/corp.json")
        #expect(file.token_endpoint == "https://id.example/token")
    }
}
