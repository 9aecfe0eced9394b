import Foundation
import Glibc

/// A project test server (Tools/testservers/*.py) started on a free
/// loopback port for one test; it exits when its stdin closes.
public final class FixtureServer: @unchecked Sendable {
    public let port: Int
    private let process: Process
    private let stdin = Pipe()

    /// Starts `Tools/testservers/<script>` with python3.
    public init(script: String) throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [root.appendingPathComponent("Tools/testservers/\(script)").path]
        let out = Pipe()
        process.standardInput = stdin
        process.standardOutput = out
        try process.run()
        var line = [UInt8]()
        while true {
            let byte = out.fileHandleForReading.readData(ofLength: 1)
            guard let b = byte.first, b != 0x0a else { break }
            line.append(b)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            process.terminate()
            throw POSIXError(.EIO)
        }
        self.port = port
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    public var base: String { "http://127.0.0.1:\(port)" }

    deinit {
        try? stdin.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }
}
