internal import VaultCrypto

/// Appends big-endian fields to a byte array.
package struct ByteWriter {
    package private(set) var bytes: [UInt8] = []

    package init() {}

    /// Zeroes what was written (a key, a payload), keeping its length,
    /// in a way the optimizer cannot drop.
    package mutating func wipe() { secureZero(&bytes) }

    package mutating func append(_ raw: [UInt8]) { bytes += raw }
    package mutating func append(_ label: String) { bytes += Array(label.utf8) }
    package mutating func append(_ v: UInt8) { bytes.append(v) }
    package mutating func append(_ v: UInt16) { appendInteger(v) }
    package mutating func append(_ v: UInt32) { appendInteger(v) }
    package mutating func append(_ v: UInt64) { appendInteger(v) }

    private mutating func appendInteger<T: FixedWidthInteger>(_ v: T) {
        withUnsafeBytes(of: v.bigEndian) { bytes += $0 }
    }
}

/// Reads big-endian fields strictly: every read checks the remaining length,
/// and `finish` refuses trailing bytes.
package struct ByteReader {
    private let bytes: [UInt8]
    package private(set) var offset = 0
    /// Names the structure in errors ("keyslot 1", "vault header").
    package let what: String

    package init(_ bytes: [UInt8], what: String) {
        self.bytes = bytes
        self.what = what
    }

    package var remaining: Int { bytes.count - offset }

    package mutating func read(_ count: Int) throws(VaultError) -> [UInt8] {
        guard count >= 0, remaining >= count else {
            throw VaultError(.damaged, "\(what) is truncated")
        }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    package mutating func expect(_ label: String) throws(VaultError) {
        guard try read(label.utf8.count) == Array(label.utf8) else {
            throw VaultError(.damaged, "\(what) has a wrong magic number")
        }
    }

    package mutating func u8() throws(VaultError) -> UInt8 { try read(1)[0] }
    package mutating func u16() throws(VaultError) -> UInt16 { try integer() }
    package mutating func u32() throws(VaultError) -> UInt32 { try integer() }
    package mutating func u64() throws(VaultError) -> UInt64 { try integer() }

    private mutating func integer<T: FixedWidthInteger>() throws(VaultError) -> T {
        try read(MemoryLayout<T>.size).reduce(T(0)) { ($0 << 8) | T($1) }
    }

    package func finish() throws(VaultError) {
        guard remaining == 0 else { throw VaultError(.damaged, "\(what) has \(remaining) trailing bytes") }
    }
}

/// Verifies and strips the trailing BLAKE2b-16 checksum that every stored
/// structure carries, so accidental damage is named precisely.
package enum Checksum {
    package static let length = 16

    package static func seal(_ body: [UInt8]) throws(VaultError) -> [UInt8] {
        body + (try Secure.hash(body, length: length))
    }

    package static func open(_ blob: [UInt8], what: String) throws(VaultError) -> [UInt8] {
        guard blob.count > length else { throw VaultError(.damaged, "\(what) is truncated") }
        let body = Array(blob[..<(blob.count - length)])
        let sum = try Secure.hash(body, length: length)
        guard sum == Array(blob[(blob.count - length)...]) else {
            throw VaultError(.damaged, "\(what) is damaged (checksum mismatch)")
        }
        return body
    }
}

extension [UInt8] {
    /// Lower-case hexadecimal.
    package var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for b in self {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
