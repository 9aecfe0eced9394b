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
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(year)-\(two(month))-\(two(day))T\(two(secs / 3600)):\(two(secs % 3600 / 60)):\(two(secs % 60))Z"
    }
}
