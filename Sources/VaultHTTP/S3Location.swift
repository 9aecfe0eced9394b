/// Where a sync store lives in an S3-compatible object store (AWS S3, Ceph
/// RGW, MinIO, R2, ...): a bucket, a prefix in it, the endpoint, the
/// signing region and how buckets are addressed. Kept as one string,
/// `canonicalURL` (`s3://BUCKET/PREFIX?endpoint=...&region=...&style=...`),
/// which is what the sync settings store; every part is checked against
/// its grammar before it goes into a URL.
public struct S3Location: Equatable, Sendable {
    /// The bucket's name.
    public let bucket: String
    /// The folder inside the bucket (segments joined by `/`), or empty.
    public let prefix: String
    /// `scheme://host[:port]`, no path.
    public let endpoint: String
    /// The region in the signatures' scope.
    public let region: String
    /// Path-style addressing (`ENDPOINT/BUCKET/...`) rather than
    /// virtual-hosted (`BUCKET.HOST/...`).
    public let pathStyle: Bool

    /// The region of AWS's default endpoint, and of signatures when none is given.
    public static let defaultRegion = "us-east-1"

    /// True for a name of AWS's region grammar (`us-east-1`,
    /// `ap-southeast-2`, `us-gov-west-1`): only such a region has an
    /// `s3.REGION.amazonaws.com`. Other S3 servers name theirs as they like
    /// (`default`, `garage`, `auto`).
    package static func isAWSRegion(_ region: String) -> Bool {
        let parts = region.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 3, let number = parts.last, !number.isEmpty,
            number.utf8.allSatisfy({ (0x30...0x39).contains($0) })
        else { return false }
        return parts.dropLast().allSatisfy { part in
            !part.isEmpty && part.utf8.allSatisfy { (0x61...0x7a).contains($0) }
        } && parts[0].utf8.count == 2
    }

    /// True for a store URL of this kind (`s3://`).
    public static func isS3(_ url: String) -> Bool { url.hasPrefix("s3://") }

    /// A location from what the user gives: `s3://BUCKET[/PREFIX]`, an
    /// endpoint (default AWS's for the region), a region (default
    /// us-east-1) and whether to address buckets by path. Endpoints that
    /// are IP addresses or `localhost`, and buckets with dots over https,
    /// are always addressed by path (no host name could carry the bucket).
    public init(url: String, endpoint: String?, region: String?, pathStyle: Bool) throws(ObjectStore.Failure) {
        guard S3Location.isS3(url) else { throw ObjectStore.Failure(.invalid, "an S3 store url starts with s3://") }
        let rest = url.dropFirst("s3://".count)
        guard !rest.contains("?"), !rest.contains("#"), !rest.contains("@") else {
            throw ObjectStore.Failure(.invalid, "an S3 store url is s3://BUCKET/PREFIX, with no query or user")
        }
        let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let region = region ?? S3Location.defaultRegion
        let endpoint = endpoint ?? "https://s3.\(region).amazonaws.com"
        try self.init(
            bucket: String(parts[0]), prefix: parts.count > 1 ? String(parts[1]) : "", endpoint: endpoint,
            region: region, pathStyle: pathStyle)
    }

