import FoundationEssentials
internal import Glibc
import VaultCrypto

/// A small strict streaming JSON reader (RFC 8259) for record payloads.
/// Listing ten thousand grants spends its time decoding payloads, and
/// Foundation's decoder costs several times more per record than reading
/// the known fields straight into a `Grant`. Unknown keys are skipped (still
/// checked to be well-formed JSON), as Foundation's decoder skips them.
/// Nesting is limited to 32 levels.
struct JSONReader {
    enum Failure: Error { case malformed }

    static let maxDepth = 32

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    init(_ raw: UnsafeRawBufferPointer) { bytes = raw.bindMemory(to: UInt8.self) }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while let c = current, c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09 { index += 1 }
    }

    private mutating func expect(_ c: UInt8) throws(Failure) {
        skipSpace()
        guard current == c else { throw .malformed }
        index += 1
    }

    /// The end of the text: only white space may follow.
    mutating func finish() throws(Failure) {
        skipSpace()
        guard index == bytes.count else { throw .malformed }
    }

    /// True (and consumed) when the next value is `null`.
    mutating func null() throws(Failure) -> Bool {
        skipSpace()
        guard current == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    /// Starts reading an object; then `nextKey` until it returns nil.
    mutating func beginObject(depth: Int) throws(Failure) {
        guard depth < JSONReader.maxDepth else { throw .malformed }
        try expect(UInt8(ascii: "{"))
        first = true
    }

    /// The next key of the object being read, as raw UTF-8 (valid, escapes
    /// decoded), or nil at its end. The caller reads or skips the value.
    mutating func nextKey() throws(Failure) -> Key? {
        skipSpace()
        if first {
            first = false
            if current == UInt8(ascii: "}") {
                index += 1
                return nil
            }
        } else {
            guard let c = current else { throw .malformed }
            index += 1
            if c == UInt8(ascii: "}") { return nil }
            guard c == UInt8(ascii: ",") else { throw .malformed }
            skipSpace()
        }
        guard current == UInt8(ascii: "\"") else { throw .malformed }
        let key = try rawString()
        try expect(UInt8(ascii: ":"))
        return key
    }

    /// A key or string: its bytes, compared against the names a reader
    /// knows. Without escapes (nearly always) they are the text's own bytes,
    /// copied nowhere; with escapes, decoded into an array of its own.
    struct Key {
        private let text: UnsafeBufferPointer<UInt8>
        private var decoded: [UInt8]?

        init(text: UnsafeBufferPointer<UInt8>) {
            self.text = text
            decoded = nil
        }

        init(decoded: [UInt8]) {
            text = UnsafeBufferPointer(start: nil, count: 0)
            self.decoded = decoded
        }

        func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
            if let decoded { return decoded.withUnsafeBufferPointer(body) }
            return body(text)
        }

        /// The bytes as a string.
        var string: String { withBytes { String(decoding: $0, as: UTF8.self) } }

        /// True when both name the same key: the same bytes, or, beyond
        /// ASCII, the same string (as a dictionary of strings tells keys apart).
        func names(_ other: Key) -> Bool {
            withBytes { a in
                other.withBytes { b in
                    if a.count == b.count && (a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0) {
                        return true
                    }
                    guard a.contains(where: { $0 >= 0x80 }) || b.contains(where: { $0 >= 0x80 }) else { return false }
                    return String(decoding: a, as: UTF8.self) == String(decoding: b, as: UTF8.self)
                }
            }
        }

        func `is`(_ name: [UInt8]) -> Bool {
            withBytes { b in
                b.count == name.count
                    && (b.isEmpty
                        || name.withUnsafeBufferPointer { memcmp(b.baseAddress!, $0.baseAddress!, b.count) == 0 })
            }
        }

        func `is`(_ name: StaticString) -> Bool {
            withBytes { b in
                b.count == name.utf8CodeUnitCount && (b.isEmpty || memcmp(b.baseAddress!, name.utf8Start, b.count) == 0)
            }
        }
    }

    private var first = false

    /// Reads an array, calling `body` for each element.
    mutating func array(depth: Int = 0, _ body: (inout JSONReader) throws(Failure) -> Void) throws(Failure) {
        guard depth < JSONReader.maxDepth else { throw .malformed }
        try expect(UInt8(ascii: "["))
        skipSpace()
        if current == UInt8(ascii: "]") {
            index += 1
            return
        }
        while true {
            try body(&self)
            skipSpace()
            guard let c = current else { throw .malformed }
            index += 1
            if c == UInt8(ascii: "]") { return }
            guard c == UInt8(ascii: ",") else { throw .malformed }
        }
    }

    mutating func string() throws(Failure) -> String {
        skipSpace()
        guard current == UInt8(ascii: "\"") else { throw .malformed }
        return try rawString().string
    }

    mutating func bool() throws(Failure) -> Bool {
        skipSpace()
        if current == UInt8(ascii: "t") {
            try literal("true")
            return true
        }
        try literal("false")
        return false
    }

    /// An integer that fits Int64 (no fraction, no exponent).
    mutating func integer() throws(Failure) -> Int64 {
        skipSpace()
        let start = index
        guard try number(),
            let v = Int64(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
        else { throw .malformed }
        return v
    }

    /// A string's presence only: checked, not kept (a secret that a listing
    /// does not need). Returns false for null.
    mutating func skipString() throws(Failure) -> Bool {
        if try null() { return false }
        skipSpace()
        guard current == UInt8(ascii: "\"") else { throw .malformed }
        try skipRawString()
        return true
    }

    /// A string (not null), checked and not kept.
    mutating func checkString() throws(Failure) {
        guard try skipString() else { throw .malformed }
    }

    /// Checks and skips any value. With `asValue`, by `value(depth:)`'s
    /// rules (`checkValue`): an object with a key given twice is refused,
    /// and a number must be finite.
    mutating func skip(depth: Int = 0, asValue: Bool = false) throws(Failure) {
        guard depth < JSONReader.maxDepth else { throw .malformed }
        skipSpace()
        switch current {
        case UInt8(ascii: "{") where asValue:
            try checkObject(depth: depth) { (r: inout JSONReader, _) throws(Failure) in
                try r.skip(depth: depth + 1, asValue: true)
            }
        case UInt8(ascii: "{"):
            try beginObject(depth: depth)
            while try nextKey() != nil { try skip(depth: depth + 1) }
        case UInt8(ascii: "["):
            try array(depth: depth) { (r: inout JSONReader) throws(Failure) in
                try r.skip(depth: depth + 1, asValue: asValue)
            }
        case UInt8(ascii: "\""):
            try skipRawString()
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            _ = try bool()
        case UInt8(ascii: "n"):
            try literal("null")
        default:
            if asValue { _ = try double() } else { _ = try number() }
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let n = word.utf8CodeUnitCount
        guard bytes.count - index >= n else { throw .malformed }
        for i in 0..<n where bytes[index + i] != word.utf8Start[i] { throw .malformed }
        index += n
    }

    private mutating func digits() -> Int {
        let start = index
        while let c = current, c >= 0x30 && c <= 0x39 { index += 1 }
        return index - start
    }

    /// A finite number, as Foundation's decoder reads it into a Double.
    mutating func double() throws(Failure) -> Double {
        skipSpace()
        let start = index
        _ = try number()
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let v = Double(text), v.isFinite else { throw .malformed }
        return v
    }

    /// Checks any value as `value(depth:)` reads it, keeping nothing.
    mutating func checkValue(depth: Int) throws(Failure) { try skip(depth: depth, asValue: true) }

    /// Checks an object whose values `body` reads or checks, given each
    /// key, refusing a key given twice (keys equal as strings are the same
    /// key, as in a dictionary of strings).
    mutating func checkObject(depth: Int, _ body: (inout JSONReader, Key) throws(Failure) -> Void) throws(Failure) {
        var keys: [Key] = []
        try beginObject(depth: depth)
        while let key = try nextKey() {
            guard !keys.contains(where: { $0.names(key) }) else { throw .malformed }
            keys.append(key)
            try body(&self, key)
        }
    }

    /// Any value, kept (objects with a key given twice are refused).
    mutating func value(depth: Int) throws(Failure) -> JSONValue {
        guard depth < JSONReader.maxDepth else { throw .malformed }
        skipSpace()
        switch current {
        case UInt8(ascii: "{"):
            var object: [String: JSONValue] = [:]
            try beginObject(depth: depth)
            while let key = try nextKey() {
                let name = key.string
                guard object[name] == nil else { throw .malformed }
                object[name] = try value(depth: depth + 1)
            }
            return .object(object)
        case UInt8(ascii: "["):
            var array: [JSONValue] = []
            try self.array(depth: depth) { (r: inout JSONReader) throws(Failure) in
                array.append(try r.value(depth: depth + 1))
            }
            return .array(array)
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            return .bool(try bool())
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        default:
            return .number(try double())
        }
    }

    /// Skips a number; true when it is integral.
    private mutating func number() throws(Failure) -> Bool {
        if current == UInt8(ascii: "-") { index += 1 }
        let intStart = index
        let n = digits()
        guard n > 0, !(n > 1 && bytes[intStart] == 0x30) else { throw .malformed }
        var integral = true
        if current == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw .malformed }
            integral = false
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw .malformed }
            integral = false
        }
        return integral
    }

    /// A string starting at its opening quote: its UTF-8 bytes, checked
    /// to be valid, with escapes decoded. Without escapes the key is the
    /// text's own bytes; with them (Foundation's encoder writes `/` as
    /// `\/`, so every stored address has some) the runs between escapes
    /// are copied whole into one array.
    private mutating func rawString() throws(Failure) -> Key {
        index += 1
        let start = index
        // Fast path: no escapes.
        let wide = scanPlain()
        guard let stop = current else { throw .malformed }
        if stop == UInt8(ascii: "\"") {
            let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
            index += 1
            if wide { try JSONReader.checkUTF8(text) }
            return Key(text: text)
        }
        guard stop == UInt8(ascii: "\\") else { throw .malformed }
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        try escapedRest { (run: UnsafeBufferPointer<UInt8>, scalar: Unicode.Scalar?) in
            out.append(contentsOf: run)
            if let scalar { out.append(contentsOf: UTF8.encode(scalar)!) }
        }
        return try valid(out)
    }

    /// Checks a string starting at its opening quote as `rawString` reads
    /// it, copying nothing: a value a reader skips. One pass: escapes are
    /// checked where they stand, and the raw bytes are valid UTF-8 exactly
    /// when the decoded string is (an escape is ASCII).
    private mutating func skipRawString() throws(Failure) {
        index += 1
        let start = index
        var wide = false
        while true {
            if scanPlain() { wide = true }
            guard let c = current else { throw .malformed }
            index += 1
            if c == UInt8(ascii: "\"") { break }
            // A control character stops a run too, and is refused.
            guard c == UInt8(ascii: "\\") else { throw .malformed }
            _ = try escape()
        }
        if wide { try JSONReader.checkUTF8(UnsafeBufferPointer(rebasing: bytes[start..<index - 1])) }
    }

    /// Moves past the plain bytes of a string (neither a quote, a backslash
    /// nor a control character); true when any of them was not ASCII.
    /// Eight bytes are tested at once: a byte equal to a quote or a
    /// backslash, or below 0x20, sets the high bit of its place in `stops`
    /// (the usual borrow test), and the lowest such place is always a real
    /// stop (a borrow only marks places above one), so it is where the run
    /// ends. The last few bytes of the text are tested one at a time.
    private mutating func scanPlain() -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs = ones &* 0x80
        var seen: UInt64 = 0
        while bytes.count - index >= 8 {
            let word = UInt64(
                littleEndian: UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self))
            let quote = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
            let backslash = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
            let stops =
                ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word)
            let found = stops & highs
            if found != 0 {
                let plain = found.trailingZeroBitCount / 8
                seen |= word & ((1 << (8 * UInt64(plain))) &- 1)
                index += plain
                return seen & highs != 0
            }
            seen |= word
            index += 8
        }
        var last: UInt8 = 0
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 { break }
            last |= c
            index += 1
        }
        return seen & highs != 0 || last >= 0x80
    }

    /// Reads the rest of a string from its first backslash through its
    /// closing quote, handing `body` each run of plain bytes and the
    /// scalar of the escape that ends it (nil for the last run).
    private mutating func escapedRest(
        _ body: (UnsafeBufferPointer<UInt8>, Unicode.Scalar?) throws(Failure) -> Void
    ) throws(Failure) {
        var runStart = index
        while true {
            _ = scanPlain()  // the decoded whole is checked by the caller
            guard let c = current else { throw .malformed }
            let run = UnsafeBufferPointer(rebasing: bytes[runStart..<index])
            index += 1
            if c == UInt8(ascii: "\"") {
                try body(run, nil)
                return
            }
            guard c == UInt8(ascii: "\\") else { throw .malformed }
            try body(run, try escape())
            runStart = index
        }
    }

    /// The scalar of an escape whose backslash was just read.
    private mutating func escape() throws(Failure) -> Unicode.Scalar {
        guard let e = current else { throw .malformed }
        index += 1
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): return Unicode.Scalar(e)
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if scalar >= 0xD800 && scalar < 0xDC00 {
                try literal("\\u")
                let low = try hex4()
                guard low >= 0xDC00 && low < 0xE000 else { throw .malformed }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if scalar >= 0xDC00 && scalar < 0xE000 {
                throw .malformed
            }
            guard let u = Unicode.Scalar(scalar) else { throw .malformed }
            return u
        default:
            throw .malformed
        }
    }

    /// The bytes as a key if they are valid UTF-8.
    private func valid(_ out: [UInt8]) throws(Failure) -> Key {
        try out.withUnsafeBufferPointer { (b) throws(Failure) in try JSONReader.checkUTF8(b) }
        return Key(decoded: out)
    }

    /// Refuses bytes that are not valid UTF-8 (ASCII is checked inline).
    private static func checkUTF8(_ b: UnsafeBufferPointer<UInt8>) throws(Failure) {
        guard b.contains(where: { $0 >= 0x80 }) else { return }
        guard String(validating: b, as: UTF8.self) != nil else { throw .malformed }
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard bytes.count - index >= 4 else { throw .malformed }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw .malformed
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }
}

