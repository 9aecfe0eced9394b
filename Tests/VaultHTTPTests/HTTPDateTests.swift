import Testing
import VaultHTTP

@Suite("HTTP dates, as stores send them")
struct HTTPDateTests {
    @Test(
        "the three forms RFC 9110 asks recipients to accept",
        arguments: ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"])
    func forms(_ text: String) {
        #expect(HTTPDate.seconds(text) == 784_111_777)
    }

    @Test(
        "anything else is no date",
        arguments: [
            "", "yesterday", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
        ])
    func refused(_ text: String) {
        #expect(HTTPDate.seconds(text) == nil)
    }
}
