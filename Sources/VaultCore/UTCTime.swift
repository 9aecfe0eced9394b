package import FoundationEssentials

extension Date {
    /// `2026-12-02T14:05:00Z`: ISO 8601 in UTC, to the second. Worked out
    /// here rather than through a formatter, which would bring the whole
    /// of Foundation onto the hot path.
    package var utcText: String {
        let seconds = epochSeconds
        var days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secs = seconds - days * 86400
        // Civil date from days since 1970-01-01 (proleptic Gregorian).
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let doe = days - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        guard (1000...9999).contains(year) else {
            func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
            return "\(year)-\(two(month))-\(two(day))T\(two(secs / 3600)):\(two(secs % 3600 / 60)):\(two(secs % 60))Z"
        }
        // Twenty ASCII bytes written in place: a listing shows thousands.
        return String(unsafeUninitializedCapacity: 20) { out in
            func put(_ v: Int64, at i: Int, digits: Int) {
                var v = v
                for k in stride(from: i + digits - 1, through: i, by: -1) {
                    out[k] = UInt8(truncatingIfNeeded: 0x30 + v % 10)
                    v /= 10
                }
            }
            put(year, at: 0, digits: 4)
            put(month, at: 5, digits: 2)
            put(day, at: 8, digits: 2)
            put(secs / 3600, at: 11, digits: 2)
            put(secs % 3600 / 60, at: 14, digits: 2)
            put(secs % 60, at: 17, digits: 2)
            (out[4], out[7], out[10]) = (UInt8(ascii: "-"), UInt8(ascii: "-"), UInt8(ascii: "T"))
            (out[13], out[16], out[19]) = (UInt8(ascii: ":"), UInt8(ascii: ":"), UInt8(ascii: "Z"))
            return 20
        }
    }
}
