package import FoundationEssentials

/// Something the person who owns a grant wants to hear about without
/// asking: the grant died, is about to, or was authorized again. The code
/// that sees it happen (a refresh, a keep-alive pass, `vault add NAME`)
/// makes one and hands it to a `GrantNoticeObserver`; what is done with it
/// (running the person's notify command) lives above the core.
package struct GrantNotice: Sendable {
    /// What happened.
    package enum Event: String, Sendable, Codable {
        /// A refresh was refused and marked the grant dead.
        case died
        /// Its refresh token dies soon, and refreshing will not save it.
        case expiring
        /// It was authorized again.
        case reauthorized
    }

    package var event: Event
    /// The grant's name when it happened.
    package var name: String
    /// The record's random id: what repeats are recognised by, so a name
    /// never has to be written outside the vault.
    package var record: [UInt8]
    /// The grant as it was then (for `died`, before it was marked).
    package var grant: Grant
    /// Why, in vault's own words or an OAuth error code that passed
    /// `errorCode` (never a provider's free text).
    package var reason: String
    /// What the provider or the failure said, as it was (outside text, for
    /// the observer to escape for wherever it goes); empty when nothing.
    package var detail: String
    /// When its refresh token dies (or died); nil when not known here, for
    /// the observer to work out from the provider's policy.
    package var deadline: Date?

    package init(
        event: Event, name: String, record: [UInt8], grant: Grant, reason: String, detail: String = "",
        deadline: Date? = nil
    ) {
        self.event = event
        self.name = name
        self.record = record
        self.grant = grant
        self.reason = reason
        self.detail = detail
        self.deadline = deadline
    }

    /// `code` when it can stand as a reason: an OAuth error code of
    /// name-chars (letters, digits, `_`, `.` and `-`, the grammar of a
    /// `token_type`, which RFC 6749's error codes all keep to), at most 64
    /// of them; nil for anything else a provider sent as one.
    package static func errorCode(_ code: String?) -> String? {
        guard let code, code.utf8.count <= 64, ProviderText.isTokenType(code) else { return nil }
        return code
    }
}

/// Told of grant notices by the code that causes them. Implementations
/// must return promptly: a notice may be given in the middle of handing
/// out a token.
package protocol GrantNoticeObserver: Sendable {
    /// Handles one notice.
    func notice(_ notice: GrantNotice)
}
