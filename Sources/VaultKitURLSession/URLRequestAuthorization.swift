public import VaultKit

// URLRequest support for apps that send with URLSession. A module of its
// own so that VaultKit itself links no FoundationNetworking (on Linux it
// brings libcurl in at load time, which VaultKit loads only when first
// used); an app that wants it adds the `VaultKitURLSession` product.
#if canImport(FoundationNetworking)
    internal import Foundation
    public import FoundationNetworking
#else
    public import Foundation
#endif

extension TokenSession {
    /// GTMAppAuth's `authorizeRequest` for a `URLRequest`: sets
    /// `Authorization: Bearer` to a fresh token of `name` (or, for a grant
    /// bound to a DPoP key, `Authorization: DPoP` and its `DPoP` proof). The same rules
    /// as `authorize(_:with:)` for `HTTPRequest`: https, or plain http only
    /// to a loopback address; anything else is refused before any token is
    /// read.
    public func authorize(_ request: inout URLRequest, with name: String, dpopNonce: String? = nil)
        async throws(VaultError)
    {
        guard let url = request.url, let scheme = url.scheme?.lowercased() else {
            throw VaultError(.invalidInput, "the request has no absolute url")
        }
        // Both readings of the address must agree that it may carry a token:
        // vault's own and the one URLSession will connect by.
        let foundationHost = url.host.map { $0.hasPrefix("[") || !$0.contains(":") ? $0 : "[\($0)]" } ?? ""
        guard scheme == "https" || (scheme == "http" && URLPolicy.isLoopback(foundationHost)) else {
            throw VaultError(
                .invalidInput,
                scheme == "http"
                    ? "plain http is refused for \(foundationHost); use https"
                    : "the url scheme '\(scheme)' is refused; use https")
        }
        var probe = HTTPRequest(method: request.httpMethod ?? "GET", url: url.absoluteString)
        try await authorize(&probe, with: name, dpopNonce: dpopNonce)
        guard let value = probe.headers.last(where: { $0.name == "Authorization" })?.value else {
            throw VaultError(.internalError, "no authorization was added")
        }
        request.setValue(value, forHTTPHeaderField: "Authorization")
        request.setValue(probe.headers.last(where: { $0.name == "DPoP" })?.value, forHTTPHeaderField: "DPoP")
    }
}
