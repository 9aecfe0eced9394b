import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

/// Ceph's RADOS Gateway (Tools/testservers/rgw.py): an S3 store on
/// 127.0.0.1 with a user whose keys are in an AWS credentials file.
final class RGWStore {
    let dir = TemporaryDirectory()
    let server: FixtureServer
    let endpoint: String
    let region: String
    /// The AWS shared credentials file with the user's keys (profile "default").
    let credentials: String

    static let installed = FileManager.default.isExecutableFile(atPath: "/usr/bin/radosgw")

    init() throws {
        server = try FixtureServer(script: "rgw.py", arguments: [dir.path + "/rgw"])
        let settings = try JSONSerialization.jsonObject(with: Data(server.firstLine.utf8)) as! [String: String]
        endpoint = settings["endpoint"]!
        region = settings["region"]!
        credentials = settings["credentials"]!
    }

    /// A key of the credentials file: the access key id, or the secret.
    func key(_ name: String) throws -> String {
        let text = try String(contentsOfFile: credentials, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(name + " =") })
        return String(line.split(separator: "=", maxSplits: 1)[1]).trimmingCharacters(in: .whitespaces)
    }

    /// The names of the objects in `bucket` under `folder` (ListObjectsV2).
    func list(_ bucket: String, _ folder: String) throws -> [String] {
        let r = try send("GET", "/\(bucket)/?list-type=2&prefix=\(folder)%2F")
        #expect(r.status == 200)
        let xml = r.body.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        return xml.components(separatedBy: "<Key>").dropFirst().compactMap {
            $0.components(separatedBy: "</Key>").first
        }
    }

    /// One signed request to the store, outside vault's sync (to set a bucket up).
    func send(_ method: String, _ path: String, body: String? = nil) throws -> HTTPResponse {
        try sendBytes(method, path, body: try body.map { try SecureBytes(copying: Array($0.utf8)) })
    }

    /// `send` with a body of bytes.
    func sendBytes(_ method: String, _ path: String, body: SecureBytes?) throws -> HTTPResponse {
        let digest = try SHA256.hash(body?.unsafeCopyToArray() ?? []).map { String(format: "%02x", $0) }.joined()
        var request = HTTPRequest(
            method: method, url: endpoint + path, headers: [("x-amz-content-sha256", digest)], body: body)
        request.awsSignature = AWSSignature(
            region: region, service: "s3", accessKeyID: try key("aws_access_key_id"),
            secretAccessKey: try SecureBytes(copying: Array(try key("aws_secret_access_key").utf8)))
        return try CurlTransport().send(request)
    }
}

@Suite("sync through an S3 store (Ceph RGW)", .enabled(if: RGWStore.installed, "needs radosgw (Tools/setup)"))
struct S3StoreTests {
    let store: RGWStore
    init() throws { store = try RGWStore() }

    /// Machines sharing one key file, no agent.
    func machines(_ count: Int) throws -> [Home] {
        let homes = (0..<count).map { _ in Home() }
        try homes[0].initKeyfileVault()
        for home in homes {
            home.extra["VAULT_AGENT"] = "off"
            home.extra["VAULT_KEYFILE"] = homes[0].path + "/key"
        }
        return homes
    }

    func token(_ home: Home, _ name: String) throws -> String {
        try home.run("token", name).stdout.trimmingCharacters(in: .newlines)
    }

    @Test("three machines converge; the keys come from a credentials file, the environment and a named profile")
    func threeMachines() throws {
        let homes = try machines(3)
        let place = ["--endpoint", store.endpoint, "--region", store.region]
        let set = try homes[0].run(
            ["remote", "set", "s3://team-vault/ada"] + place + ["--credentials-file", store.credentials])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stderr.contains("created the bucket team-vault at \(store.endpoint)"))
        #expect(try homes[0].run("import", "laptop", stdin: Home.tokenJSON("from-laptop")).status == 0)
        #expect(try homes[0].run("sync").status == 0)

