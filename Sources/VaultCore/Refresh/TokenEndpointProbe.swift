package import FoundationEssentials
import VaultCrypto
package import VaultHTTP

/// A look at a grant's token endpoint that spends nothing: one refresh
/// request with the grant's own client authentication and a refresh token
/// that cannot exist. The provider checks the client first (RFC 6749
/// section 5.2), so its answer says whether the network reaches it, whether
/// something else answers in its place, what its clock says, and whether
/// it still accepts the client, while the grant's refresh token stays
/// unsent. For diagnosis (`vault doctor`), never for a decision.
package struct TokenEndpointProbe {
    /// The refresh token sent: no provider issued it.
    package static let placeholderToken = "vault-doctor-probe-not-a-refresh-token"
    /// Seconds the probe may take.
    package static let timeout: Double = 15

    /// What the probe saw.
    package enum Outcome {
        /// The request failed before any answer.
        case unreachable(HTTPError)
        /// Something answered.
        case answered(Answer)
    }

    /// An answer, as far as a diagnosis needs it; never its body.
    package struct Answer {
        /// The HTTP status.
        package let status: Int
        /// The media type, without parameters, lower-cased.
        package let mediaType: String?
        /// The answer's `Date`: the provider's clock.
        package let date: Date?
        /// What the refresher would make of the answer (nil for a success,
        /// which would mean the provider took a token it never issued).
        package let verdict: VaultError?
        /// The OAuth error code as the provider sent it, before aliases.
        package let rawError: String?
        /// The provider's `error_description`, cleaned for people.
        package let errorDescription: String?
        /// Whether the request authenticated the grant's client.
        package let clientChecked: Bool
        /// For a redirect (3xx), the host it sends to: the endpoint's own
        /// host for a relative Location, nil without one.
        package var redirectHost: String? = nil
    }

    /// The host a redirect from `endpoint` sends to, for diagnosis.
    static func redirectHost(status: Int, location: String?, endpoint: String) -> String? {
        guard (300...399).contains(status), let location else { return nil }
        let target = ProviderText.sanitized(location, limit: 300)
        return URLPolicy.schemeAndHost(target)?.1 ?? URLPolicy.schemeAndHost(endpoint)?.1
    }

    /// Probes the token endpoint `g` keeps, or nil when it keeps none. A
    /// grant without a client to authenticate with, or one that refreshes
    /// nothing (OAuth 1.0a, machine grants), gets a plain GET instead,
    /// which says nothing about the client (its verdict is nil).
    package static func probe(_ g: Grant, name: String, transport: any HTTPTransport) throws(VaultError) -> Outcome? {
        guard let config = g.providerConfiguration, let endpoint = config.tokenEndpoint else { return nil }
        guard g.kind == .oauth2, config.clientID != nil else {
            var request = HTTPRequest(method: "GET", url: endpoint, headers: [("Accept", "application/json")])
            request.timeout = timeout
            do {
                let response = try transport.send(request)
                return .answered(
                    Answer(
                        status: response.status, mediaType: mediaType(response.header("content-type")),
                        date: response.header("date").flatMap(HTTPDate.parse), verdict: nil, rawError: nil,
                        errorDescription: nil, clientChecked: false,
                        redirectHost: redirectHost(
                            status: response.status, location: response.header("location"), endpoint: endpoint)))
            } catch {
                return .unreachable(error)
            }
        }
        let recorder = ProbeTransport(inner: transport)
        let client = TokenEndpoint(transport: recorder, client: OAuthClient(grant: g, config))
        let what = "probing the token endpoint of '\(name)'"
        let answer: TokenEndpoint.Answer
        do {
            answer = try client.send(
                endpoint, form: [("grant_type", "refresh_token"), ("refresh_token", placeholderToken)], what: what,
                timeout: timeout)
        } catch {
            if let failure = recorder.failure { return .unreachable(failure) }
            throw error
        }
        var raw: String?
        var description: String?
        if case .error(let code, let said) = OAuthErrorBody(answer.body) { (raw, description) = (code, said) }
        return .answered(
            Answer(
                status: answer.status, mediaType: mediaType(answer.contentType),
                date: answer.date.flatMap(HTTPDate.parse),
                verdict: TokenEndpoint.classify(
                    answer, what: what, quirks: OAuthClient(config, providerName: g.provider).quirks),
                rawError: raw, errorDescription: description, clientChecked: true,
                redirectHost: redirectHost(status: answer.status, location: answer.location, endpoint: endpoint)))
    }
}

extension TokenEndpointProbe {
    /// A machine grant's probe: the one token request `TokenRefresher.check`
    /// makes, a new token minted with the grant's credentials and stored as
    /// any refresh stores it. A machine grant has no refresh token to spend,
    /// and its provider mints tokens on request, so this costs nothing; its
    /// answer says what the probe of a person's grant says (network, proxy,
    /// clock) and whether the provider still takes the credentials, which a
    /// GET of a token endpoint (POST only, RFC 6749 section 3.2) cannot. A
    /// refusal marks the grant dead, as there. The outcome is nil when no
    /// request was seen here (the agent made it).
    package static func mint(_ name: String, with refresher: TokenRefresher) -> (
        Outcome?, Result<FreshGrant, VaultError>
    ) {
        let recorder = ProbeTransport(inner: refresher.transport)
        var minting = TokenRefresher(vault: refresher.vault, transport: recorder, coordinator: refresher.coordinator)
        minting.observer = refresher.observer
        minting.refreshExtras = refresher.refreshExtras
        let result: Result<FreshGrant, VaultError>
        do throws(VaultError) {
            result = .success(try minting.freshGrant(name, forceRefresh: true))
        } catch {
            result = .failure(error)
        }
        if let failure = recorder.failure { return (.unreachable(failure), result) }
        guard let response = recorder.response else { return (nil, result) }
        let endpoint = recorder.url ?? ""
        let answer = Answer(
            status: response.status, mediaType: mediaType(response.contentType),
            date: response.date.flatMap(HTTPDate.parse), verdict: result.failure, rawError: nil,
            errorDescription: nil, clientChecked: true,
            redirectHost: redirectHost(status: response.status, location: response.location, endpoint: endpoint))
        return (.answered(answer), result)
    }
}

extension Result {
    /// The error of a failure, nil for a success.
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// A Content-Type's media type, lower-cased, without parameters.
private func mediaType(_ header: String?) -> String? {
    header.map { ProviderText.sanitized(String($0.prefix { $0 != ";" }), limit: 60).lowercased() }
}

/// Passes requests on and keeps the transport's own error, which the token
/// endpoint client turns into a `VaultError` without its cause, or the
/// last answer and where it came from.
private final class ProbeTransport: HTTPTransport {
    let inner: any HTTPTransport
    private(set) var failure: HTTPError?
    /// The last answer's status and the header fields a diagnosis reads
    /// (never its body, which holds the token).
    private(set) var response: (status: Int, contentType: String?, date: String?, location: String?)?
    private(set) var url: String?

    init(inner: any HTTPTransport) { self.inner = inner }

    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        url = request.url
        do {
            let answer = try inner.send(request)
            response = (
                answer.status, answer.header("content-type"), answer.header("date"), answer.header("location")
            )
            failure = nil
            return answer
        } catch {
            response = nil
            failure = error
            throw error
        }
    }
}
