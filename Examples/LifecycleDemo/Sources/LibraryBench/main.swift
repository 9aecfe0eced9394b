import Foundation
import VaultKit

// VaultKit's figures in one process with an open vault (Tools/bench/library):
//   LibraryBench TOKEN_ENDPOINT_SCRIPT
// 1. the median time of a fresh token of a fresh grant through TokenSession;
// 2. 1,000 concurrent tasks asking for one expired grant: token requests
//    made (goal: 1) and distinct tokens handed out (goal: 1).

/// The loopback token endpoint (Tools/bench/token_endpoint.py), started here
/// and stopped by its PID.
final class TokenEndpoint {
    let process = Process()
    let input = Pipe()
    let port: Int

    init(script: String) throws {
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), byte != Data("\n".utf8) {
            line += byte
        }
        port = Int(String(decoding: line, as: UTF8.self)) ?? 0
    }

    var url: String { "http://127.0.0.1:\(port)" }

    func requests() async throws -> Int {
        let body = try await CurlTransport().send(HTTPRequest(method: "GET", url: url + "/count")).body
        let count = try JSONDecoder().decode([String: Int].self, from: body.withUnsafeBytes { Data($0) })
        return count["requests"] ?? -1
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }
}

func grant(expiresIn seconds: Double, tokenEndpoint: String) -> Grant {
    Grant(
        provider: "bench", accessToken: "bench-access-0", refreshToken: "bench-refresh-0",
        expiresAt: Date().addingTimeInterval(seconds),
        providerConfiguration: ProviderConfiguration(tokenEndpoint: tokenEndpoint, clientID: "bench"), createdAt: Date()
    )
}

let endpoint = try TokenEndpoint(script: CommandLine.arguments[1])
defer { endpoint.stop() }
let home = FileManager.default.temporaryDirectory.appendingPathComponent("vault-bench-\(getpid())").path
defer { try? FileManager.default.removeItem(atPath: home) }
let store = try await VaultGrantStore.create(
    at: VaultLocation(directory: home + "/vault", configDirectory: home + "/config"),
    key: .keyfile(Keyfile.generate()))
let session = TokenSession(store: store)

// 1. A fresh grant: no refresh, a load from the open vault.
try await store.save(grant(expiresIn: 3600, tokenEndpoint: endpoint.url + "/token"), as: "fresh")
let clock = ContinuousClock()
var samples: [Duration] = []
for i in 0..<2100 {
    let elapsed = try await clock.measure { _ = try await session.freshGrant("fresh") }
    if i >= 100 { samples.append(elapsed) }  // the first hundred warm up
}
samples.sort()
func microseconds(_ d: Duration) -> String {
    String(format: "%.1f µs", Double(d.components.attoseconds) / 1e12 + Double(d.components.seconds) * 1e6)
}
print("fresh token of a fresh grant: median \(microseconds(samples[samples.count / 2]))", terminator: "")
print(", p90 \(microseconds(samples[samples.count * 9 / 10])) over \(samples.count) calls (goal: median ≤ 100 µs)")

// 2. One expired grant, 1,000 tasks at once.
try await store.save(grant(expiresIn: -10, tokenEndpoint: endpoint.url + "/token"), as: "expired")
let before = try await endpoint.requests()
let start = clock.now
let tokens = try await withThrowingTaskGroup(of: String?.self) { group in
    for _ in 0..<1000 { group.addTask { try await session.freshGrant("expired").grant.accessToken } }
    var all: Set<String?> = []
    for try await token in group { all.insert(token) }
    return all
}
let elapsed = clock.now - start
let made = try await endpoint.requests() - before
print(
    "1,000 concurrent tasks, one expired grant: \(made) token request(s), \(tokens.count) distinct token(s),"
        + " \(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000) ms"
        + " (goal: 1 request, 1 token)")