extension JSONReader {
    /// A string or null.
    mutating func optionalString() throws(Failure) -> String? { try null() ? nil : try string() }
    /// An integer or null.
    mutating func optionalInteger() throws(Failure) -> Int64? { try null() ? nil : try integer() }
}

extension Payload {
    /// Reads a payload: `name` required, `grant` optional (a tombstone has
    /// none); other keys skipped. A known key given twice is refused.
    /// With `secrets` false (a listing), the grant keeps what lists and
    /// deadlines read: its tokens read as empty strings when present, its
    /// provider configuration only whether it names a token endpoint and a
    /// client (empty strings), its token response only
    /// `refresh_token_expires_in`, and the payload no lineage; the rest
    /// is checked and dropped.
    package static func read(_ bytes: UnsafeRawBufferPointer, secrets: Bool = true) -> Payload? {
        var r = JSONReader(bytes)
        var name: String?
        var grant: Grant?
        var grantSeen = false
        var lineage: Lineage?
        var transit: TransitClock?
        var transitSeen = false
        do {
            try r.beginObject(depth: 0)
            while let key = try r.nextKey() {
                if key.is("name") {
                    guard name == nil else { return nil }
                    name = try r.string()
                } else if key.is("lineage") {
                    guard lineage == nil else { return nil }
                    // A listing has no use for what tokens replaced: checked, not kept.
                    lineage = try r.null() ? Lineage() : try Lineage.read(&r, keep: secrets)
                } else if key.is("clock") {
                    guard !transitSeen else { return nil }
                    transitSeen = true
                    transit = try r.null() ? nil : try TransitClock.read(&r)
                } else if key.is("grant") {
                    guard !grantSeen else { return nil }
                    grantSeen = true
                    grant = try r.null() ? nil : try Grant.read(&r, secrets: secrets)
                } else {
                    try r.skip(depth: 1)
                }
            }
            try r.finish()
        } catch {
            return nil
        }
        guard let name else { return nil }
        var payload = Payload(name: name, grant: grant, lineage: lineage ?? Lineage())
        payload.transit = transit
        return payload
    }
}

