import Foundation
import Testing

@testable import VaultCLI

/// The times `list` and `show` put beside a date: a time just past, as a
/// refresh a moment ago is (kept in whole seconds, so up to a second
/// before the clock), never reads as one to come.
@Suite("relative times")
struct RelativeTimeTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000.6)

    @Test(
        "past reads ago, future reads in, under half a second either side reads now",
        arguments: [
            (-0.999, "1s ago"), (-0.6, "1s ago"), (-0.4, "now"), (0, "now"), (0.4, "now"), (0.6, "in 1s"),
            (-59, "59s ago"), (59, "in 59s"), (-3600, "1h ago"), (3 * 86400 + 5, "in 3d"), (-90, "1m ago"),
        ] as [(Double, String)])
    func relative(offset: Double, expected: String) {
        #expect(Format.relative(Self.now.addingTimeInterval(offset), now: Self.now) == expected)
    }

    @Test("a time stored in whole seconds just before now reads now or ago, never in")
    func storedJustBefore() {
        for fraction in stride(from: 0.0, to: 1.0, by: 0.05) {
            let now = Date(timeIntervalSince1970: 1_800_000_000 + fraction)
            let stored = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
            let text = Format.relative(stored, now: now)
            #expect(!text.hasPrefix("in "), "\(fraction): \(text)")
        }
    }
}
