import Foundation
import VaultCrypto
import VaultHTTP

/// The OAuth provider of a simulation: a token endpoint whose refresh
/// tokens rotate (or, for some grants, do not), which revokes a whole
/// family of tokens when a spent refresh token comes back (Auth0, Okta,
/// Keycloak, glewlwyd's one-use tokens), and which keeps the truth about
/// every token it issued: its family, its expiry by true time, whether it
/// was spent and by whom.
final class SimProvider: @unchecked Sendable {
    static let tokenEndpoint = "http://127.0.0.1:9/token"

    struct Family {
        var rotates: Bool
        var lifetime: Double
        /// The refresh token to present next; nil for a grant without one.
        var current: String?
        var revoked = false
        var refreshes = 0
    }

    struct Token {
        var family: Int
        var generation: Int
        /// An access token's expiry, by true time.
        var expires: Double?
        /// A refresh token's first spending: by which process, and whether
        /// that process refreshed without the store or was killed before
        /// it stored what it got.
        var spentBy: Actor?
    }

    /// A spent refresh token presented again.
    struct Reuse {
        var family: Int
        var generation: Int
        var presenter: String
        /// Why the design allows it, or nil when nothing does.
        var excuse: String?
    }

    private(set) var families: [Family] = []
    private(set) var tokens: [String: Token] = [:]
    private(set) var reuses: [Reuse] = []
    private(set) var refreshes = 0
    private var serial = 0

    /// A new authorization: a family with its first tokens, as the token
    /// response the person imports.
    func authorize(now: Double, rotates: Bool, refreshable: Bool, lifetime: Double) -> (
        family: Int, access: String, refresh: String?
    ) {
        let family = families.count
        families.append(Family(rotates: rotates, lifetime: lifetime))
        let access = issue(family, access: true, now: now)
        let refresh = refreshable ? issue(family, access: false, now: now) : nil
        families[family].current = refresh
        return (family, access, refresh)
    }

    /// The family a token belongs to, if this provider issued it.
    func family(of token: String?) -> Int? { token.flatMap { tokens[$0]?.family } }

    /// A token's place in its family's history.
    func generation(of token: String?) -> Int? { token.flatMap { tokens[$0]?.generation } }

    /// True when the family's newest refresh token is `token`.
    func isNewest(_ token: String?) -> Bool {
        guard let token, let family = family(of: token) else { return false }
        return families[family].current == token
    }

    func isRevoked(_ family: Int) -> Bool { families[family].revoked }

    /// The family's newest refresh token.
    func newest(of family: Int) -> String? { families[family].current }

    /// The process that first spent refresh token `token`, if it was spent.
    func spender(of token: String) -> Actor? { tokens[token]?.spentBy }

    /// How an access token stands at `now`.
    enum Standing: Equatable {
        case valid
        case expired(by: Double)
        case revoked
        case unknown
    }

    func standing(ofAccess token: String?, now: Double) -> Standing {
        guard let token, let info = tokens[token], let expires = info.expires else { return .unknown }
        if families[info.family].revoked { return .revoked }
        return expires >= now ? .valid : .expired(by: now - expires)
    }

    /// The token endpoint: a refresh_token grant, from `actor` of `machine`.
    func handle(_ request: HTTPRequest, from actor: Actor?, machine: String, now: Double) -> HTTPResponse {
        let form = SimProvider.form(request.body?.unsafeCopyToArray() ?? [])
        guard form["grant_type"] == "refresh_token", let presented = form["refresh_token"] else {
            return answer(400, ["error": "unsupported_grant_type"])
        }
        guard let info = tokens[presented], info.expires == nil else { return answer(400, ["error": "invalid_grant"]) }
        var family = families[info.family]
        if family.revoked { return answer(400, ["error": "invalid_grant"]) }
        if family.rotates && family.current != presented {
            // A spent refresh token came back: the whole family goes.
            families[info.family].revoked = true
            let first = info.spentBy
            // No store fault excuses a reuse (docs/sync.md, "Refresh rights
            // while the store is away"); a process killed between the
            // provider's answer and storing it leaves nothing but the spent
            // token, which is all any machine can present then.
            let excuse: String? =
                first?.crashed == true && first?.storedAnswer == false
                ? "spent first by a process killed before it stored the answer" : nil
            reuses.append(
                Reuse(
                    family: info.family, generation: info.generation, presenter: "\(machine) (\(actor?.label ?? "?"))",
                    excuse: excuse))
            return answer(400, ["error": "invalid_grant", "error_description": "refresh token reused"])
        }
        refreshes += 1
        family.refreshes += 1
        let access = issue(info.family, access: true, now: now)
        var body: [String: Any] = [
            "access_token": access, "token_type": "Bearer", "expires_in": Int(family.lifetime),
        ]
        actor?.spentRefreshToken = true
        if family.rotates {
            tokens[presented]?.spentBy = actor
            let next = issue(info.family, access: false, now: now)
            family.current = next
            body["refresh_token"] = next
        }
        families[info.family] = family
        return answer(200, body)
    }

    private func issue(_ family: Int, access: Bool, now: Double) -> String {
        serial += 1
        let generation = families[family].refreshes
        let token = (access ? "sim-access-" : "sim-refresh-") + "\(family)-\(generation)-\(serial)"
        tokens[token] = Token(
            family: family, generation: generation, expires: access ? now + families[family].lifetime : nil)
        return token
    }

    private func answer(_ status: Int, _ body: [String: Any]) -> HTTPResponse {
        let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
        return HTTPResponse(
            status: status, headers: [("content-type", "application/json"), ("cache-control", "no-store")],
            body: SimStore.secure(Array(data)))
    }

    /// A form body's fields (application/x-www-form-urlencoded).
    static func form(_ body: [UInt8]) -> [String: String] {
        var out: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            out[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return out
    }
}