extension TransitClock {
    /// Reads `clock`: `writer` and `store`, both integers, both required;
    /// other keys skipped.
    static func read(_ r: inout JSONReader) throws(JSONReader.Failure) -> TransitClock {
        var writer: Int64?
        var store: Int64?
        try r.beginObject(depth: 1)
        while let key = try r.nextKey() {
            if key.is("writer") {
                guard writer == nil else { throw .malformed }
                writer = try r.integer()
            } else if key.is("store") {
                guard store == nil else { throw .malformed }
                store = try r.integer()
            } else {
                try r.skip(depth: 2)
            }
        }
        guard let writer, let store else { throw .malformed }
        return TransitClock(writer: writer, store: store)
    }
}

extension Lineage {
    /// Reads `lineage`: arrays of strings and a string, each optional;
    /// other keys skipped, a known key given twice refused.
    static func read(_ r: inout JSONReader, keep: Bool = true) throws(JSONReader.Failure) -> Lineage {
        var l = Lineage()
        var seen: UInt8 = 0
        func strings(_ r: inout JSONReader) throws(JSONReader.Failure) -> [String] {
            var out: [String] = []
            if try r.null() { return out }
            try r.array(depth: 2) { (r: inout JSONReader) throws(JSONReader.Failure) in
                if keep { out.append(try r.string()) } else { try r.checkString() }
            }
            return out
        }
        try r.beginObject(depth: 1)
        while let key = try r.nextKey() {
            let bit: UInt8
            if key.is("spent") {
                bit = 1
                l.spent = try strings(&r)
            } else if key.is("meta") {
                bit = 2
                l.meta = keep ? try r.optionalString() : try r.skipString() ? "" : nil
            } else if key.is("meta_before") {
                bit = 4
                l.metaBefore = try strings(&r)
            } else if key.is("tokens") {
                bit = 8
                l.tokens = keep ? try r.optionalString() : try r.skipString() ? "" : nil
            } else if key.is("tokens_before") {
                bit = 16
                l.tokensBefore = try strings(&r)
            } else if key.is("edited_at") {
                bit = 32
                l.editedAt = try r.optionalInteger()
            } else if key.is("presented") {
                bit = 64
                l.presented = try strings(&r)
            } else {
                try r.skip(depth: 2)
                continue
            }
            guard seen & bit == 0 else { throw .malformed }
            seen |= bit
        }
        return keep ? l : Lineage()
    }
}

