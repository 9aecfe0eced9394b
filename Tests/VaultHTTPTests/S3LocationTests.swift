import Testing
import VaultHTTP

/// Where an S3 store is: every part checked for the grammar it goes into,
/// kept as one canonical URL that reads back the same.
@Suite("S3 store locations")
struct S3LocationTests {
    @Test("AWS by default: virtual-hosted, the region's endpoint, round-tripped through the canonical URL")
    func awsDefault() throws {
        let l = try S3Location(url: "s3://team-vault/ada/laptop/", endpoint: nil, region: "eu-west-1", pathStyle: false)
        #expect(l.objectsURL == "https://team-vault.s3.eu-west-1.amazonaws.com/ada/laptop/")
        #expect(l.bucketURL == "https://team-vault.s3.eu-west-1.amazonaws.com/")
        #expect(try S3Location(canonical: l.canonicalURL) == l)
        #expect(l.displayName == "s3://team-vault/ada/laptop at https://s3.eu-west-1.amazonaws.com (region eu-west-1)")
        let east = try S3Location(url: "s3://team-vault", endpoint: nil, region: nil, pathStyle: false)
        #expect(east.region == "us-east-1" && east.objectsURL == "https://team-vault.s3.us-east-1.amazonaws.com/")
    }

    @Test("path style when asked, for an address or localhost, and for a bucket with dots over https")
    func pathStyle() throws {
        let asked = try S3Location(
            url: "s3://bk1/x", endpoint: "https://rgw.example.com:8443/", region: "default", pathStyle: true)
        #expect(asked.objectsURL == "https://rgw.example.com:8443/bk1/x/")
        let address = try S3Location(url: "s3://bk1", endpoint: "http://127.0.0.1:7480", region: nil, pathStyle: false)
        #expect(address.pathStyle && address.objectsURL == "http://127.0.0.1:7480/bk1/")
        let dots = try S3Location(
            url: "s3://my.bucket", endpoint: "https://s3.example.com", region: nil, pathStyle: false)
        #expect(dots.pathStyle)
        #expect(try S3Location(canonical: dots.canonicalURL) == dots)
    }

    @Test(
        "what does not fit its grammar is refused",
        arguments: [
            ("s3://Team_Vault", nil as String?), ("s3://ab", nil), ("s3://-bucket", nil), ("s3://a..b", nil),
            ("s3://bucket/../other", nil), ("s3://bucket/a b", nil), ("s3://bucket?x=1", nil),
            ("s3://user@bucket", nil), ("s3://bucket", "http://s3.example.com"),
            ("s3://bucket", "https://s3.example.com/path"), ("s3://bucket", "https://user@s3.example.com"),
            ("s3://bucket", "https://s3.example.com?x=1"), ("s3://bucket", "ftp://s3.example.com"),
            ("https://dav.example.com/", nil),
        ])
    func refused(url: String, endpoint: String?) {
        #expect(throws: ObjectStore.Failure.self) {
            try S3Location(url: url, endpoint: endpoint, region: nil, pathStyle: false)
        }
    }

    @Test("AWS's region names, told from other S3 servers' own")
    func awsRegions() {
        for region in ["us-east-1", "eu-west-1", "ap-southeast-2", "us-gov-west-1", "il-central-1"] {
            #expect(S3Location.isAWSRegion(region), "\(region)")
        }
        for region in ["default", "garage", "auto", "us-east", "useast-1", "us--1", "US-EAST-1", "eu-west-1a", ""] {
            #expect(!S3Location.isAWSRegion(region), "\(region)")
        }
    }

    @Test("a region outside its grammar is refused, and so are incomplete settings")
    func regionAndSettings() {
        #expect(throws: ObjectStore.Failure.self) {
            try S3Location(url: "s3://bucket", endpoint: nil, region: "eu west", pathStyle: false)
        }
        #expect(throws: ObjectStore.Failure.self) { try S3Location(canonical: "s3://bucket?region=x") }
    }
}