        // The second machine has the keys in its environment.
        homes[1].extra["AWS_ACCESS_KEY_ID"] = try store.key("aws_access_key_id")
        homes[1].extra["AWS_SECRET_ACCESS_KEY"] = try store.key("aws_secret_access_key")
        let joined = try homes[1].run(["join", "s3://team-vault/ada"] + place)
        #expect(joined.status == 0, "\(joined.stderr)")
        // The third in a profile of its own credentials file, named by AWS_PROFILE.
        let file = homes[2].path + "/aws-credentials"
        homes[2].write(
            file,
            "[other]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[team]\n"
                + "aws_access_key_id = \(try store.key("aws_access_key_id"))\n"
                + "aws_secret_access_key = \(try store.key("aws_secret_access_key"))\n")
        homes[2].extra["AWS_SHARED_CREDENTIALS_FILE"] = file
        homes[2].extra["AWS_PROFILE"] = "team"
        let third = try homes[2].run(["join", "s3://team-vault/ada"] + place)
        #expect(third.status == 0, "\(third.stderr)")

        for (i, home) in homes.enumerated() {
            #expect(try home.run("import", "m\(i)", stdin: Home.tokenJSON("machine-\(i)")).status == 0)
        }
        for _ in 0..<2 {
            for home in homes { #expect(try home.run("sync").status == 0) }
        }
        for home in homes {
            #expect(try home.listedNames().names == ["laptop", "m0", "m1", "m2"])
            #expect(try token(home, "m2") == "machine-2")
            #expect(try token(home, "laptop") == "from-laptop")
        }
        let shown = try homes[1].run("remote")
        #expect(
            shown.stdout
                == "s3://team-vault/ada at \(store.endpoint) (region \(store.region), path style) "
                + "(access key \(try store.key("aws_access_key_id")))\n")
        // The keys are kept inside the vault, encrypted.
        let secret = Data(try store.key("aws_secret_access_key").utf8)
        for home in homes {
            let file = try #require(FileManager.default.contents(atPath: home.vaultFile))
            #expect(file.range(of: secret) == nil)
        }
    }

    @Test("a store that shows another history of the same vault (a fork) is refused, and nothing changes")
    func fork() throws {
        let homes = try machines(2)
        let (a, b) = (homes[0], homes[1])
        let login = ["--endpoint", store.endpoint, "--region", store.region, "--credentials-file", store.credentials]
        #expect(try a.run(["remote", "set", "s3://team-vault/main"] + login).status == 0)
        try a.run("import", "work", stdin: Home.tokenJSON("one"))
        #expect(try a.run("sync").status == 0)
        try a.run("import", "more", stdin: Home.tokenJSON("two"))
        #expect(try a.run("sync").status == 0)
        // Another machine of the same vault builds its own history elsewhere.
        #expect(try b.run(["join", "s3://team-vault/main"] + login).status == 0)
        #expect(try b.run(["remote", "set", "s3://team-vault/elsewhere"] + login).status == 0)
        for i in 0..<3 {
            try b.run("import", "b\(i)", stdin: Home.tokenJSON("b\(i)"))
            #expect(try b.run("sync").status == 0)
        }
        // The store now serves that history to the first machine.
        for key in try store.list("team-vault", "elsewhere") {
            let object = try store.send("GET", "/team-vault/\(key)")
            let name = key.replacingOccurrences(of: "elsewhere/", with: "main/")
            #expect(try store.sendBytes("PUT", "/team-vault/\(name)", body: object.body).status == 200)
        }
        let before = a.snapshot()
        let r = try a.run("sync")
        #expect(r.status == 1 && r.stderr.contains("a fork"), "\(r.stderr)")
        #expect(a.snapshot() == before)
    }

    @Test("a bucket with versioning is refused, and no store is set")
    func versionedBucket() throws {
        #expect(try store.send("PUT", "/kept-versions/").status == 200)
        let enable =
            "<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            + "<Status>Enabled</Status></VersioningConfiguration>"
        #expect(try store.send("PUT", "/kept-versions/?versioning=", body: enable).status == 200)
        let home = try machines(1)[0]
        let set = try home.run(
            "remote", "set", "s3://kept-versions/ada", "--endpoint", store.endpoint, "--region", store.region,
            "--credentials-file", store.credentials)
        #expect(set.status == 1)
        #expect(set.stderr.contains("the bucket has versioning enabled"))
        #expect(try home.run("remote").stderr.contains("no store is set"))
    }

    @Test("a bucket whose versioning was turned on after the first machine set it: joining is refused")
    func versionedLater() throws {
        let homes = try machines(2)
        let login = ["--endpoint", store.endpoint, "--region", store.region, "--credentials-file", store.credentials]
        #expect(try homes[0].run(["remote", "set", "s3://later-versions/ada"] + login).status == 0)
        #expect(try homes[0].run("sync").status == 0)
        let enable =
            "<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            + "<Status>Enabled</Status></VersioningConfiguration>"
        #expect(try store.send("PUT", "/later-versions/?versioning=", body: enable).status == 200)
        let joined = try homes[1].run(["join", "s3://later-versions/ada"] + login)
        #expect(joined.status == 1)
        #expect(joined.stderr.contains("the bucket has versioning enabled"), "\(joined.stderr)")
        #expect(!FileManager.default.fileExists(atPath: homes[1].vaultFile))
    }

    @Test("a wrong secret key is refused with the store's reason, and no store is set")
    func wrongSecret() throws {
        let home = try machines(1)[0]
        home.extra["AWS_ACCESS_KEY_ID"] = try store.key("aws_access_key_id")
        home.extra["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
        let set = try home.run(
            "remote", "set", "s3://team-vault/ada", "--endpoint", store.endpoint, "--region", store.region)
        #expect(set.status == 1)
        #expect(set.stderr.contains("SignatureDoesNotMatch"), "\(set.stderr)")
        #expect(set.stderr.contains("the secret access key is not the one of the access key id"), "\(set.stderr)")
        #expect(!set.stderr.contains("s3:GetBucketVersioning"), "no permission is blamed: \(set.stderr)")
        #expect(set.stderr.contains("hint: check the store's keys"), "not the command just run: \(set.stderr)")
        #expect(!set.stderr.contains("not-the-secret"))
        #expect(try home.run("remote").stderr.contains("no store is set"))

        home.extra["AWS_ACCESS_KEY_ID"] = "AKIDNOSUCHKEY"
        let unknown = try home.run(
            "remote", "set", "s3://team-vault/ada", "--endpoint", store.endpoint, "--region", store.region)
        #expect(unknown.status == 1)
        #expect(
            unknown.stderr.contains("knows no such access key id (HTTP 403 InvalidAccessKeyId)"), "\(unknown.stderr)")
    }

    @Test("a mistyped bucket at join, an S3 server at a WebDAV URL, https to a plain-http endpoint: usage errors")
    func wrongAddresses() throws {
        let homes = try machines(2)
        let place = ["--endpoint", store.endpoint, "--region", store.region]
        let set = try homes[0].run(
            ["remote", "set", "s3://team-vault/ada"] + place + ["--credentials-file", store.credentials])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(try homes[0].run("sync").status == 0)

        let joining = homes[1]
        joining.extra["AWS_ACCESS_KEY_ID"] = try store.key("aws_access_key_id")
        joining.extra["AWS_SECRET_ACCESS_KEY"] = try store.key("aws_secret_access_key")
        let typo = try joining.run(["join", "s3://team-vaul/ada"] + place)
        #expect(typo.status == 64, "\(typo.stderr)")
        #expect(typo.stderr.contains("the bucket team-vaul does not exist at \(store.endpoint)"), "\(typo.stderr)")
        #expect(!typo.stderr.contains("no vault yet"))
        #expect(!FileManager.default.fileExists(atPath: joining.vaultFile))
        // A mistyped folder of a bucket that exists: the address looked at,
        // and the typo as a cause beside a vault not synced yet.
        let folder = try joining.run(["join", "s3://team-vault/adaa"] + place)
        #expect(folder.status == 1, "\(folder.stderr)")
        #expect(
            folder.stderr.contains("the store has no vault at s3://team-vault/adaa at \(store.endpoint)"),
            "\(folder.stderr)")
        #expect(
            folder.stderr.contains("the address may be mistyped")
                && folder.stderr.contains("hint: check the address for a mistyped bucket or folder"),
            "\(folder.stderr)")
        #expect(!FileManager.default.fileExists(atPath: joining.vaultFile))

        let other = try machines(1)[0]
        other.write(other.path + "/store-password", "secret\n")
        let dav = try other.run(
            "remote", "set", store.endpoint + "/team-vault/ada/", "--user", "ada", "--password-file",
            other.path + "/store-password")
        #expect(dav.status == 64, "\(dav.stderr)")
        #expect(dav.stderr.contains("as an S3 store does"), "\(dav.stderr)")
        #expect(
            dav.stderr.contains(
                "vault: hint: as an S3 store: 'vault remote set s3://team-vault/ada --endpoint \(store.endpoint)' (with the bucket's keys"
            ), "\(dav.stderr)")
        #expect(try other.run("remote").stderr.contains("no store is set"))
        // Without credentials the store's S3 answers (MethodNotAllowed,
        // NoSuchBucket) say the same, rather than ask for a folder.
        let anonymous = try other.run("remote", "set", store.endpoint + "/no-such-bucket/folder/")
        #expect(anonymous.status == 64, "\(anonymous.stderr)")
        #expect(
            anonymous.stderr.contains("as an S3 store does: a folder of an S3 bucket is an s3://BUCKET/FOLDER address"),
            "\(anonymous.stderr)")
        #expect(!anonymous.stderr.contains("has no folder"), "\(anonymous.stderr)")
        #expect(
            anonymous.stderr.contains("'vault remote set s3://no-such-bucket/folder --endpoint \(store.endpoint)'"),
            "\(anonymous.stderr)")
        #expect(try other.run("remote").stderr.contains("no store is set"))
        // The command the hint gives works, for a folder of its own.
        let folderName = "inferred-\(UInt32.random(in: 0...UInt32.max))"
        let inferred = try other.run(
            "remote", "set", store.endpoint + "/team-vault/\(folderName)/", "--user", "ada", "--password-file",
            other.path + "/store-password")
        let hinted = "vault remote set s3://team-vault/\(folderName) --endpoint \(store.endpoint)"
        #expect(inferred.status == 64 && inferred.stderr.contains("'\(hinted)'"), "\(inferred.stderr)")
        let asHinted = try other.run(
            Array(hinted.split(separator: " ").dropFirst().map(String.init)) + [
                "--credentials-file", store.credentials,
            ])
        #expect(asHinted.status == 0, "\(asHinted.stderr)")

        let tls = try joining.run(
            [
                "join", "s3://team-vault/ada", "--endpoint",
                store.endpoint.replacingOccurrences(of: "http://", with: "https://"),
                "--region", store.region,
            ])
        #expect(tls.status == 64, "\(tls.stderr)")
        #expect(tls.stderr.contains("did not complete a TLS handshake"), "\(tls.stderr)")
    }

    @Test("a new bucket set where the vault was in step with another store: kept, with a warning naming that store")
    func newStoreAfterAnother() throws {
        let home = try machines(1)[0]
        let place = ["--endpoint", store.endpoint, "--region", store.region, "--credentials-file", store.credentials]
        let first = try home.run(["remote", "set", "s3://team-vault/moved"] + place)
        #expect(first.status == 0 && !first.stderr.contains("warning"), "\(first.stderr)")
        #expect(try home.run("sync").status == 0)

        let typo = try home.run(["remote", "set", "s3://team-vualt/moved"] + place)
        #expect(typo.status == 0, "\(typo.stderr)")
        #expect(typo.stderr.contains("created the bucket team-vualt"), "\(typo.stderr)")
        #expect(
            typo.stderr.contains(
                "warning: this vault was in step with s3://team-vault/moved at \(store.endpoint)"),
            "\(typo.stderr)")
        #expect(typo.stderr.contains("holds no vault yet"), "\(typo.stderr)")
        #expect(try home.run("remote").stdout.contains("s3://team-vualt/moved"))

        // Back to the store it synced with: nothing to warn of.
        let back = try home.run(["remote", "set", "s3://team-vault/moved"] + place)
        #expect(back.status == 0 && !back.stderr.contains("warning"), "\(back.stderr)")
    }

    @Test("vault pair names the join that reaches the same bucket, endpoint and region")
    func pairHint() throws {
        let home = try machines(1)[0]
        let place = ["--endpoint", store.endpoint, "--region", store.region]
        #expect(
            try home.run(
                ["remote", "set", "s3://team-vault/pair"] + place + ["--credentials-file", store.credentials]
            )
            .status == 0)
        #expect(try home.run("sync").status == 0)
        let pair = try home.run("pair")
        #expect(pair.status == 0, "\(pair.stderr)")
        #expect(
            pair.stderr.contains(
                "vault join s3://team-vault/pair --endpoint \(store.endpoint) --region \(store.region) --path-style "
                    + "--pairing-code-file FILE"), "\(pair.stderr)")
    }

    @Test("S3 settings are refused where they make no sense, before anything is asked")
    func usage() throws {
        let home = try machines(1)[0]
        let mixed = try home.run("remote", "set", "https://dav.example.com/vault/", "--region", "eu-west-1")
        #expect(mixed.status == 64)
        let basic = try home.run("remote", "set", "s3://team-vault", "--user", "ada")
        #expect(basic.status == 64)
        let bucket = try home.run("remote", "set", "s3://Team_Vault/x", "--endpoint", store.endpoint)
        #expect(bucket.status == 64)
        #expect(bucket.stderr.contains("is not a bucket name"))
        let plain = try home.run("remote", "set", "s3://team-vault", "--endpoint", "http://s3.example.com")
        #expect(plain.status == 64)
        #expect(plain.stderr.contains("plain http is refused"))
    }

    @Test("an S3 server's region with the endpoint forgotten: a usage error naming --endpoint, before any request")
    func endpointForgotten() throws {
        let fresh = Home()
        fresh.extra["VAULT_AGENT"] = "off"
        let join = try fresh.run(
            "join", "s3://team-vault/ada", "--region", "default", "--credentials-file", store.credentials)
        #expect(join.status == 64, "\(join.stderr)")
        #expect(
            join.stderr.contains(
                "vault: error: with no --endpoint, s3://team-vault/ada is a bucket of AWS S3, and 'default' is not an AWS region"
            ), "\(join.stderr)")
        #expect(
            join.stderr.contains(
                "vault: hint: for another S3 server (Ceph RGW, MinIO, Garage, R2, ...), give its address with --endpoint URL; on a machine that syncs the vault, 'vault pair' prints the whole join command"
            ),
            "\(join.stderr)")
        #expect(!join.stderr.contains("resolve"), "\(join.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fresh.vaultFile))
        let home = try machines(1)[0]
        let set = try home.run(
            "remote", "set", "s3://team-vault/ada", "--region", "default", "--credentials-file", store.credentials)
        #expect(set.status == 64, "\(set.stderr)")
        #expect(set.stderr.contains("give its address with --endpoint URL\n"), "\(set.stderr)")
        // Positive control: the same region with the server's endpoint.
        let right = try home.run(
            "remote", "set", "s3://team-vault/forgotten-\(UInt32.random(in: 0...UInt32.max))", "--endpoint",
            store.endpoint, "--region", "default",
            "--credentials-file", store.credentials)
        #expect(right.status == 0, "\(right.stderr)")
    }

    @Test(
        "an AWS host name that does not resolve while AWS's does (a region AWS lacks): a usage error naming --region and --endpoint"
    )
    func awsHostUnresolved() throws {
        let home = try machines(1)[0]
        let fresh = Home()
        fresh.extra["VAULT_AGENT"] = "off"
        fresh.extra["VAULT_KEYFILE"] = home.path + "/key"
        let args = ["join", "s3://team-vault/ada", "--region", "us-east-9", "--credentials-file", store.credentials]
        // Where no name resolves (no network), it stays a failure to try again.
        let offline = try fresh.run(args)
        #expect(offline.status == 75, "\(offline.stderr)")
        #expect(offline.stderr.contains("couldn't resolve host name"), "\(offline.stderr)")
        // A name that resolves stands for AWS's own (the tests have no DNS).
        fresh.extra["VAULT_TEST_RESOLVABLE_HOST"] = "localhost"
        let join = try fresh.run(args)
        #expect(join.status == 64, "\(join.stderr)")
        #expect(
            join.stderr.contains(
                "vault: error: team-vault.s3.us-east-9.amazonaws.com does not resolve, while localhost does: AWS S3 has no such address, so the region 'us-east-9' is likely wrong, or the store is not AWS's and its --endpoint was left out"
            ), "\(join.stderr)")
        #expect(
            join.stderr.contains(
                "vault: hint: check --region (AWS's are such as us-east-1, eu-west-1); for another S3 server (Ceph RGW, MinIO, Garage, R2, ...), give its address with --endpoint URL; on a machine that syncs the vault, 'vault pair' prints the whole join command"
            ), "\(join.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fresh.vaultFile))
        home.extra["VAULT_TEST_RESOLVABLE_HOST"] = "localhost"
        let set = try home.run(
            "remote", "set", "s3://team-vault/ada", "--region", "us-east-9", "--credentials-file", store.credentials)
        #expect(set.status == 64, "\(set.stderr)")
        #expect(set.stderr.contains("give its address with --endpoint URL\n"), "\(set.stderr)")
    }
}
