import Testing

@testable import VaultCore

@Suite("UTF-8 and hexadecimal without the generic standard library paths")
struct UTF8TextTests {
    @Test(
        "well-formed UTF-8 reads as the standard library reads it; anything else is refused",
        arguments: [
            [0x61, 0x62], [], [0xc3, 0xa9], [0xe2, 0x82, 0xac], [0xf0, 0x9f, 0x98, 0x80], [0xef, 0xbf, 0xbd],
            [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0x80], [0xff], [0x61, 0x00],
        ] as [[UInt8]])
    func sameAsStandard(_ bytes: [UInt8]) {
        #expect(String(utf8Validating: bytes) == String(validating: bytes, as: UTF8.self))
    }

    @Test(
        "hexadecimal with leading zeros", arguments: [(0, 0), (0, 16), (255, 0), (0xcbf2_9ce4_8422_2325, 16), (1, 4)])
    func hex(_ value: UInt64, _ width: Int) {
        let standard = String(value, radix: 16)
        #expect(
            String(hex: value, width: width) == String(repeating: "0", count: max(0, width - standard.count)) + standard
        )
    }
}