extension Grant {
    /// Reads a grant object with the rules of its `Codable` form. Fields
    /// are matched by key through `Grant.storedFields`, the one list of
    /// them; a key given twice is refused, unknown keys are skipped.
    static func read(_ r: inout JSONReader, secrets: Bool) throws(JSONReader.Failure) -> Grant {
        let fields = Grant.storedFields
        var g = Grant(provider: "", createdAt: Date(epochSeconds: 0))
        var seen: UInt32 = 0
        var required: UInt32 = 0
        var bound = false
        try r.beginObject(depth: 1)
        while let key = try r.nextKey() {
            guard let n = fields.firstIndex(where: { key.is($0.bytes) }) else {
                try r.skip(depth: 2)
                continue
            }
            guard seen & (1 << n) == 0 else { throw .malformed }
            seen |= 1 << n
            switch fields[n].value {
            case .text(let path):
                g[path] = try r.string()
                required |= 1 << n
            case .optionalText(let path, let secret):
                if secret && !secrets {
                    g[path] = try r.skipString() ? "" : nil
                } else {
                    g[path] = try r.optionalString()
                }
            case .texts(let path):
                if try !r.null() {
                    var texts: [String] = []
                    try r.array(depth: 2) { (r: inout JSONReader) throws(JSONReader.Failure) in
                        texts.append(try r.string())
                    }
                    g[path] = texts
                }
            case .date(let path):
                g[path] = Date(epochSeconds: try r.integer())
                required |= 1 << n
            case .optionalDate(let path): g[path] = try r.optionalInteger().map(Date.init(epochSeconds:))
            case .flag(let path): g[path] = try r.null() ? false : try r.bool()
            case .optionalFlag(let path): g[path] = try r.null() ? nil : try r.bool()
            case .kind:
                if let raw = try r.optionalString() {
                    bound = raw == Grant.dpopKind
                    guard let kind = bound ? .oauth2 : Kind(rawValue: raw) else { throw .malformed }
                    g.kind = kind
                }
            case .providerConfiguration:
                g.providerConfiguration = try r.null() ? nil : try ProviderConfiguration.read(&r, secrets: secrets)
            case .object(let path):
                guard try !r.null() else { continue }
                if secrets {
                    guard case .object(let o) = try r.value(depth: 2) else { throw .malformed }
                    g[path] = o
                    continue
                }
                // A listing keeps only what a refresh token's deadline
                // reads (`refreshTokenDeadline`); the rest is checked.
                var kept: [String: JSONValue]?
                try r.checkObject(depth: 2) { (r: inout JSONReader, key) throws(JSONReader.Failure) in
                    if key.is("refresh_token_expires_in") {
                        kept = ["refresh_token_expires_in": try r.value(depth: 3)]
                    } else {
                        try r.checkValue(depth: 3)
                    }
                }
                g[path] = kept
            case .dpopKey:
                g.dpopKey = try r.null() ? nil : try DPoPKey.read(&r, secrets: secrets)
            case .derivedTokens:
                guard try !r.null() else { continue }
                // Not needed to list grants: checked, not kept, without secrets.
                try r.array(depth: 2) { (r: inout JSONReader) throws(JSONReader.Failure) in
                    let token = try DerivedToken.read(&r, secrets: secrets)
                    if secrets { g.derivedTokens.append(token) }
                }
            }
        }
        guard required == Grant.requiredFields, bound == (g.dpopKey != nil) else { throw .malformed }
        return g
    }

