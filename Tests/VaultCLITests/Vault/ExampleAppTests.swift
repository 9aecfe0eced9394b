import Foundation
import Testing
import VaultTestSupport

/// Examples/LifecycleDemo, an app built on `import VaultKit` alone, run
/// through the GTMAppAuth lifecycle against the real provider.
@Suite("the example app: authorize, save, load, request, refresh, revocation, remove")
struct ExampleAppTests {
    static let package = FixtureServer.root.path + "/Examples/LifecycleDemo"

    /// The `swift` driver on PATH, if any.
    static let swift: String? = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        .map { "\($0)/swift" }.first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs `swift ARGS` in the example's package with its own scratch path.
    func swiftPM(_ arguments: [String]) throws -> ProcessResult {
        try VaultProcess.start(
            arguments + ["--package-path", Self.package, "--scratch-path", Self.package + "/.build"],
            environment: ProcessInfo.processInfo.environment, executable: Self.swift
        ).wait(timeout: 3600)
    }

    @Test(
        "the example builds against this checkout and runs the whole lifecycle",
        .enabled(if: ExampleAppTests.swift != nil, "no swift toolchain on PATH"))
    func lifecycle() throws {
        let oidc = try OIDCProvider.shared.get()
        let built = try swiftPM(["build", "--product", "LifecycleDemo"])
        try #require(built.status == 0, "\(built.stdout)\(built.stderr)")
        // Its switches over events and codes are written as docs/library.md
        // advises ("Upgrading"): no warning comes from the app's own code.
        let warnings = (built.stdout + built.stderr).split(separator: "\n").filter {
            $0.contains("LifecycleDemo/Sources/") && $0.contains("warning:")
        }
        #expect(warnings.isEmpty, "\(warnings.joined(separator: "\n"))")
        let bin = try swiftPM(["build", "--show-bin-path"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let home = TemporaryDirectory()
        let environment = VaultProcess.environment(
            home: home.path,
            extra: ["DEMO_PROVIDER_SETTINGS": oidc.directory + "/settings.json", "VAULT_KEYFILE": home.path + "/key"])
        func run(_ arguments: [String]) throws -> ProcessResult {
            let r = try VaultProcess.start(arguments, environment: environment, executable: bin + "/LifecycleDemo")
                .wait()
            for secret in [oidc.settings.password, oidc.settings.client_secret] {
                #expect(!r.stdout.contains(secret) && !r.stderr.contains(secret), "a secret in the app's output")
            }
            return r
        }
        let name = "\"\(oidc.settings.email) at glewlwyd\""

        let first = try run([])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(
            first.stdout == """
                signed in as \(oidc.settings.email)
                can authorize: true
                userinfo: HTTP 200

                """)

        let second = try run(["--revoked"])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(
            second.stdout == """
                loaded the saved grant
                can authorize: true
                userinfo: HTTP 200
                event: refreshed(name: \(name), rotated: true)
                status bar: refreshed(name: \(name), rotated: true)
                event: refused(name: \(name), oauthError: Optional("invalid_grant"))
                status bar: refused(name: \(name), oauthError: Optional("invalid_grant"))
                can authorize: false
                signed out; grants left: 0

                """)
    }
}
