public import VaultCrypto

/// A folder of an S3 bucket (AWS S3, Ceph RGW, MinIO, R2, ...), each
/// request signed with AWS Signature Version 4 by libcurl. Its dialect: the
/// payload's hash on every request, ETags matched without their quotes, a
/// lost race that Ceph RGW may answer with 500, S3's error codes in
/// refusals, a bucket made with PUT, and versioning, which turns
/// conditional writes off on RGW.
public final class S3ObjectStore: HTTPObjectStore {
    /// The bucket, folder, endpoint and region.
    public let location: S3Location
    /// The limits and counters.
    public let session: ObjectStoreSession
    private let transport: any HTTPTransport
    private let signature: AWSSignature

    /// The URL the objects' names are appended to, ending in `/`.
    public var baseURL: String { location.objectsURL }

    /// A folder of a bucket, signed with the access key id and secret.
    /// `sleep` waits between retries.
    public init(
        location: S3Location, accessKeyID: String, secretAccessKey: SecureBytes, transport: any HTTPTransport,
        sleep: @escaping (Double) -> Void = { _ in }
    ) throws(ObjectStoreFailure) {
        guard !accessKeyID.isEmpty, accessKeyID.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != 0x3a }) else {
            throw ObjectStoreFailure(.invalid, "the access key id is empty or has characters no access key id has")
        }
        self.location = location
        self.transport = transport
        session = ObjectStoreSession(sleep: sleep)
        signature = AWSSignature(
            region: location.region, service: "s3", accessKeyID: accessKeyID, secretAccessKey: secretAccessKey)
    }

    /// One request, authenticated as this kind does it, through the session.
    public func exchange(
        _ method: String, url: String, label: String, body: SecureBytes?, headers: [(name: String, value: String)],
        attempts: Int?, returning: Set<Int>
    ) throws(ObjectStoreFailure) -> HTTPResponse {
        let all = headers + [try AWSSignature.payloadHashHeader(body)]
        return try session.send(
            over: transport, method, label: label, bodySize: body?.count ?? 0, attempts: attempts, returning: returning,
            refusal: S3ObjectStore.refusal,
            prepared: { [signature] in
                var request = HTTPRequest(method: method, url: url, headers: all, body: body)
                request.awsSignature = signature
                return request
            })
    }

    /// Writes an object; this kind's answers to a refused precondition are `.preconditionFailed`.
    public func put(_ name: String, _ bytes: [UInt8], precondition: ObjectPrecondition, attempts: Int?)
        throws(ObjectStoreFailure) -> ObjectWriteResult
    {
        try Self.checkName(name)
        // Ceph RGW matches only an ETag sent without its quotes; AWS S3 takes either.
        let headers = Self.writeHeaders(precondition, ifMatch: S3ObjectStore.unquoted)
        // RGW may answer the loser of concurrent writes under one If-Match
        // with 500 rather than 412: a lost race, never a success; the
        // caller reads what the store holds, as after any refusal. A 500 to
        // a create (If-None-Match) is tried again like any 5xx: a try after
        // a write that did land is refused with 412.
        let raced: Set<Int> = precondition != .none && precondition != .absent ? [500] : []
        let response = try exchange(
            "PUT", url: baseURL + name, label: name, body: try Self.secureBody(bytes), headers: headers,
            attempts: attempts, returning: raced)
        switch response.status {
        case 200, 201, 204: return .stored
        case 412: return .preconditionFailed
        case 500 where !raced.isEmpty: return .preconditionFailed
        case 404:
            throw ObjectStoreFailure(
                .invalid, "the bucket \(location.bucket) does not exist (PUT \(name) answered HTTP 404)")
        default: throw unexpected(response, "PUT", name)
        }
    }

    /// Makes sure the bucket exists, else creates it (PUT, with the region
    /// as its location on AWS outside us-east-1). A folder inside a bucket
    /// needs no creating. Returns the bucket, named with its endpoint, when it created it.
    public func createFolder() throws(ObjectStoreFailure) -> [String] {
        guard try versioning() == .missing else { return [] }
        var body: SecureBytes? = nil
        if location.endpoint.hasSuffix(".amazonaws.com"), location.region != S3Location.defaultRegion {
            let xml =
                "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                + "<LocationConstraint>\(location.region)</LocationConstraint></CreateBucketConfiguration>"
            body = try Self.secureBody(Array(xml.utf8))
        }
        let url = location.bucketURL
        let made = try exchange(
            "PUT", url: url, label: "the bucket", body: body, headers: [], attempts: nil, returning: [])
        let code = made.body.withUnsafeBytes { S3ObjectStore.element("Code", in: String(decoding: $0, as: UTF8.self)) }
        switch (made.status, code) {
        case (200, _): return ["the bucket \(location.bucket) at \(location.endpoint)"]
        case (409, "BucketAlreadyOwnedByYou"): return []  // created meanwhile, by this user
        case (409, _):
            throw ObjectStoreFailure(
                .invalid, "the bucket \(location.bucket) belongs to another account (\(code ?? "HTTP 409"))")
        default: throw ObjectStoreFailure.unexpected(made.status, "PUT", "the bucket")
        }
    }

    /// Ceph RGW ignores If-Match and If-None-Match in a bucket whose
    /// versioning was ever turned on: the store's compare-and-swap would
    /// silently be gone.
    public func conditionalWritesProblem() throws(ObjectStoreFailure) -> String? {
        guard let status = try bucketVersioning() else { return nil }
        return "the bucket has versioning \(status.lowercased()): S3 stores such as Ceph RGW ignore conditional "
            + "writes there, which sync relies on; use a bucket that never had versioning"
    }

    /// The bucket's versioning status: nil when it was never turned on,
    /// else "Enabled" or "Suspended".
    public func bucketVersioning() throws(ObjectStoreFailure) -> String? {
        switch try versioning() {
        case .status(let status) where status == "Enabled" || status == "Suspended": return status
        case .status, .missing, .neverEnabled: return nil
        }
    }

    /// What GetBucketVersioning says of a bucket.
    enum Versioning: Equatable {
        case missing
        case neverEnabled
        case status(String)
    }

    /// GetBucketVersioning (with `=`: libcurl 7.88 signs a bare sub-resource
    /// differently from S3); its answer also tells a missing bucket, and,
    /// being a GET, carries the error code of a refusal.
    private func versioning() throws(ObjectStoreFailure) -> Versioning {
        let response = try exchange(
            "GET", url: location.bucketURL + "?versioning=", label: "the bucket", body: nil, headers: [],
            attempts: nil, returning: [401, 403])
        switch response.status {
        case 401, 403: throw S3ObjectStore.versioningRefused(response)
        case 200:
            let text = response.body.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            return S3ObjectStore.element("Status", in: text).map(Versioning.status) ?? .neverEnabled
        case 404: return .missing
        default: throw ObjectStoreFailure.unexpected(response.status, "GET", "the bucket's versioning")
        }
    }

    /// A refusal of GetBucketVersioning: the keys may be good for the
    /// objects and still lack that permission (AccessDenied), or be wrong.
    private static func versioningRefused(_ response: HTTPResponse) -> ObjectStoreFailure {
        let refused = refusal(response)
        guard errorCode(response) == "AccessDenied" else { return refused }
        return ObjectStoreFailure(
            .unauthorized,
            "\(refused.reason), asked for the bucket's versioning: the keys need s3:GetBucketVersioning on the "
                + "bucket as well as access to its objects (docs/sync.md, \"S3 stores\")")
    }

    /// Why the store refused a request (401, 403), in the words of S3's
    /// error code, which tells a wrong secret from an unknown key, a
    /// missing permission and a clock too far off.
    static func refusal(_ response: HTTPResponse) -> ObjectStoreFailure {
        let status = response.status
        switch errorCode(response) {
        case "SignatureDoesNotMatch"?:
            return ObjectStoreFailure(
                .unauthorized,
                "the store refused the signature (HTTP \(status) SignatureDoesNotMatch): the secret access key is "
                    + "not the one of the access key id")
        case "InvalidAccessKeyId"?:
            return ObjectStoreFailure(
                .unauthorized,
                "the store knows no such access key id (HTTP \(status) InvalidAccessKeyId): the keys are of "
                    + "another account or store, or were deleted")
        case "AccessDenied"?:
            return ObjectStoreFailure(
                .unauthorized,
                "the store refused access (HTTP \(status) AccessDenied): the keys are valid but lack a "
                    + "permission on the bucket")
        case "RequestTimeTooSkewed"?:
            return ObjectStoreFailure(
                .unauthorized,
                "the store refused the request: this machine's clock is more than 15 minutes off the store's "
                    + "(S3 signatures carry the time; set the clock)")
        case let code?:
            return ObjectStoreFailure(.unauthorized, "the store refused the credentials (HTTP \(status) \(code))")
        case nil:
            return ObjectStoreFailure(.unauthorized, "the store refused the credentials (HTTP \(status))")
        }
    }

    /// A 404 naming the bucket rather than the object: the bucket does not exist.
    public func missingPlace(_ response: HTTPResponse) -> ObjectStoreFailure? {
        guard S3ObjectStore.errorCode(response) == "NoSuchBucket" else { return nil }
        return ObjectStoreFailure(
            .wrongAddress,
            "the bucket \(location.bucket) does not exist at \(location.endpoint) (the store answered NoSuchBucket)")
    }

    /// S3's error code in an answer's XML body, when it has a plain one.
    static func errorCode(_ response: HTTPResponse) -> String? {
        response.body.withUnsafeBytes { element("Code", in: String(decoding: $0.prefix(4096), as: UTF8.self)) }
    }

    /// The text of the first `<name>` element of an S3 XML answer, when it
    /// is a plain word (S3's error codes and statuses are).
    static func element(_ name: String, in xml: String) -> String? {
        guard let open = xml.firstRange(of: "<\(name)>"),
            let close = xml[open.upperBound...].firstRange(of: "</\(name)>")
        else {
            return nil
        }
        let value = xml[open.upperBound..<close.lowerBound]
        guard !value.isEmpty, value.count <= 64, value.allSatisfy({ $0.isLetter || $0.isNumber }) else { return nil }
        return String(value)
    }

    static func unquoted(_ etag: String) -> String {
        etag.count >= 2 && etag.hasPrefix("\"") && etag.hasSuffix("\"") ? String(etag.dropFirst().dropLast()) : etag
    }
}
