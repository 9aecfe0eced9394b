internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// One thing `vault doctor` looked at, what it found and what to do.
struct Finding: Encodable {
    /// How a check came out.
    enum Status: String, Encodable {
        case ok, warn, fail, skipped
    }

    let check: String
    let status: Status
    /// What the check saw: its evidence, never a secret.
    let detail: String
    /// What to do about it, in the command line's words.
    let remedy: String?

    init(_ check: String, _ status: Status, _ detail: String, remedy: String? = nil) {
        self.check = check
        self.status = status
        self.detail = detail
        self.remedy = remedy
    }

    enum CodingKeys: String, CodingKey { case check, status, detail, remedy }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(check, forKey: .check)
        try c.encode(status, forKey: .status)
        try c.encode(detail, forKey: .detail)
        // Always present, null when there is nothing to do.
        try c.encode(remedy, forKey: .remedy)
    }
}

/// The checks of one grant, in the order they run: what the vault knows
/// (its state, a likely Google testing app, a sync conflict, mail scopes),
/// then one probe of its token endpoint that spends nothing (network,
/// proxy, clock, client), then its access token at the userinfo endpoint
/// while it is valid, or else the refresh it needs anyway. A machine
/// grant's probe is the token request `vault check` makes, which also
/// tests its credentials.
struct GrantDoctor {
    let name: String
    let grant: Grant
    let refresher: TokenRefresher
    let environment: [String: String]
    let now: Date
    let conflicted: Bool
    /// `--mail`: the grant is meant for IMAP and SMTP.
    let forMail: Bool
    /// Which machine may refresh the grant, for a synced grant whose
    /// refresh token a second use would revoke (nil otherwise), and
    /// whether the store answered.
    var refreshRight: (right: RefreshRight, storeAnswers: Bool)? = nil
    /// When the refresh token dies and by which rule (the provider's
    /// answer, or its documented policy), when known.
    var refreshDeadline: RefreshTokenDeadline? = nil
    /// Where the provider file of the grant's provider would be, when this
    /// machine has neither that file nor a preset of the provider.
    var missingProviderFile: String? = nil
    /// How close a deadline must be to be reported (`VAULT_NOTIFY_LEAD`).
    var notifyLead: TimeInterval = NotifySettings.defaultLead
    /// The agent that holds the vault unlocked, if one does: its keep-alive
    /// refreshes a grant before inactivity kills its refresh token.
    var keepAliveAgent: AgentStatus? = nil

    /// A skew of the local clock against the provider's that is reported.
    static let clockTolerance: Double = 60
    /// Google expires refresh tokens of apps in testing 7 days after consent.
    static let googleTestingLifetime: Double = 7 * 86400

    func run() -> [Finding] {
        var findings = [stateFinding()]
        if let lifetime = lifetimeFinding() { findings.append(lifetime) }
        if let file = missingProviderFile {
            findings.append(
                Finding(
                    "provider", .warn,
                    "no provider file for '\(grant.provider)' on this machine (\(file)): the grant refreshes, but its "
                        + "provider's refresh-token policy (lifetime, reuse) is not known here",
                    remedy:
                        "provider files do not sync: copy one that another machine has, or write one (docs/providers.md)"
                ))
        }
        if let testing = googleTestingFinding(grant) { findings.append(testing) }
        if conflicted {
            findings.append(
                Finding(
                    "conflict", .warn,
                    "the grant was changed on two machines at once; both sides are kept and this one uses the current side",
                    remedy:
                        "'vault conflicts' shows both sides; 'vault conflicts resolve \(name) --keep current|other' ends it"
                ))
        }
        if let right = refreshRightFinding() { findings.append(right) }
        if let scopes = mailScopeFinding() { findings.append(scopes) }
        if grant.kind.mintsTokens {
            findings += machineFindings()
        } else {
            let reachable = probeFindings(into: &findings)
            findings += tokenFindings(reachable: reachable)
        }
        return findings
    }

    // MARK: What the vault knows

