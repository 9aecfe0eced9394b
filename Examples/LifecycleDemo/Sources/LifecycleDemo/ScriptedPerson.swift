import Foundation
import VaultKit

/// The test provider's user and client, from the settings file that
/// Tools/testservers/glewlwyd.py writes.
struct ProviderSettings: Decodable {
    let base, issuer, redirect_uri, user, password, email, confidential_client, client_secret: String

    static func load(path: String) throws -> ProviderSettings {
        try JSONDecoder().decode(ProviderSettings.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }
}

/// Plays the person at the browser, through glewlwyd's own API: logs in,
/// consents, and pastes the address the browser ends on. A real app shows
/// the page instead.
final class ScriptedPerson: AuthorizationUI {
    let settings: ProviderSettings
    private let http = CurlTransport()
    private var endedOn: String?

    init(_ settings: ProviderSettings) { self.settings = settings }

    func openBrowser(_ url: String) {
        endedOn = try? logInAndConsent(url)
    }

    func show(_ message: String) {}

    func readPasted(prompt: String) throws(VaultError) -> String {
        guard let endedOn else { throw VaultError(.refused, "the person could not log in") }
        return endedOn
    }

    /// Revokes the app's refresh token at the provider (RFC 7009), as the
    /// provider's account page would when the person removes the app.
    func revoke(_ refreshToken: String) async throws {
        let client = Data("\(settings.confidential_client):\(settings.client_secret)".utf8).base64EncodedString()
        let form = FormEncoding.encode([("token", refreshToken), ("token_type_hint", "refresh_token")])
        var request = HTTPRequest(method: "POST", url: settings.issuer + "/revoke")
        request.headers = [("Authorization", "Basic \(client)"), ("Content-Type", "application/x-www-form-urlencoded")]
        request.body = try SecureBytes(copying: Array(form.utf8))
        let status = try await http.send(request).status
        guard status == 200 else { throw VaultError(.badResponse, "the revocation answered HTTP \(status)") }
    }

    private func logInAndConsent(_ url: String) throws -> String? {
        let login = try send("POST", "/api/auth/", ["username": settings.user, "password": settings.password])
        guard let cookie = login.header("set-cookie")?.split(separator: ";").first.map(String.init) else { return nil }
        let query = URLComponents(string: url)?.queryItems ?? []
        let client = query.first { $0.name == "client_id" }?.value ?? ""
        let scope = query.first { $0.name == "scope" }?.value ?? "openid"
        _ = try send("PUT", "/api/auth/grant/\(client)", ["scope": scope], cookie: cookie)
        return try send("GET", url + "&g_continue", cookie: cookie).header("location")
    }

    private func send(_ method: String, _ path: String, _ json: [String: String]? = nil, cookie: String? = nil)
        throws -> HTTPResponse
    {
        var request = HTTPRequest(method: method, url: path.hasPrefix("http") ? path : settings.base + path)
        if let json {
            request.headers.append(("Content-Type", "application/json"))
            request.body = try SecureBytes(copying: JSONEncoder().encode(json))
        }
        if let cookie { request.headers.append(("Cookie", cookie)) }
        return try http.send(request)
    }
}
