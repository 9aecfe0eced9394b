public import VaultCrypto

/// What AWS Signature Version 4 needs: the scope and the credentials. The
/// secret stays in secure memory until libcurl copies it for the request.
public struct AWSSignature: Sendable {
    /// The region of the signing scope (`us-east-1`, or what the store calls its own).
    public var region: String
    /// The service of the signing scope (`s3`).
    public var service: String
    /// The access key id.
    public var accessKeyID: String
    /// The secret access key.
    public var secretAccessKey: SecureBytes

    /// Creates the signing settings.
    public init(region: String, service: String, accessKeyID: String, secretAccessKey: SecureBytes) {
        self.region = region
        self.service = service
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
    }
}

extension AWSSignature {
    /// `x-amz-content-sha256`: the body's SHA-256 in hex, which S3 requires
    /// with every signed request (libcurl signs the header with the rest).
    static func payloadHashHeader(_ body: SecureBytes?) throws(ObjectStoreFailure) -> (name: String, value: String) {
        let digest: [UInt8]
        do { digest = try SHA256.hash(body?.unsafeCopyToArray() ?? []) } catch {
            throw ObjectStoreFailure(.invalid, error.reason)
        }
        let hexDigits = Array("0123456789abcdef")
        return ("x-amz-content-sha256", String(digest.flatMap { [hexDigits[Int($0 >> 4)], hexDigits[Int($0 & 15)]] }))
    }
}
