// swift-tools-version: 6.0
import Foundation
import PackageDescription

let package = Package(
    name: "vault",
    products: [
        .library(name: "VaultKit", targets: ["VaultKit"]),
        // `URLRequest` support, apart so that VaultKit links no FoundationNetworking.
        .library(name: "VaultKitURLSession", targets: ["VaultKitURLSession"]),
        .executable(name: "vault", targets: ["vault"]),
        // Long runs of the sync simulation (Tools/sim/run).
        .executable(name: "vault-sim", targets: ["VaultSimRunner"]),
    ],
    targets: [
        // C libraries from Debian's -dev packages. Each is loaded with dlopen on
        // first use, through trampolines with the library's own names, so a
        // command that needs none of them (a token from the agent) maps none.
        .target(name: "CSodium", linkerSettings: [.linkedLibrary("dl")]),
        .target(name: "CSQLite", linkerSettings: [.linkedLibrary("dl")]),
        // Process-level calls Swift cannot make directly (variadic prctl, signal-safe tty restore,
        // Unix sockets with SO_PEERCRED, signalfd).
        .target(name: "CPlatform"),
        // libcurl's header only; loaded on first use too.
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("dl")]),
        // libcrypto, for OAuth 1.0a's SHA-1 signatures; also loaded on first use.
        .target(name: "COpenSSL", linkerSettings: [.linkedLibrary("dl")]),
        // libsecret for the optional Secret Service keyslot, loaded with dlopen on first use.
        .target(name: "CSecret", linkerSettings: [.linkedLibrary("dl")]),

        .target(name: "VaultCrypto", dependencies: ["CSodium", "COpenSSL"]),
        .target(name: "VaultStorage", dependencies: ["CSQLite"]),
        .target(name: "VaultHTTP", dependencies: ["CCurl", "VaultCrypto"]),
        // The core: grants, the vault file, keyslots, OAuth and providers. It
        // names neither sync nor the agent; they build on it.
        .target(name: "VaultCore", dependencies: ["VaultCrypto", "VaultStorage", "VaultHTTP", "CPlatform", "CSecret"]),
        .target(name: "VaultSync", dependencies: ["VaultCore", "VaultCrypto", "VaultHTTP"]),
        .target(name: "VaultAgent", dependencies: ["VaultCore", "VaultSync", "VaultCrypto", "VaultHTTP", "CPlatform"]),
        // The library product: one import for apps.
        .target(name: "VaultKit", dependencies: ["VaultCore", "VaultSync", "VaultAgent", "VaultHTTP", "VaultCrypto"]),
        .target(name: "VaultKitURLSession", dependencies: ["VaultKit"]),
        .target(
            name: "VaultCLI",
            dependencies: ["VaultCore", "VaultSync", "VaultAgent", "VaultCrypto", "VaultHTTP", "CPlatform"]),
        .executableTarget(name: "vault", dependencies: ["VaultCLI"]),

        .target(
            name: "VaultTestSupport", dependencies: ["VaultKit", "VaultCore", "VaultCrypto", "VaultHTTP", "CPlatform"],
            path: "Tests/VaultTestSupport"),
        // The deterministic simulation of sync (docs/sync.md, "Simulation"): machines,
        // a store and a provider in one process, on a simulated clock.
        .target(
            name: "VaultSimulation", dependencies: ["VaultSync", "VaultCore", "VaultCrypto", "VaultHTTP"],
            path: "Tests/VaultSimulation"),
        .executableTarget(name: "VaultSimRunner", dependencies: ["VaultSimulation"], path: "Tests/VaultSimRunner"),
        .testTarget(
            name: "VaultSimulationTests", dependencies: ["VaultSimulation"], exclude: ["Regressions", "Open"]),
        .testTarget(name: "VaultCryptoTests", dependencies: ["VaultCrypto", "CSodium"]),
        .testTarget(name: "VaultStorageTests", dependencies: ["VaultStorage"]),
        .testTarget(name: "VaultHTTPTests", dependencies: ["VaultHTTP", "VaultTestSupport"]),
        .testTarget(
            name: "VaultCoreTests",
            dependencies: ["VaultCore", "VaultCrypto", "VaultStorage", "VaultHTTP", "VaultTestSupport"],
            resources: [.copy("Vectors")]),
        .testTarget(
            name: "VaultSyncTests",
            dependencies: ["VaultSync", "VaultCore", "VaultCrypto", "VaultHTTP", "VaultTestSupport"]),
        .testTarget(
            name: "VaultAgentTests",
            dependencies: ["VaultAgent", "VaultCore", "VaultSync", "VaultCrypto", "VaultTestSupport"]),
        .testTarget(
            name: "VaultKitTests",
            dependencies: [
                "VaultKit", "VaultKitURLSession", "VaultCore", "VaultSync", "VaultAgent", "VaultCrypto", "VaultHTTP",
                "VaultTestSupport",
            ]),
        .testTarget(
            name: "VaultCLITests", dependencies: ["VaultTestSupport", "VaultHTTP", "VaultCrypto", "VaultCLI"],
            exclude: ["Transcripts"]),
    ]
)

// Strict settings for every Swift target, in one place.
for target in package.targets
where !["CSodium", "CSQLite", "CPlatform", "CCurl", "COpenSSL", "CSecret"].contains(target.name) {
    var settings = target.swiftSettings ?? []
    settings.append(.swiftLanguageMode(.v6))
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}

// Fuzz targets exist only for Tools/fuzz/run, which sets VAULT_FUZZ and
// builds with -sanitize=fuzzer (libFuzzer then supplies main).
if ProcessInfo.processInfo.environment["VAULT_FUZZ"] != nil {
    // The sanitizers' allocator replaces glibc's: no free() of vault's own.
    for target in package.targets where target.name == "CPlatform" {
        target.cSettings = [.define("VAULT_NO_FREE_WIPE")]
    }
    package.targets.append(.target(name: "CFuzz"))
    package.targets.append(
        .executableTarget(
            name: "VaultFuzz",
            dependencies: ["VaultCore", "VaultSync", "VaultAgent", "VaultCrypto", "VaultHTTP", "CFuzz"]))
    package.products.append(.executable(name: "vault-fuzz", targets: ["VaultFuzz"]))
}