    /// A location from its `canonicalURL`.
    public init(canonical: String) throws(ObjectStore.Failure) {
        let (head, query) = S3Location.split(canonical)
        var settings: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { throw ObjectStore.Failure(.invalid, "the S3 store settings are malformed") }
            settings[String(kv[0])] = S3Location.unescaped(String(kv[1]))
        }
        guard let endpoint = settings["endpoint"], let region = settings["region"], let style = settings["style"],
            style == "path" || style == "virtual"
        else { throw ObjectStore.Failure(.invalid, "the S3 store settings are incomplete") }
        try self.init(url: head, endpoint: endpoint, region: region, pathStyle: style == "path")
    }

    private init(bucket: String, prefix: String, endpoint: String, region: String, pathStyle: Bool)
        throws(ObjectStore.Failure)
    {
        let trimmed = prefix.split(separator: "/").map(String.init)
        guard S3Location.validBucket(bucket) else {
            throw ObjectStore.Failure(
                .invalid, "'\(bucket)' is not a bucket name (3 to 63 lower-case letters, digits, dots and hyphens)")
        }
        guard prefix.utf8.count <= 512, trimmed.allSatisfy(S3Location.validSegment) else {
            throw ObjectStore.Failure(
                .invalid, "the folder in the bucket may use letters, digits, '.', '_' and '-' between slashes")
        }
        guard region.utf8.count <= 64, !region.isEmpty, region.utf8.allSatisfy(S3Location.isRegionByte) else {
            throw ObjectStore.Failure(.invalid, "'\(region)' is not a region name")
        }
        var origin = endpoint
        while origin.hasSuffix("/") { origin.removeLast() }
        let safe = origin.utf8.allSatisfy {
            ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e
                || $0 == 0x2d || $0 == 0x3a || $0 == 0x2f || $0 == 0x5b || $0 == 0x5d
        }
        guard safe, let (_, host) = URLPolicy.schemeAndHost(origin), !host.isEmpty,
            origin.split(separator: "/").count == 2
        else {
            throw ObjectStore.Failure(.invalid, "the endpoint is scheme://host[:port], with no path, query or user")
        }
        do { try URLPolicy.check(origin + "/") } catch { throw ObjectStore.Failure(.invalid, error.reason) }
        let hostIsAddress =
            host == "localhost" || host.hasPrefix("[")
            || host.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e }
        self.bucket = bucket
        self.prefix = trimmed.joined(separator: "/")
        self.endpoint = origin
        self.region = region
        self.pathStyle = pathStyle || hostIsAddress || (bucket.contains(".") && origin.hasPrefix("https://"))
    }

    /// The string the sync settings keep.
    public var canonicalURL: String {
        "s3://\(bucket)\(prefix.isEmpty ? "" : "/" + prefix)?endpoint=\(S3Location.escaped(endpoint))"
            + "&region=\(region)&style=\(pathStyle ? "path" : "virtual")"
    }

    /// What the user is shown: `s3://BUCKET/PREFIX at ENDPOINT (region R)`.
    public var displayName: String {
        "s3://\(bucket)\(prefix.isEmpty ? "" : "/" + prefix) at \(endpoint) (region \(region)\(pathStyle ? ", path style" : ""))"
    }

    /// The bucket's own URL, ending in `/`.
    public var bucketURL: String {
        if pathStyle { return endpoint + "/" + bucket + "/" }
        let scheme = endpoint.prefix { $0 != ":" }
        return "\(scheme)://\(bucket).\(endpoint.dropFirst(scheme.count + 3))/"
    }

    /// The URL the objects' names are appended to, ending in `/`.
    public var objectsURL: String { bucketURL + (prefix.isEmpty ? "" : prefix + "/") }

    // MARK: Grammar

    static func validBucket(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        func alnum(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) }
        return (3...63).contains(bytes.count) && alnum(bytes.first!) && alnum(bytes.last!)
            && bytes.allSatisfy { alnum($0) || $0 == 0x2e || $0 == 0x2d } && !name.contains("..")
    }

    static func validSegment(_ segment: String) -> Bool {
        segment != "." && segment != ".."
            && segment.utf8.allSatisfy {
                ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e
                    || $0 == 0x5f || $0 == 0x2d
            }
    }

    static func isRegionByte(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || b == 0x2d }

    private static func split(_ canonical: String) -> (String, Substring) {
        guard let q = canonical.firstIndex(of: "?") else { return (canonical, "") }
        return (String(canonical[..<q]), canonical[canonical.index(after: q)...])
    }

    /// The endpoint inside the canonical URL: `%`, `&`, `=` and `?` escaped.
    private static func escaped(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "%": out += "%25"
            case "&": out += "%26"
            case "=": out += "%3D"
            case "?": out += "%3F"
            default: out.append(c)
            }
        }
        return out
    }

    private static func unescaped(_ s: String) -> String {
        let codes: [String: Character] = ["%25": "%", "%26": "&", "%3D": "=", "%3F": "?"]
        var out = ""
        var rest = Substring(s)
        while let c = rest.first {
            if c == "%", let decoded = codes[String(rest.prefix(3))] {
                out.append(decoded)
                rest = rest.dropFirst(3)
            } else {
                out.append(c)
                rest = rest.dropFirst()
            }
        }
        return out
    }
}
