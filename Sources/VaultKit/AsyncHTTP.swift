public import VaultCore
public import VaultHTTP

extension HTTPTransport where Self: Sendable {
    /// Performs one exchange on one of VaultKit's threads, off Swift's
    /// cooperative pool (libcurl blocks until the answer is in). A task cancelled
    /// before the exchange starts gets `cancelled` and nothing is sent;
    /// once it has started, the exchange runs to its end (at most
    /// `request.timeout` seconds) and its answer is returned, since a
    /// request that reached the server may have changed something there.
    /// Failures come as `VaultError`: `.transient` for the network, with
    /// the transport's reason.
    public func send(_ request: HTTPRequest) async throws(VaultError) -> HTTPResponse {
        try await blocking { () throws(VaultError) in
            do throws(HTTPError) { return try self.send(request) } catch { throw error.vaultError("the request") }
        }
    }
}

extension HTTPTransport {
    /// The blocking `send(_:)` under a name async code can reach: there,
    /// `send` is the async form (on VaultKit's threads). For code that runs
    /// on a thread of its own and may block it until the answer is in
    /// (at most `request.timeout` seconds); never on Swift's cooperative
    /// pool. Failures come as the transport's `HTTPError`.
    public func sendBlocking(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        try send(request)
    }
}

extension Discovery {
    /// `provider(name:issuer:transport:)` on one of VaultKit's threads, off
    /// Swift's cooperative pool: fetches the issuer's discovery document and builds
    /// a provider called `name` from it. A task cancelled before the
    /// request starts gets `cancelled`.
    public static func provider(
        name: String, issuer: String, transport: any HTTPTransport & Sendable
    ) async throws(VaultError) -> Provider {
        try await blocking { () throws(VaultError) in
            try Discovery.provider(name: name, issuer: issuer, transport: transport as any HTTPTransport)
        }
    }
}