    /// The mask of fields that must be present (`text` and `date`).
    private static let requiredFields: UInt32 = storedFields.indices.reduce(0) { mask, n in
        switch storedFields[n].value {
        case .text, .date: mask | 1 << n
        default: mask
        }
    }
}

extension DerivedToken {
    /// Reads one cached derived token with the rules of its `Codable`
    /// form: `target`, `access_token` and `issued_at` required, a known
    /// key given twice refused, unknown keys skipped. Without `secrets`
    /// the token is checked and read as "".
    static func read(_ r: inout JSONReader, secrets: Bool = true) throws(JSONReader.Failure) -> DerivedToken {
        var target: TokenTarget?
        var token: String?
        var type: String?
        var expires: Int64?
        var scopes: [String] = []
        var issued: Int64?
        var seen: UInt8 = 0
        func once(_ bit: UInt8) throws(JSONReader.Failure) {
            guard seen & bit == 0 else { throw .malformed }
            seen |= bit
        }
        try r.beginObject(depth: 3)
        while let key = try r.nextKey() {
            if key.is("target") {
                try once(1)
                target = try readTarget(&r)
            } else if key.is("access_token") {
                try once(2)
                if secrets {
                    token = try r.string()
                } else {
                    try r.checkString()
                    token = ""
                }
            } else if key.is("token_type") {
                try once(4)
                type = try r.optionalString()
            } else if key.is("expires_at") {
                try once(8)
                expires = try r.optionalInteger()
            } else if key.is("scopes") {
                try once(16)
                scopes = try strings(&r, depth: 4)
            } else if key.is("issued_at") {
                try once(32)
                issued = try r.integer()
            } else {
                try r.skip(depth: 4)
            }
        }
        guard let target, let token, let issued else { throw .malformed }
        return DerivedToken(
            target: target, accessToken: token, tokenType: type, expiresAt: expires.map(Date.init(epochSeconds:)),
            scopes: scopes, issuedAt: Date(epochSeconds: issued))
    }

