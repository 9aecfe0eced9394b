import Testing

@testable import VaultCore

/// The rules a state's entries are read by: ids strictly increasing (as
/// bytes), versions positive, the removed flag 0 or 1, and exactly as many
/// entries as the count says.
@Suite("the vault state's entries")
struct StateManifestTests {
    typealias Row = (id: [UInt8], version: UInt64, flag: UInt8)

    /// A 16-byte id with `value` at `index`.
    static func id(_ index: Int, _ value: UInt8) -> [UInt8] {
        var id = [UInt8](repeating: 0, count: 16)
        id[index] = value
        return id
    }

    func body(_ rows: [Row], count: Int? = nil) -> [UInt8] {
        var w = ByteWriter()
        w.append(StateManifest.magic)
        w.append(StateManifest.stateVersion)
        w.append(UInt64(7))
        w.append(UInt32(count ?? rows.count))
        for row in rows {
            w.append(row.id)
            w.append(row.version)
            w.append(row.flag)
        }
        return w.bytes
    }

    func reason(_ rows: [Row], count: Int? = nil) -> String? {
        do throws(VaultError) {
            _ = try StateManifest(parsing: body(rows, count: count))
            return nil
        } catch {
            return error.reason
        }
    }

    @Test("ids in byte order are read, each with its version and flag")
    func wellFormed() throws {
        // Byte 8 set sorts before byte 7 set: the second word is compared
        // only when the first words are equal.
        let rows: [Row] = [
            (Self.id(15, 1), 1, 0), (Self.id(15, 2), 2, 1), (Self.id(8, 1), 9, 0), (Self.id(7, 1), 1 << 40, 0),
            (Self.id(0, 1), 3, 1), (Self.id(0, 255), UInt64.max, 0),
        ]
        let state = try StateManifest(parsing: body(rows))
        #expect(state.generation == 7)
        for row in rows {
            #expect(state.entries[row.id] == .init(version: row.version, deleted: row.flag == 1))
        }
        #expect(state.entries[Self.id(15, 3)] == nil)
    }

    @Test(
        "ids out of byte order, or given twice, are refused",
        arguments: [
            [Self.id(15, 2), Self.id(15, 1)], [Self.id(7, 1), Self.id(8, 1)], [Self.id(0, 1), Self.id(15, 255)],
            [Self.id(3, 4), Self.id(3, 4)],
        ])
    func outOfOrder(ids: [[UInt8]]) {
        #expect(reason(ids.map { ($0, 1, 0) }) == "vault state entries are out of order")
    }

    @Test("a version of zero or a flag other than 0 and 1 is refused, wherever the entry is")
    func malformed() {
        let good: [Row] = [(Self.id(15, 1), 1, 0), (Self.id(15, 2), 1, 0), (Self.id(15, 3), 1, 0)]
        for position in good.indices {
            for bad: (version: UInt64, flag: UInt8) in [(0, 0), (1, 2), (1, 255)] {
                var rows = good
                rows[position].version = bad.version
                rows[position].flag = bad.flag
                #expect(reason(rows) == "vault state has a malformed entry", "entry \(position): \(bad)")
            }
        }
        // Each byte of the version counts.
        for byte in 0..<8 {
            var rows = good
            rows[1].version = UInt64(1) << (8 * byte)
            #expect(reason(rows) == nil, "version byte \(byte)")
        }
    }

    @Test("a count that does not match the entries is refused")
    func count() {
        let rows: [Row] = [(Self.id(15, 1), 1, 0), (Self.id(15, 2), 1, 0)]
        #expect(reason(rows, count: 1) == "vault state has a wrong entry count")
        #expect(reason(rows, count: 3) == "vault state has a wrong entry count")
        #expect(reason([]) == nil)
    }
}