    func stateFinding() -> Finding {
        let again = "run 'vault add \(name)' to authorize it again"
        if grant.dead {
            return Finding(
                "state", .fail, grant.refusal(grant.deadReason),
                remedy: grant.kind.mintsTokens
                    ? Remedies.hint(
                        .replaceCredentials(
                            provider: grant.provider, grant: name, serviceAccount: grant.kind == .serviceAccount))
                    : again)
        }
        if let end = grant.refreshTokenExpiresAt, end <= now, !grant.isUsable(at: now) {
            return Finding(
                "state", .fail, "the refresh token expired at \(Format.timestamp(end)), as the provider said it would",
                remedy: again)
        }
        switch grant.state(at: now) {
        case .fresh:
            let until = grant.expiresAt.map { " until \(Format.timestamp($0))" } ?? ""
            return Finding("state", .ok, "the access token is valid\(until)")
        case .refreshable:
            return Finding(
                "state", .ok,
                grant.kind.mintsTokens
                    ? "the access token is stale; the grant's credentials get a new one"
                    : "the access token is stale; the refresh token renews it")
        case .expired:
            let why =
                grant.refreshToken == nil
                ? "the access token expired and there is no refresh token"
                : "the access token expired and the grant keeps no token endpoint or client id to refresh it"
            return Finding("state", .fail, why, remedy: again)
        case .dead:
            return Finding("state", .fail, "the provider refused the grant", remedy: again)
        }
    }

    /// When the refresh token dies. A deadline no refresh moves (a
    /// lifetime) within the notify lead fails: only a new authorization
    /// saves the grant, and it must come before that date. A deadline a
    /// refresh moves (inactivity) that close is a warning: a refresh, or
    /// `vault keepalive`, moves it.
    /// When `agent` locks, as `; it locks after ...`; empty without a limit.
    static func lockText(_ agent: AgentStatus) -> String {
        let limits = [agent.idleSecondsLeft, agent.hardSecondsLeft].filter { $0 > 0 }
        guard let first = limits.min() else { return "" }
        return " (it locks in \(Duration.text(TimeInterval(first))) unless used)"
    }

    func lifetimeFinding() -> Finding? {
        guard let deadline = refreshDeadline, !grant.dead else { return nil }
        let date = Format.timestamp(deadline.date)
        let when = "\(date) (\(Format.relative(deadline.date, now: now)))"
        let rule = GrantLifetimes.ruleText(deadline)
        let left = deadline.date.timeIntervalSince(now)
        if left <= 0, let end = grant.refreshTokenExpiresAt, end <= now, !grant.isUsable(at: now) {
            return nil  // the state check says it
        }
        if deadline.renewable {
            guard left <= notifyLead else {
                return Finding(
                    "lifetime", .ok, "the refresh token lives until \(when), \(rule); a refresh moves that")
            }
            // The running agent's keep-alive refreshes it in time, as 'vault
            // keepalive' would: no warning while it holds the vault.
            if left > 0, let agent = keepAliveAgent {
                return Finding(
                    "lifetime", .ok,
                    "the refresh token dies at \(when), \(rule), unless the grant is refreshed before then: the "
                        + "agent (pid \(agent.pid)) refreshes it in time with its keep-alive while it holds the "
                        + "vault unlocked" + GrantDoctor.lockText(agent))
            }
            return Finding(
                "lifetime", .warn,
                left > 0
                    ? "the refresh token dies at \(when), \(rule), unless the grant is refreshed before then"
                    : "the refresh token was due to die at \(when), \(rule); only a refresh tells whether it did",
                remedy:
                    "run 'vault refresh \(name)'; 'vault keepalive' on a timer refreshes such grants in time (docs/agent.md, \"Keep-alive\")"
            )
        }
        guard left <= notifyLead else {
            return Finding(
                "lifetime", .ok, "the refresh token lives until \(when), \(rule); no refresh moves that")
        }
        guard left > 0 else {
            return Finding(
                "lifetime", .fail,
                "the refresh token died at \(when), \(rule): the access token works until it expires, then the grant needs a new authorization",
                remedy: "run 'vault add \(name)' to authorize it again")
        }
        return Finding(
            "lifetime", .fail,
            "the refresh token dies at \(when), \(rule), and no refresh moves that: the grant then needs a new authorization",
            remedy: "run 'vault add \(name)' before \(date) to authorize it again")
    }