    private static func readTarget(_ r: inout JSONReader) throws(JSONReader.Failure) -> TokenTarget {
        var resource: String?
        var audience: String?
        var scopes: [String] = []
        var exchange = false
        var seen: UInt8 = 0
        try r.beginObject(depth: 4)
        while let key = try r.nextKey() {
            let bit: UInt8
            if key.is("resource") {
                bit = 1
                resource = try r.optionalString()
            } else if key.is("audience") {
                bit = 2
                audience = try r.optionalString()
            } else if key.is("scopes") {
                bit = 4
                scopes = try strings(&r, depth: 5)
            } else if key.is("exchange") {
                bit = 8
                exchange = try r.null() ? false : try r.bool()
            } else {
                try r.skip(depth: 5)
                continue
            }
            guard seen & bit == 0 else { throw .malformed }
            seen |= bit
        }
        return TokenTarget(stored: resource, audience, scopes, exchange)
    }

    private static func strings(_ r: inout JSONReader, depth: Int) throws(JSONReader.Failure) -> [String] {
        var out: [String] = []
        if try r.null() { return out }
        try r.array(depth: depth) { (r: inout JSONReader) throws(JSONReader.Failure) in out.append(try r.string()) }
        return out
    }
}

extension ProviderConfiguration {
    /// The string fields, by key; `setString` stores each by its position
    /// here (a switch, not key paths: a key path is built at run time, which
    /// every process reading a grant paid for).
    private static let fields: [StaticString] = [
        "name", "issuer", "authorization_endpoint", "token_endpoint", "device_authorization_endpoint",
        "revocation_endpoint", "userinfo_endpoint", "client_id", "client_secret", "token_endpoint_auth_method",
        "signature_method", "redirect_uri", "account_claim", "client_private_key", "client_key_id", "subject",
        "endpoints_source", "registration_endpoint", "registration_client_uri", "registration_access_token",
    ]

