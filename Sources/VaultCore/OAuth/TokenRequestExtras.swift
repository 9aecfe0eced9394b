/// Parameters and headers an app adds to token requests (AppAuth's
/// `additionalParameters` and `additionalHeaders`): an audience, a
/// resource, a header a gateway wants. They can never stand in for the
/// protocol's own fields or headers, which are refused when made.
public struct TokenRequestExtras: Sendable, Equatable {
    /// Form parameters added to the request body, after the protocol's own.
    public let parameters: [String: String]
    /// Header fields added to the request.
    public let headers: [String: String]

    /// Nothing added.
    public static let none = TokenRequestExtras(checked: [:], [:])

    /// The form fields the token endpoint protocol itself sends: the grant
    /// type, its code or token, PKCE, the client and its authentication.
    public static let protocolParameters: Set<String> = [
        "grant_type", "code", "code_verifier", "redirect_uri", "client_id", "client_secret", "client_assertion",
        "client_assertion_type", "refresh_token", "device_code", "scope", "assertion", "username", "password",
    ]

    /// Header fields the request sets itself, or that a transport must own.
    public static let protocolHeaders: Set<String> = [
        "authorization", "content-type", "content-length", "host", "transfer-encoding", "connection", "accept",
        "cookie",
    ]

    /// Checks and keeps `parameters` and `headers`: a protocol field
    /// (`protocolParameters`), a protocol header (`protocolHeaders`), a
    /// header name that is not an HTTP token, or a name or value with a
    /// line break or another control character is refused.
    public init(parameters: [String: String] = [:], headers: [String: String] = [:]) throws(VaultError) {
        for (name, value) in parameters {
            guard !name.isEmpty, !TokenRequestExtras.hasControl(name), !TokenRequestExtras.hasControl(value) else {
                throw VaultError(
                    .invalidInput, "an extra token request parameter has an empty name or a control character")
            }
            guard !TokenRequestExtras.protocolParameters.contains(name.lowercased()) else {
                throw VaultError(
                    .invalidInput,
                    "the token request parameter '\(name)' is the protocol's own and cannot be set as an extra")
            }
        }
        for (name, value) in headers {
            guard TokenRequestExtras.isToken(name) else {
                throw VaultError(.invalidInput, "an extra header name is not an HTTP field name")
            }
            guard !TokenRequestExtras.protocolHeaders.contains(name.lowercased()) else {
                throw VaultError(
                    .invalidInput, "the header '\(name)' is set by the request itself and cannot be an extra")
            }
            guard !TokenRequestExtras.hasControl(value, allowingTab: true) else {
                throw VaultError(.invalidInput, "the extra header '\(name)' has a line break or a control character")
            }
        }
        self.init(checked: parameters, headers)
    }

    private init(checked parameters: [String: String], _ headers: [String: String]) {
        self.parameters = parameters
        self.headers = headers
    }

    /// True when nothing is added.
    public var isEmpty: Bool { parameters.isEmpty && headers.isEmpty }

    /// RFC 9110's `token`: the grammar of a field name.
    static func isToken(_ s: String) -> Bool {
        !s.isEmpty
            && s.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a)
                    || "!#$%&'*+-.^_`|~".utf8.contains(b)
            }
    }

    /// True when `s` holds a C0 control character (a tab allowed when
    /// asked), DEL, or a Unicode line or paragraph separator.
    static func hasControl(_ s: String, allowingTab: Bool = false) -> Bool {
        s.unicodeScalars.contains { c in
            (c.value < 0x20 && !(allowingTab && c == "\t")) || c.value == 0x7f || c.value == 0x85
                || c.value == 0x2028 || c.value == 0x2029
        }
    }

    /// The parameters in a fixed order, after `form`.
    func adding(to form: [(String, String)]) -> [(String, String)] {
        form + parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}
