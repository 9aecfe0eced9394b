package import FoundationEssentials

/// Keeps grants alive that would die of inactivity: a refresh, through the
/// normal path (`TokenRefresher.freshGrant` forced, under the grant's lock
/// and whatever coordinator the refresher has, the sync lease included), of
/// each grant whose renewable refresh-token deadline is within the lead
/// time. Used by `vault keepalive` and by the agent while it runs.
package struct KeepAlive {
    /// What became of one grant that was due.
    package enum Result: Sendable {
        /// Refreshed; the refresh token's new deadline, when known.
        case refreshed(RefreshTokenDeadline?)
        /// The provider refused it: it is marked dead.
        case died(VaultError)
        /// The refresh failed and changed nothing.
        case failed(VaultError)
    }

    /// One grant that was due, and what the refresh did.
    package struct Outcome: Sendable {
        package let name: String
        package let grant: Grant
        package let deadline: RefreshTokenDeadline
        package let result: Result
    }

    /// The documented policy of a grant's provider.
    package let policy: (Grant) -> RefreshTokenPolicy?
    /// How long before a deadline to refresh; nil: each deadline's default
    /// (a quarter of its span, at most 7 days).
    package let lead: TimeInterval?

    package init(policy: @escaping (Grant) -> RefreshTokenPolicy?, lead: TimeInterval?) {
        self.policy = policy
        self.lead = lead
    }

    /// The grants of `grants` (name and grant, as listed) whose deadline is
    /// due at `now`.
    package func due(_ grants: [(name: String, grant: Grant)], now: Date) -> [(
        name: String, grant: Grant, deadline: RefreshTokenDeadline
    )] {
        grants.compactMap { entry in
            guard let d = entry.grant.refreshTokenDeadline(policy: policy(entry.grant)),
                d.keepAliveDue(at: now, lead: lead)
            else { return nil }
            return (entry.name, entry.grant, d)
        }
    }

    /// The grants of `grants` whose refresh token dies within `lead` of
    /// `now` (or has died) at a deadline no refresh moves (a lifetime):
    /// what a keep-alive pass cannot save, only a new authorization.
    package func beyondSaving(_ grants: [(name: String, grant: Grant)], now: Date, lead: TimeInterval) -> [(
        name: String, grant: Grant, deadline: RefreshTokenDeadline
    )] {
        grants.compactMap { entry in
            guard let d = entry.grant.refreshTokenDeadline(policy: policy(entry.grant)), !d.renewable,
                d.date.timeIntervalSince(now) <= lead
            else { return nil }
            return (entry.name, entry.grant, d)
        }
    }

    /// Refreshes `name` now through `refresher`.
    package func refresh(
        _ name: String, grant: Grant, deadline: RefreshTokenDeadline, with refresher: TokenRefresher
    ) -> Outcome {
        do {
            let fresh = try refresher.freshGrant(name, forceRefresh: true)
            return Outcome(
                name: name, grant: fresh.grant, deadline: deadline,
                result: .refreshed(fresh.grant.refreshTokenDeadline(policy: policy(fresh.grant))))
        } catch {
            return Outcome(
                name: name, grant: grant, deadline: deadline,
                result: error.code == .dead ? .died(error) : .failed(error))
        }
    }

    /// The notices a keep-alive pass over `grants` at `now` gives, for
    /// grants whose refresh token dies within `notifyLead` and that the
    /// pass did not save: a deadline no refresh moves (a lifetime), or a
    /// keep-alive refresh that failed. Grants that died in the pass were
    /// told of by the refresh itself. Record ids come from `vault`; a grant
    /// gone meanwhile is left out.
    package func expiring(
        _ grants: [(name: String, grant: Grant)], outcomes: [Outcome], now: Date, notifyLead: TimeInterval,
        in vault: Vault
    ) -> [GrantNotice] {
        var notices: [GrantNotice] = []
        for (name, grant) in grants {
            guard let d = grant.refreshTokenDeadline(policy: policy(grant)),
                d.date.timeIntervalSince(now) <= notifyLead
            else { continue }
            let reason: String
            var detail = ""
            switch outcomes.first(where: { $0.name == name })?.result {
            case .refreshed, .died: continue
            case .failed(let error):
                reason = "keep-alive could not refresh it"
                detail = error.reason
            case nil:
                // Not due: a refresh would not move it (else the pass would
                // have refreshed it).
                guard !d.renewable else { continue }
                reason = d.rule.rawValue
            }
            guard let (row, _) = try? vault.loadWithRow(name) else { continue }
            notices.append(
                GrantNotice(
                    event: .expiring, name: name, record: row.id, grant: grant, reason: reason, detail: detail,
                    deadline: d.date))
        }
        return notices
    }
}