    /// Which machine may refresh the grant (docs/sync.md, "Refresh rights
    /// while the store is away").
    func refreshRightFinding() -> Finding? {
        guard let (right, answers) = refreshRight else { return nil }
        switch right {
        case .here:
            return Finding(
                "refresh-right", .ok,
                "this machine holds the right to refresh it, and refreshes it while the store is away when its "
                    + "access token runs out before this machine could next renew that right")
        case .nobody:
            return Finding(
                "refresh-right", .ok,
                "no machine held the right to refresh it at the last sync; the next refresh takes it"
                    + (answers ? "" : " once the store answers"))
        case .elsewhere(let machine):
            let meanwhile =
                "this machine hands out its access token while it is valid, and otherwise exits 75 (try again)"
            guard !answers else {
                return Finding(
                    "refresh-right", .ok,
                    "machine \(machine) held the right to refresh it at the last sync; a refresh here asks for it, "
                        + "and \(meanwhile) until that machine has synced")
            }
            return Finding(
                "refresh-right", .warn,
                "machine \(machine) holds the right to refresh it and the store cannot be reached: \(meanwhile)",
                remedy: "run 'vault sync' on machine \(machine) once the store answers, or wait for the store")
        }
    }

    /// True for a grant of Google's (the preset, or its token endpoint).
    var isGoogle: Bool {
        if grant.provider == "google" { return true }
        guard let endpoint = grant.providerConfiguration?.tokenEndpoint,
            let (_, host) = URLPolicy.schemeAndHost(endpoint)
        else { return false }
        return host == "oauth2.googleapis.com" || host == "accounts.google.com"
    }

    /// A Google grant that died of `invalid_grant` about 7 days after it was
    /// authorized, never refreshed after that: what an app whose consent
    /// screen is in testing does to every refresh token. Google's answer is
    /// the same as for a revoked token, so this is a likely cause, with its
    /// evidence, never a certainty.
    func googleTestingFinding(_ g: Grant) -> Finding? {
        guard isGoogle, g.dead, g.deadReason == "invalid_grant" || g.deadReason == nil else { return nil }
        let age = now.timeIntervalSince(g.createdAt)
        let lived = (g.refreshedAt ?? g.createdAt).timeIntervalSince(g.createdAt)
        let week = Self.googleTestingLifetime
        guard age >= week - 12 * 3600, lived < week + 3600 else { return nil }
        let days = Int(age / 86400)
        return Finding(
            "google-testing", .warn,
            "likely a Google app in testing: the grant was authorized \(days) days ago (\(Format.timestamp(g.createdAt))), "
                + "last refreshed \(Format.timestamp(g.refreshedAt ?? g.createdAt)), and Google then refused it "
                + "with invalid_grant; Google expires the refresh tokens of apps in testing 7 days after consent",
            remedy:
                "publish the app (Google Cloud console, OAuth consent screen: Publish app), then run 'vault add \(name)'; "
                + "a revoked grant looks the same, so check the account's third-party access too")
    }

    /// The scopes IMAP and SMTP need at the providers vault knows them for.
    struct MailScopes {
        let imap: String
        let smtp: String
        /// Scopes that show a grant is meant for mail but cannot log in.
        let related: [String]
    }

    var mailScopes: MailScopes? {
        if isGoogle {
            return MailScopes(
                imap: "https://mail.google.com/", smtp: "https://mail.google.com/",
                related: ["https://www.googleapis.com/auth/gmail."])
        }
        let host = grant.providerConfiguration?.tokenEndpoint.flatMap { URLPolicy.schemeAndHost($0)?.1 }
        if grant.provider == "microsoft" || host == "login.microsoftonline.com" {
            return MailScopes(
                imap: "https://outlook.office.com/IMAP.AccessAsUser.All",
                smtp: "https://outlook.office.com/SMTP.Send",
                related: ["https://outlook.office.com/", "https://outlook.office365.com/"])
        }
        return nil
    }

