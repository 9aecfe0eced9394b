/// Where a grant's secrets go (docs/threat-model.md, "Where secrets go"):
/// a grant's endpoints and its client travel together, as one unit with one
/// known source. The user's configured client is never combined with
/// endpoints from anywhere else, and a grant is authorized again only at the
/// endpoints of its configured provider.
extension ProviderConfiguration {
    /// The endpoint fields, by their provider-file names.
    nonisolated(unsafe) package static let endpointFields:
        [(name: String, path: KeyPath<ProviderConfiguration, String?>)] =
            [
                ("issuer", \.issuer), ("authorization_endpoint", \.authorizationEndpoint),
                ("token_endpoint", \.tokenEndpoint), ("device_authorization_endpoint", \.deviceAuthorizationEndpoint),
                ("revocation_endpoint", \.revocationEndpoint), ("userinfo_endpoint", \.userinfoEndpoint),
            ]

    /// True when this configuration names any endpoint of its own.
    package var namesEndpoints: Bool { Self.endpointFields.contains { self[keyPath: $0.path] != nil } }

    /// The endpoints this configuration names that the configured provider
    /// `p` does not vouch for: the field, the address named here, and the
    /// provider's (nil when it has none). A placeholder of the provider's
    /// (`{tenant}`) matches any one path segment.
    package func endpoints(notOf p: Provider) -> [(field: String, own: String, provider: String?)] {
        let theirs = p.storedConfiguration
        var out: [(field: String, own: String, provider: String?)] = []
        for (name, path) in Self.endpointFields {
            guard let own = self[keyPath: path] else { continue }
            let template = theirs[keyPath: path]
            if let template, EndpointTemplate(template).matches(own) { continue }
            out.append((name, own, template))
        }
        return out
    }
}

extension Provider {
    /// What `endpoints_source` says of this provider's endpoints and client.
    package var endpointsSourceLabel: String? {
        if let storedSource { return storedSource }
        if source.hasPrefix("preset") { return "preset" }
        if source.hasPrefix("discovered") { return "discovery" }
        if source == "the app" { return "app" }
        return "provider file"
    }
}

/// An endpoint of a provider file, `{name}` placeholders included.
struct EndpointTemplate {
    enum Part: Equatable {
        case literal(Substring)
        case variable
    }

    let parts: [Part]

    init(_ template: String) {
        var parts: [Part] = []
        var rest = template[...]
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            if open > rest.startIndex { parts.append(.literal(rest[..<open])) }
            parts.append(.variable)
            rest = rest[rest.index(after: close)...]
        }
        if !rest.isEmpty { parts.append(.literal(rest)) }
        self.parts = parts
    }

    /// True when `url` is the template with each placeholder filled by one
    /// non-empty path segment (no `/`, `?` or `#`).
    func matches(_ url: String) -> Bool { Self.match(url[...], parts[...]) }

    private static func match(_ s: Substring, _ parts: ArraySlice<Part>) -> Bool {
        guard let first = parts.first else { return s.isEmpty }
        switch first {
        case .literal(let l):
            guard s.hasPrefix(l) else { return false }
            return match(s.dropFirst(l.count), parts.dropFirst())
        case .variable:
            var i = s.startIndex
            while i < s.endIndex, !"/?#".contains(s[i]) {
                i = s.index(after: i)
                if match(s[i...], parts.dropFirst()) { return true }
            }
            return false
        }
    }
}