    private mutating func setString(_ n: Int, _ value: String?) {
        switch n {
        case 0: name = value
        case 1: issuer = value
        case 2: authorizationEndpoint = value
        case 3: tokenEndpoint = value
        case 4: deviceAuthorizationEndpoint = value
        case 5: revocationEndpoint = value
        case 6: userinfoEndpoint = value
        case 7: clientID = value
        case 8: clientSecret = value
        case 9: tokenEndpointAuthMethod = value
        case 10: signatureMethod = value
        case 11: redirectURI = value
        case 12: accountClaim = value
        case 13: clientPrivateKey = value
        case 14: clientKeyID = value
        case 15: subject = value
        case 16: endpointsSource = value
        case 17: registrationEndpoint = value
        case 18: registrationClientURI = value
        default: registrationAccessToken = value
        }
    }

    /// Keys that are not strings, read after the string fields above.
    private static let otherFields: [StaticString] = [
        "error_aliases", "errors_with_http_200", "empty_400_is_invalid_grant", "authorization_params", "scopes",
    ]

    /// Reads a provider configuration. Without `secrets` (a listing) it is
    /// checked by the same rules but keeps only what a grant's state reads
    /// (`Grant.hasRefreshRoute`): whether a token endpoint and a client id
    /// are named, each as an empty string, and where the endpoints came
    /// from. Secrets, addresses and the rest
    /// are checked where they stand and never copied out of the plaintext.
    static func read(_ r: inout JSONReader, secrets: Bool) throws(JSONReader.Failure) -> ProviderConfiguration {
        var c = ProviderConfiguration()
        var seen: UInt32 = 0
        try r.beginObject(depth: 2)
        while let key = try r.nextKey() {
            if let n = fields.firstIndex(where: { key.is($0) }) {
                guard seen & (1 << n) == 0 else { throw .malformed }
                seen |= 1 << n
                if secrets || n == 16 {
                    // Where the endpoints came from is no secret: a listing
                    // says whether a provider file is missing (`vault list`).
                    c.setString(n, try r.optionalString())
                } else if try r.skipString(), n == 3 || n == 7 {
                    c.setString(n, "")
                }
                continue
            }
            guard let m = otherFields.firstIndex(where: { key.is($0) }) else {
                try r.skip(depth: 3)
                continue
            }
            let bit: UInt32 = 1 << (fields.count + m)
            guard seen & bit == 0 else { throw .malformed }
            seen |= bit
            guard try !r.null() else { continue }
            switch m {
            case 0:
                if secrets { c.errorAliases = try stringMap(&r) } else { try checkStringMap(&r) }
            case 1:
                let flag = try r.bool()
                if secrets { c.errorsWithHTTP200 = flag }
            case 2:
                let flag = try r.bool()
                if secrets { c.empty400IsInvalidGrant = flag }
            case 3:
                if secrets { c.authorizationParams = try stringMap(&r) } else { try checkStringMap(&r) }
            default:
                if secrets {
                    c.scopes = try stringArray(&r)
                } else {
                    try r.array(depth: 3) { (r: inout JSONReader) throws(JSONReader.Failure) in try r.checkString() }
                }
            }
        }
        return c
    }