    func mailScopeFinding() -> Finding? {
        guard let mail = mailScopes else {
            return forMail
                ? Finding("scopes", .skipped, "vault knows no mail scopes of provider '\(grant.provider)'") : nil
        }
        guard !grant.scopes.isEmpty else {
            return Finding("scopes", .skipped, "the grant records no scopes; 'vault test imap|smtp' tries a login")
        }
        // Microsoft names the scopes with either host.
        func has(_ scope: String) -> Bool {
            grant.scopes.contains(scope)
                || grant.scopes.contains(
                    scope.replacing("https://outlook.office.com/", with: "https://outlook.office365.com/"))
        }
        let missing = Array(Set([mail.imap, mail.smtp].filter { !has($0) })).sorted()
        let addScopes = missing.map { "--scope \($0)" }.joined(separator: " ")
        if missing.isEmpty { return Finding("scopes", .ok, "the grant has the scopes IMAP and SMTP need") }
        let mailLike =
            grant.scopes.contains { s in mail.related.contains { s.hasPrefix($0) } } || has(mail.imap) != has(mail.smtp)
        if forMail || mailLike {
            return Finding(
                "scopes", forMail ? .fail : .warn,
                "for IMAP and SMTP the grant lacks \(missing.joined(separator: " and ")); it has: \(grant.scopes.joined(separator: " "))",
                remedy: "run 'vault add \(name) \(addScopes)' to authorize it again with them")
        }
        return Finding("scopes", .skipped, "no mail scope: not a mail grant (--mail checks it as one)")
    }

    // MARK: The probe

