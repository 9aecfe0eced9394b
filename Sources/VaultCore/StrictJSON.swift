/// A check that a text is JSON as RFC 8259 defines it, for files people
/// write by hand that decide where secrets go (provider files). The JSON
/// decoder takes more than the RFC (a comma after the last member, a
/// number with a leading zero) and keeps the last of two members of one
/// name: a file read that way can mean something other than what its
/// reader reviewed. Checked before decoding, so an error can say where
/// the text goes wrong.
package enum StrictJSON {
    /// Where a text stops being JSON, and why.
    package struct Problem: Error, Equatable, CustomStringConvertible {
        /// The line, from 1.
        package var line: Int
        /// The character on that line, from 1.
        package var column: Int
        /// What is wrong there, in lower case.
        package var reason: String

        /// "line L, column C: reason".
        package var description: String { "line \(line), column \(column): \(reason)" }
    }

    /// Deepest nesting of objects and arrays taken.
    static let maximumDepth = 64

    /// Checks that `bytes` hold one JSON value (a leading UTF-8 byte order
    /// mark is ignored, as RFC 8259 allows), with no duplicate member names.
    package static func check(_ bytes: [UInt8]) throws(Problem) {
        var scanner = Scanner(bytes: bytes)
        if bytes.starts(with: byteOrderMark) { scanner.index = 3 }
        scanner.skipSpace()
        guard !scanner.atEnd else { throw scanner.problem("no JSON value (the text is empty or blank)") }
        try scanner.value(depth: 0)
        scanner.skipSpace()
        guard scanner.atEnd else { throw scanner.problem("more text after the JSON value") }
    }

    /// `bytes` without a leading UTF-8 byte order mark.
    package static func withoutByteOrderMark(_ bytes: [UInt8]) -> [UInt8] {
        bytes.starts(with: byteOrderMark) ? Array(bytes.dropFirst(3)) : bytes
    }

    static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// A position in the text and the grammar from there.
    struct Scanner {
        let bytes: [UInt8]
        var index = 0
        /// The line of `index`, and where that line starts.
        var line = 1
        var lineStart = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index >= bytes.count }
        var peek: UInt8? { atEnd ? nil : bytes[index] }

        /// A place in the text, kept to point back at it.
        struct Mark {
            var index, line, lineStart: Int
        }

        var mark: Mark { Mark(index: index, line: line, lineStart: lineStart) }

        /// A problem at `at` (default: here); columns count characters, not bytes.
        func problem(_ reason: String, at place: Mark? = nil) -> Problem {
            let at = place ?? mark
            let end = min(at.index, bytes.count)
            let column = 1 + bytes[at.lineStart..<end].filter { $0 & 0xC0 != 0x80 }.count
            return Problem(line: at.line, column: column, reason: reason)
        }

        /// Skips the four whitespace characters of RFC 8259, counting lines.
        mutating func skipSpace() {
            while let b = peek, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D {
                index += 1
                if b == 0x0A {
                    line += 1
                    lineStart = index
                }
            }
        }

        mutating func value(depth: Int) throws(Problem) {
            guard let b = peek else { throw problem("the text ends where a value should be") }
            switch b {
            case UInt8(ascii: "{"): try container(depth: depth + 1, object: true)
            case UInt8(ascii: "["): try container(depth: depth + 1, object: false)
            case UInt8(ascii: "\""): _ = try string()
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            default: throw unexpected(where: "where a value should be")
            }
        }

        /// What an unexpected character here is, in words.
        func unexpected(where place: String) -> Problem {
            guard let b = peek else { return problem("the text ends \(place)") }
            switch b {
            case UInt8(ascii: "'"): return problem("a single quote (JSON strings take double quotes)")
            case UInt8(ascii: "/"), UInt8(ascii: "#"): return problem("a comment (JSON has none)")
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "_"):
                return problem("a word without double quotes \(place)")
            case 0x21...0x7E: return problem("unexpected '\(Character(Unicode.Scalar(b)))' \(place)")
            default: return problem("an unexpected character \(place)")
            }
        }

        /// An object or an array, from its opening bracket.
        mutating func container(depth: Int, object: Bool) throws(Problem) {
            guard depth <= StrictJSON.maximumDepth else {
                throw problem("nested deeper than \(StrictJSON.maximumDepth) levels")
            }
            let close = object ? UInt8(ascii: "}") : UInt8(ascii: "]")
            let closeText = object ? "}" : "]"
            index += 1
            skipSpace()
            if peek == close {
                index += 1
                return
            }
            var names = Set<[UInt8]>()
            while true {
                if object { try member(names: &names, depth: depth) } else { try value(depth: depth) }
                skipSpace()
                if peek == close {
                    index += 1
                    return
                }
                guard peek == UInt8(ascii: ",") else {
                    throw unexpected(where: "where ',' or '\(closeText)' should be")
                }
                let comma = mark
                index += 1
                skipSpace()
                if peek == close {
                    throw problem(
                        "a comma after the last \(object ? "member" : "element") (JSON allows none before "
                            + "'\(closeText)')", at: comma)
                }
            }
        }

        /// One member of an object: a name no other member of it has, ':' and a value.
        mutating func member(names: inout Set<[UInt8]>, depth: Int) throws(Problem) {
            guard peek == UInt8(ascii: "\"") else { throw unexpected(where: "where a member's name should be") }
            let at = mark
            let name = try string()
            guard names.insert(name).inserted else {
                let text = String(decoding: name, as: UTF8.self)
                throw problem("a second member named '\(text)' in one object", at: at)
            }
            skipSpace()
            guard peek == UInt8(ascii: ":") else { throw unexpected(where: "where ':' should be") }
            index += 1
            skipSpace()
            try value(depth: depth)
        }

        /// A string from its opening quote; its raw bytes (escapes as written).
        mutating func string() throws(Problem) -> [UInt8] {
            index += 1
            let start = index
            while let b = peek {
                switch b {
                case UInt8(ascii: "\""):
                    index += 1
                    return Array(bytes[start..<(index - 1)])
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let e = peek else { break }
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        index += 1
                        for _ in 0..<4 {
                            guard let h = peek, h.isHexDigit else {
                                throw problem("'\\u' takes four hexadecimal digits")
                            }
                            index += 1
                        }
                    default:
                        var backslash = mark
                        backslash.index -= 1
                        let shown = (0x21...0x7E).contains(e) ? " (\\\(Character(Unicode.Scalar(e))))" : ""
                        throw problem("an escape JSON does not have\(shown)", at: backslash)
                    }
                case 0x00..<0x20:
                    throw problem("a control character in a string (a line break: write \\n)")
                case 0x80...:
                    try utf8Sequence()
                default:
                    index += 1
                }
            }
            throw problem("the text ends inside a string")
        }

        /// One well-formed UTF-8 sequence of two to four bytes (RFC 3629).
        mutating func utf8Sequence() throws(Problem) {
            let lead = bytes[index]
            let (count, low, high): (Int, UInt8, UInt8)
            switch lead {
            case 0xC2...0xDF: (count, low, high) = (1, 0x80, 0xBF)
            case 0xE0: (count, low, high) = (2, 0xA0, 0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: (count, low, high) = (2, 0x80, 0xBF)
            case 0xED: (count, low, high) = (2, 0x80, 0x9F)
            case 0xF0: (count, low, high) = (3, 0x90, 0xBF)
            case 0xF1...0xF3: (count, low, high) = (3, 0x80, 0xBF)
            case 0xF4: (count, low, high) = (3, 0x80, 0x8F)
            default: throw problem("bytes that are not UTF-8")
            }
            for i in 1...count {
                let at = index + i
                guard at < bytes.count else { throw problem("bytes that are not UTF-8") }
                let (lo, hi) = i == 1 ? (low, high) : (0x80, 0xBF)
                guard bytes[at] >= lo && bytes[at] <= hi else { throw problem("bytes that are not UTF-8") }
            }
            index += count + 1
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        mutating func number() throws(Problem) {
            let start = mark
            if peek == UInt8(ascii: "-") { index += 1 }
            guard let first = peek, first.isDigit else { throw problem("a '-' without digits", at: start) }
            index += 1
            if first == UInt8(ascii: "0"), let next = peek, next.isDigit {
                throw problem("a number with a leading zero", at: start)
            }
            skipDigits()
            if peek == UInt8(ascii: ".") {
                index += 1
                guard peek?.isDigit == true else { throw problem("a number needs a digit after '.'") }
                skipDigits()
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                index += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
                guard peek?.isDigit == true else { throw problem("a number needs a digit in its exponent") }
                skipDigits()
            }
            if let b = peek, b.isLetter || b == UInt8(ascii: ".") {
                throw problem("not a JSON number (decimal digits only)", at: start)
            }
        }

        mutating func skipDigits() {
            while peek?.isDigit == true { index += 1 }
        }

        mutating func literal(_ word: String) throws(Problem) {
            let start = index
            for b in word.utf8 {
                guard peek == b else {
                    index = start
                    throw unexpected(where: "where a value should be")
                }
                index += 1
            }
            if let b = peek, b.isLetter || b.isDigit {
                index = start
                throw unexpected(where: "where a value should be")
            }
        }
    }
}

extension UInt8 {
    fileprivate var isDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    fileprivate var isLetter: Bool {
        (self >= UInt8(ascii: "a") && self <= UInt8(ascii: "z"))
            || (self >= UInt8(ascii: "A") && self <= UInt8(ascii: "Z"))
    }
    fileprivate var isHexDigit: Bool {
        isDigit || (self >= UInt8(ascii: "a") && self <= UInt8(ascii: "f"))
            || (self >= UInt8(ascii: "A") && self <= UInt8(ascii: "F"))
    }
}
