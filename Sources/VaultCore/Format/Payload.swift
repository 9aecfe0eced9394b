import FoundationEssentials
package import VaultCrypto

/// The plaintext inside a record: its name and grant (no grant for a
/// tombstone), and what its tokens and metadata replaced (`Lineage`).
package struct Payload: Equatable {
    package var name: String
    package var grant: Grant?
    package var lineage = Lineage()
    /// The clocks of the machine that sent the record through the sync
    /// store (docs/sync.md, "Times from another machine"); nil in the
    /// local file, which keeps every time by this machine's clock.
    package var transit: TransitClock?

    private struct Wire: Codable {
        var name: String
        var grant: Grant?
        var lineage: WireLineage?
        var clock: TransitClock?
    }

    /// `lineage` as stored: absent when empty, so records without one
    /// read and write as before.
    private struct WireLineage: Codable {
        var spent: [String]?
        var presented: [String]?
        var meta: String?
        var metaBefore: [String]?
        var tokens: String?
        var tokensBefore: [String]?
        var editedAt: Int64?

        enum CodingKeys: String, CodingKey {
            case spent, presented, meta, tokens
            case metaBefore = "meta_before"
            case tokensBefore = "tokens_before"
            case editedAt = "edited_at"
        }
    }

    /// Serializes into secure memory, wiping the intermediate buffer.
    package func sealedBytes() throws(VaultError) -> SecureBytes {
        var data: Data
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let stored =
                lineage.isEmpty
                ? nil
                : WireLineage(
                    spent: lineage.spent.isEmpty ? nil : lineage.spent,
                    presented: lineage.presented.isEmpty ? nil : lineage.presented, meta: lineage.meta,
                    metaBefore: lineage.metaBefore.isEmpty ? nil : lineage.metaBefore, tokens: lineage.tokens,
                    tokensBefore: lineage.tokensBefore.isEmpty ? nil : lineage.tokensBefore,
                    editedAt: lineage.editedAt)
            data = try encoder.encode(Wire(name: name, grant: grant, lineage: stored, clock: transit))
        } catch {
            throw VaultError(.internalError, "cannot serialize the grant")
        }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        return try Secure.copy(data)
    }

    package init(name: String, grant: Grant?, lineage: Lineage = Lineage()) {
        self.name = name
        self.grant = grant
        self.lineage = lineage
    }

    /// Parses a record's plaintext; `label` names the record in errors.
    init(json plain: SecureBytes, label: @autoclosure () -> String) throws(VaultError) {
        self = try plain.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(VaultError) in
            try Payload(json: bytes, label: label())
        }
    }

    /// Parses plaintext held elsewhere (a scratch buffer), with the strict
    /// reader of PayloadCodec.swift rather than Foundation's decoder.
    package init(json plain: UnsafeRawBufferPointer, label: @autoclosure () -> String, secrets: Bool = true)
        throws(VaultError)
    {
        guard let payload = Payload.read(plain, secrets: secrets) else {
            throw VaultError(.damaged, "\(label()) holds a malformed grant")
        }
        self = payload
    }

    /// Parses with Foundation's decoder (the fuzz target compares the two).
    package static func decodedWithFoundation(_ bytes: [UInt8]) -> Payload? {
        guard let wire = try? JSONDecoder().decode(Wire.self, from: Data(bytes)) else { return nil }
        let l = wire.lineage
        var payload = Payload(
            name: wire.name, grant: wire.grant,
            lineage: Lineage(
                spent: l?.spent ?? [], meta: l?.meta, metaBefore: l?.metaBefore ?? [], tokens: l?.tokens,
                tokensBefore: l?.tokensBefore ?? []))
        payload.lineage.editedAt = l?.editedAt
        payload.lineage.presented = l?.presented ?? []
        payload.transit = wire.clock
        return payload
    }

    /// The payload with the times of its tokens moved by `seconds`: the
    /// access token's and the narrowed tokens' expiry and issue times, the
    /// refresh token's expiry, and when it was last refreshed. `transit`
    /// is dropped: the times are this machine's now.
    package func shiftingTimes(by seconds: Double) -> Payload {
        var next = self
        next.transit = nil
        next.lineage.editedAt = lineage.editedAt.map { Int64((Double($0) + seconds).rounded(.down)) }
        guard var g = grant else { return next }
        func moved(_ d: Date?) -> Date? {
            d.map { Date(epochSeconds: Int64(($0.timeIntervalSince1970 + seconds).rounded(.down))) }
        }
        g.expiresAt = moved(g.expiresAt)
        g.refreshTokenExpiresAt = moved(g.refreshTokenExpiresAt)
        g.refreshedAt = moved(g.refreshedAt)
        g.derivedTokens = g.derivedTokens.map { token in
            var t = token
            t.expiresAt = moved(t.expiresAt)
            t.issuedAt = moved(t.issuedAt) ?? t.issuedAt
            return t
        }
        next.grant = g
        return next
    }
}

/// The clocks of a machine when it sent records through the sync store:
/// its own wall clock, and the store's `Date`, in the store's last answer
/// before the write. A reader turns the record's times into its own clock
/// from the lifetime left by the writer's clock and the time that passed
/// by the store's, never comparing the two machines' clocks.
package struct TransitClock: Codable, Equatable, Sendable {
    /// The writer's wall clock, seconds since 1970.
    package var writer: Int64
    /// The store's clock in the same answer, seconds since 1970.
    package var store: Int64

    package init(writer: Int64, store: Int64) {
        self.writer = writer
        self.store = store
    }
}