    /// The proxy libcurl uses for `url`, named for messages (no credentials).
    func proxy(for url: String) -> String? {
        let https = url.lowercased().hasPrefix("https:")
        let names =
            https
            ? ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] : ["http_proxy", "all_proxy", "ALL_PROXY"]
        for variable in names {
            if let value = environment[variable], !value.isEmpty {
                return "\(URLPolicy.redacted(value)) (\(variable))"
            }
        }
        return nil
    }

    /// Probes the token endpoint; true when the provider answered (or there
    /// was nothing to probe), false when the network failed.
    func probeFindings(into findings: inout [Finding]) -> Bool {
        guard let endpoint = grant.providerConfiguration?.tokenEndpoint else { return true }
        let host = URLPolicy.schemeAndHost(endpoint)?.1 ?? "?"
        let via = proxy(for: endpoint)
        let outcome: TokenEndpointProbe.Outcome?
        do {
            outcome = try TokenEndpointProbe.probe(grant, name: name, transport: refresher.transport)
        } catch {
            findings.append(Finding("reachable", .warn, "the probe could not be sent: \(error.reason)"))
            return true
        }
        guard let outcome else { return true }
        switch outcome {
        case .unreachable(let error):
            findings.append(networkFinding(error, host: host, via: via))
            return false
        case .answered(let answer):
            // A token endpoint takes only POST (RFC 6749 section 3.2): a
            // GET's 404 or 405 shows that its host answers, no more.
            findings.append(
                Finding(
                    "reachable", .ok,
                    (answer.clientChecked
                        ? "the token endpoint at \(host) answered HTTP \(answer.status)"
                        : "the token endpoint's host \(host) answered a GET with HTTP \(answer.status) (a token "
                            + "endpoint takes only POST: this shows that the host answers)")
                        + (via.map { " through \($0)" } ?? "")))
            findings.append(contentsOf: answerFindings(answer, host: host, via: via))
            return true
        }
    }

    func networkFinding(_ error: HTTPError, host: String, via: String?) -> Finding {
        let network = "check the network, and that the grant's token endpoint is right ('vault show \(name)')"
        switch (error.code, error.cause) {
        case (_, .resolveHost?):
            return Finding(
                "dns", .fail, "the name \(host) does not resolve: \(error.reason)",
                remedy:
                    "check the network and its DNS (/etc/resolv.conf), or the endpoint's name ('vault show \(name)')")
        case (_, .resolveProxy?):
            return Finding(
                "proxy", .fail, "the proxy \(via ?? "") does not resolve: \(error.reason)",
                remedy: "fix or unset the proxy variable")
        case (_, .connect?):
            return Finding(
                "reachable", .fail,
                "nothing accepts connections to \(host)" + (via.map { " (through \($0))" } ?? "") + ": \(error.reason)",
                remedy: network)
        case (_, .timeout?):
            return Finding(
                "reachable", .fail, "\(host) did not answer in time: \(error.reason)", remedy: network)
        case (.tls, _):
            let intercept = via.map { "; the proxy \($0) may be intercepting TLS" } ?? ""
            return Finding(
                "tls", .fail, "the TLS connection to \(host) failed: \(error.reason)\(intercept)",
                remedy: "check the machine's CA certificates (SSL_CERT_FILE) and clock, and any proxy in between")
        default:
            return Finding("reachable", .fail, "the request to \(host) failed: \(error.reason)", remedy: network)
        }
    }

    func answerFindings(_ answer: TokenEndpointProbe.Answer, host: String, via: String?) -> [Finding] {
        var out: [Finding] = []
        let html = answer.mediaType.map { $0.contains("html") } ?? false
        // Only what something in between does is called a portal or a
        // proxy: a token endpoint never redirects, never asks for a proxy
        // login (407) or a network login (511, RFC 6585), and never
        // answers its requests with a page that says 200. A 4xx page is
        // the endpoint's server answering (django's 405 to a GET).
        let through = via.map { "; requests go through \($0)" } ?? ""
        let intercepted: Finding?
        if let target = answer.redirectHost {
            let elsewhere = target.lowercased() != host.lowercased()
            intercepted = Finding(
                "proxy", .fail,
                "the token endpoint's address at \(host) answered with a redirect (HTTP \(answer.status)) to "
                    + (elsewhere
                        ? "\(target): a captive portal or a proxy\(through)" : "another address there\(through)"),
                remedy: elsewhere
                    ? "log in to the network's portal, or set https_proxy and no_proxy so requests reach the provider"
                    : "check the grant's token endpoint ('vault show \(name)'); token endpoints do not redirect")
        } else if answer.status == 407 {
            intercepted = Finding(
                "proxy", .fail,
                "a proxy asks for its own login (HTTP 407) in place of the token endpoint at \(host)\(through)",
                remedy: "give the proxy's user and password in the proxy variable, or set no_proxy for \(host)")
        } else if answer.status == 511 || (html && (200..<300).contains(answer.status)) {
            intercepted = Finding(
                "proxy", .fail,
                "a web page (\(answer.mediaType ?? "html"), HTTP \(answer.status)) answered in place of the token endpoint at \(host): "
                    + "a captive portal or a proxy" + through,
                remedy:
                    "log in to the network's portal, or set https_proxy and no_proxy so requests reach the provider")
        } else if answer.status == 404 && answer.clientChecked {
            intercepted = Finding(
                "endpoint", .warn, "nothing is at the token endpoint's address at \(host) (HTTP 404)",
                remedy: "check the grant's token endpoint ('vault show \(name)')")
        } else {
            intercepted = nil
        }
        if let intercepted { out.append(intercepted) }
        if let date = answer.date {
            let skew = now.timeIntervalSince(date)
            let seconds = Int(abs(skew).rounded())
            if abs(skew) > Self.clockTolerance {
                out.append(
                    Finding(
                        "clock", .fail,
                        "this machine's clock is \(seconds)s \(skew > 0 ? "ahead of" : "behind") \(host)'s (its Date header)",
                        remedy: Remedies.hint(.setClock)))
            } else {
                out.append(Finding("clock", .ok, "within \(seconds)s of \(host)'s clock (its Date header)"))
            }
        } else {
            out.append(Finding("clock", .skipped, "\(host) sent no Date header to compare with"))
        }
        guard intercepted == nil, !grant.kind.mintsTokens else { return out }
        if answer.clientChecked {
            out.append(clientFinding(answer))
        } else if grant.kind == .oauth2 {
            out.append(Finding("client", .skipped, "the grant keeps no client id to probe the token endpoint with"))
        }
        return out
    }

    func clientFinding(_ answer: TokenEndpointProbe.Answer) -> Finding {
        let said = answer.rawError.map { code in code + (answer.errorDescription.map { ": \($0)" } ?? "") }
        guard let verdict = answer.verdict else {
            return Finding(
                "client", .warn, "the provider took a refresh token it never issued (HTTP \(answer.status))")
        }
        if answer.rawError == "invalid_client"
            || (verdict.code == .invalidClient && answer.rawError != "unauthorized_client")
        {
            let secret = grant.providerConfiguration?.clientSecret != nil
            return Finding(
                "client", .fail,
                "the provider does not accept the grant's client (\(said ?? "invalid_client"))"
                    + (secret ? ": its secret was likely rotated, or the client deleted" : ""),
                remedy: secret
                    ? "put the new secret in a file and run 'vault add \(name) --client-secret-file FILE'"
                    : "check the client id; 'vault add \(name) --client-id ID' authorizes it with another")
        }
        switch verdict.code {
        case .refused:
            return Finding(
                "client", .ok, "the provider accepts the client (it refused only the probe's made-up refresh token)")
        case .transient:
            return Finding("client", .warn, "the provider is unavailable: \(verdict.reason)", remedy: "try again later")
        default:
            return Finding(
                "client", .skipped,
                "the answer (HTTP \(answer.status)\(said.map { ", \($0)" } ?? "")) does not say whether the client is accepted"
            )
        }
    }

    // MARK: A machine grant

    /// A machine grant's checks after what the vault knows: the token
    /// request `vault check` makes (`TokenEndpointProbe.mint`), in place of
    /// the probe and the refresh of a person's grant. Its answer is judged
    /// as the probe's is (network, proxy, clock); then the credentials.
    func machineFindings() -> [Finding] {
        guard let endpoint = grant.providerConfiguration?.tokenEndpoint else { return [] }
        guard !grant.dead else {
            return [Finding("credentials", .skipped, "the grant is dead: its credentials would be refused")]
        }
        let host = URLPolicy.schemeAndHost(endpoint)?.1 ?? "?"
        let via = proxy(for: endpoint)
        let (outcome, result) = TokenEndpointProbe.mint(name, with: refresher)
        var out: [Finding] = []
        switch outcome {
        case .unreachable(let error)?:
            return [networkFinding(error, host: host, via: via)]
        case .answered(let answer)?:
            out.append(
                Finding(
                    "reachable", .ok,
                    "the token endpoint at \(host) answered a token request with HTTP \(answer.status)"
                        + (via.map { " through \($0)" } ?? "")))
            out += answerFindings(answer, host: host, via: via)
            // Something else answered: that says nothing of the credentials.
            if out.contains(where: { $0.check == "proxy" || $0.check == "endpoint" }) { return out }
        case nil:
            out.append(
                Finding(
                    "reachable", .skipped,
                    "the agent made the token request with the grant's credentials: only its outcome is known here"))
        }
        out.append(credentialsFinding(result))
        return out
    }

    /// What the token request said of the grant's credentials.
    func credentialsFinding(_ result: Result<FreshGrant, VaultError>) -> Finding {
        let replace = Remedies.hint(
            .replaceCredentials(provider: grant.provider, grant: name, serviceAccount: grant.kind == .serviceAccount))
        let error: VaultError
        switch result {
        case .success(let fresh):
            let until = fresh.grant.expiresAt.map { " until \(Format.timestamp($0))" } ?? ""
            return Finding(
                "credentials", .ok,
                (fresh.refreshed
                    ? "the provider took the grant's credentials: a new access token, valid\(until)"
                    : "another process had just got a new access token with the grant's credentials, valid\(until)"))
        case .failure(let failure):
            error = failure
        }
        switch error.code {
        case .dead:
            return Finding("credentials", .fail, error.reason, remedy: error.remedy.map(Remedies.hint) ?? replace)
        case .invalidClient:
            return Finding("credentials", .fail, error.reason, remedy: replace)
        case .transient, .busy:
            return Finding(
                "credentials", .warn, error.reason, remedy: error.remedy.map(Remedies.hint) ?? "try again later")
        default:
            return Finding("credentials", .fail, error.reason, remedy: error.remedy.map(Remedies.hint))
        }
    }

    // MARK: The tokens

    /// The access token at the userinfo endpoint while it is valid, or the
    /// refresh the grant needs anyway; a fresh token is never refreshed.
    func tokenFindings(reachable: Bool) -> [Finding] {
        guard !grant.dead else {
            return [Finding("refresh", .skipped, "the grant is dead: a refresh would be refused")]
        }
        if grant.isUsable(at: now) {
            var out = [Finding("refresh", .skipped, freshTokenDetail)]
            if reachable, let userinfo = grant.providerConfiguration?.userinfoEndpoint, grant.kind == .oauth2 {
                out.insert(accessTokenFinding(userinfo), at: 0)
            }
            return out
        }
        guard grant.canAuthorize(at: now) else { return [] }
        guard reachable else {
            return [Finding("refresh", .skipped, "the provider cannot be reached, so the grant cannot be refreshed")]
        }
        do {
            let fresh = try refresher.freshGrant(name)
            let until = fresh.grant.expiresAt.map { " until \(Format.timestamp($0))" } ?? ""
            return [
                Finding(
                    "refresh", .ok,
                    (fresh.refreshed ? "refreshed: " : "another process had just refreshed it: ")
                        + "the access token is valid\(until)")
            ]
        } catch {
            return refreshFailure(error)
        }
    }

    /// Why a fresh grant is not refreshed, in the words of its kind: only
    /// a grant with a refresh token has one to spend.
    var freshTokenDetail: String {
        if grant.refreshToken == nil {
            return "the access token is fresh; the grant has no refresh token, so it works until the token expires"
        }
        return "the access token is fresh: doctor does not spend the refresh token"
    }

    func accessTokenFinding(_ endpoint: String) -> Finding {
        let status: Int
        do {
            status = try TokenRefresher.userinfoStatus(endpoint, grant: grant, transport: refresher.transport)
        } catch {
            return Finding("access-token", .warn, "the userinfo request failed: \(error.reason)")
        }
        switch status {
        case 200..<300:
            return Finding("access-token", .ok, "the userinfo endpoint accepts the access token (HTTP \(status))")
        case 401:
            return Finding(
                "access-token", .fail,
                "the userinfo endpoint refused the access token before it expired (HTTP 401): revoked, "
                    + "or the account's password or permissions changed",
                remedy:
                    "'vault refresh \(name)' gets a new one; if the provider refuses that too, run 'vault add \(name)'")
        case 429, 500...599:
            return Finding("access-token", .warn, "the userinfo endpoint is unavailable (HTTP \(status))")
        default:
            return Finding("access-token", .warn, "the userinfo endpoint answered HTTP \(status)")
        }
    }

    func refreshFailure(_ error: VaultError) -> [Finding] {
        let busy = error.code == .transient || error.code == .busy
        var out = [
            Finding(
                "refresh", .fail, error.reason,
                remedy: error.remedy.map(Remedies.hint) ?? (busy ? "try again later" : nil))
        ]
        // The refusal just marked it dead: perhaps the week of a testing app ran out.
        if error.code == .dead, let marked = try? refresher.vault.load(name), let testing = googleTestingFinding(marked)
        {
            out.append(testing)
        }
        return out
    }
}
