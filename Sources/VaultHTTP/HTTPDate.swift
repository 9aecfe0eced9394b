internal import Glibc

/// HTTP dates (RFC 9110 section 5.6.7): what a server's `Date` field says
/// its clock read when it answered. Sync compares one store date only
/// with another from the same store, never with this machine's clock.
public enum HTTPDate {
    /// Seconds since 1970 of `text` in any of the three forms RFC 9110
    /// asks recipients to accept (IMF-fixdate, RFC 850, asctime); nil for
    /// anything else.
    public static func seconds(_ text: String) -> Int64? {
        let words = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        var day: Int?
        var month: Int?
        var year: Int?
        var time: String?
        switch words.count {
        case 6 where words[0].hasSuffix(",") && words[5] == "GMT":
            // Sun, 06 Nov 1994 08:49:37 GMT
            (day, month, year, time) = (Int(words[1]), months.firstIndex(of: words[2]), Int(words[3]), words[4])
        case 4 where words[0].hasSuffix(",") && words[3] == "GMT":
            // Sunday, 06-Nov-94 08:49:37 GMT
            let parts = words[1].split(separator: "-").map(String.init)
            guard parts.count == 3, let short = Int(parts[2]) else { return nil }
            (day, month, year, time) = (
                Int(parts[0]), months.firstIndex(of: parts[1]), short + (short < 70 ? 2000 : 1900), words[2]
            )
        case 5:
            // Sun Nov  6 08:49:37 1994
            (day, month, year, time) = (Int(words[2]), months.firstIndex(of: words[1]), Int(words[4]), words[3])
        default:
            return nil
        }
        let clock = time?.split(separator: ":").compactMap { Int($0) } ?? []
        guard let day, let month, let year, clock.count == 3, (1...31).contains(day), (1900...9999).contains(year),
            (0...23).contains(clock[0]), (0...59).contains(clock[1]), (0...60).contains(clock[2])
        else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(clock[0])
        parts.tm_min = Int32(clock[1])
        parts.tm_sec = Int32(clock[2])
        return Int64(timegm(&parts))
    }
}