    /// An array of strings (`scopes`).
    private static func stringArray(_ r: inout JSONReader) throws(JSONReader.Failure) -> [String] {
        var out: [String] = []
        try r.array(depth: 3) { (r: inout JSONReader) throws(JSONReader.Failure) in out.append(try r.string()) }
        return out
    }

    /// `stringMap`'s object checked, nothing kept.
    private static func checkStringMap(_ r: inout JSONReader) throws(JSONReader.Failure) {
        try r.checkObject(depth: 3) { (r: inout JSONReader, _) throws(JSONReader.Failure) in try r.checkString() }
    }

    /// An object of strings (`error_aliases`).
    private static func stringMap(_ r: inout JSONReader) throws(JSONReader.Failure) -> [String: String] {
        var map: [String: String] = [:]
        try r.beginObject(depth: 3)
        while let key = try r.nextKey() {
            let name = key.string
            guard map[name] == nil else { throw .malformed }
            map[name] = try r.string()
        }
        return map
    }
}

extension DPoPKey {
    /// The stored form of a DPoP key, the `dpop_key` object.
    struct Stored: Codable {
        var alg: String
        var jkt: String
        var private_key: String

        init(_ key: DPoPKey) {
            alg = key.algorithm
            jkt = key.thumbprint
            private_key = key.privateKey
        }

        var key: DPoPKey { DPoPKey(algorithm: alg, thumbprint: jkt, privateKey: private_key) }
    }

    /// Reads `dpop_key`: three strings, all required; without `secrets`
    /// the private key is checked and read as "".
    static func read(_ r: inout JSONReader, secrets: Bool) throws(JSONReader.Failure) -> DPoPKey {
        var alg: String?
        var jkt: String?
        var privateKey: String?
        try r.beginObject(depth: 2)
        while let key = try r.nextKey() {
            if key.is("alg") {
                guard alg == nil else { throw .malformed }
                alg = try r.string()
            } else if key.is("jkt") {
                guard jkt == nil else { throw .malformed }
                jkt = try r.string()
            } else if key.is("private_key") {
                guard privateKey == nil else { throw .malformed }
                if secrets {
                    privateKey = try r.string()
                } else {
                    guard try r.skipString() else { throw .malformed }
                    privateKey = ""
                }
            } else {
                try r.skip(depth: 3)
            }
        }
        guard let alg, let jkt, let privateKey else { throw .malformed }
        return DPoPKey(algorithm: alg, thumbprint: jkt, privateKey: privateKey)
    }
}
