// swift-tools-version: 6.0
import PackageDescription

// An app that uses VaultKit the way an iOS app uses GTMAppAuth, built
// against this checkout of vault.
let package = Package(
    name: "LifecycleDemo",
    dependencies: [.package(name: "vault", path: "../..")],
    targets: [
        .executableTarget(
            name: "LifecycleDemo", dependencies: [.product(name: "VaultKit", package: "vault")],
            swiftSettings: [.swiftLanguageMode(.v6)]),
        // VaultKit's benchmark (Tools/bench/library).
        .executableTarget(
            name: "LibraryBench", dependencies: [.product(name: "VaultKit", package: "vault")],
            swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
