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
    /// Why, in a few words or an OAuth error code.
    package var reason: String
    /// When its refresh token dies (or died); nil when not known here, for
    /// the observer to work out from the provider's policy.
    package var deadline: Date?

    package init(event: Event, name: String, record: [UInt8], grant: Grant, reason: String, deadline: Date? = nil) {
        self.event = event
        self.name = name
        self.record = record
        self.grant = grant
        self.reason = reason
        self.deadline = deadline
    }
}

/// Told of grant notices by the code that causes them. Implementations
/// must return promptly: a notice may be given in the middle of handing
/// out a token.
package protocol GrantNoticeObserver: Sendable {
    /// Handles one notice.
    func notice(_ notice: GrantNotice)
}
