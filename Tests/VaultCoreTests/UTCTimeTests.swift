import Foundation
import Testing

@testable import VaultCore

/// `utcText` is what every time vault shows is written with; a listing
/// writes thousands, so it is built in place rather than interpolated.
@Suite("times in UTC")
struct UTCTimeTests {
    @Test("the same text as ISO 8601 in UTC, across leap years, centuries and before 1970")
    func matchesISO8601() {
        // From 1600: Foundation's calendar is Julian before 1582, vault's
        // proleptic Gregorian.
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        var seconds: Int64 = -11_676_096_000  // 1600-01-01
        var generator = SystemRandomNumberGenerator()
        while seconds < 253_402_300_800 {  // 10000-01-01
            let date = Date(epochSeconds: seconds)
            #expect(date.utcText == formatter.string(from: date), "\(seconds)")
            seconds += Int64.random(in: 1...40_000_000, using: &generator)
        }
        for text in ["2024-02-29T23:59:59Z", "2000-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "9999-12-31T23:59:59Z"] {
            let date = formatter.date(from: text)!
            #expect(date.utcText == text)
        }
    }

    @Test("years of fewer or more than four digits are written as they are")
    func otherYears() {
        #expect(Date(epochSeconds: -30_610_310_400).utcText == "999-12-31T00:00:00Z")
        #expect(Date(epochSeconds: 253_402_300_800).utcText == "10000-01-01T00:00:00Z")
    }
}
