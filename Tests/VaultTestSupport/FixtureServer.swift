public import Foundation
import Glibc

/// A project test server (Tools/testservers/*.py) started on loopback; it
/// prints one line (its port, or its settings as JSON) and exits when its
/// stdin closes, so it cannot outlive the test run.
public final class FixtureServer: @unchecked Sendable {
    /// The first line the server printed.
    public let firstLine: String
    /// The first line as a port number (0 when it is not one).
    public var port: Int { Int(firstLine) ?? 0 }
    private let process: Process
    private let stdin = Pipe()
    private let out = Pipe()

    /// The repository root.
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Starts `Tools/testservers/<script> ARGUMENTS` with python3.
    public init(script: String, arguments: [String] = []) throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [root.appendingPathComponent("Tools/testservers/\(script)").path] + arguments
        process.standardInput = stdin
        process.standardOutput = out
        try process.run()
        var line = [UInt8]()
        while true {
            let byte = out.fileHandleForReading.readData(ofLength: 1)
            guard let b = byte.first, b != 0x0a else { break }
            line.append(b)
        }
        guard !line.isEmpty else {
            process.terminate()
            throw POSIXError(.EIO)
        }
        firstLine = String(decoding: line, as: UTF8.self)
    }

    /// Sends one command line to a server that answers on its stdout (a
    /// control channel, such as socket_recorder.py's) and returns its
    /// one-line answer.
    public func ask(_ command: String) throws -> String {
        try stdin.fileHandleForWriting.write(contentsOf: Data((command + "\n").utf8))
        var line = [UInt8]()
        while true {
            let byte = out.fileHandleForReading.readData(ofLength: 1)
            guard let b = byte.first else { throw POSIXError(.EIO) }
            if b == 0x0a { break }
            line.append(b)
        }
        return String(decoding: line, as: UTF8.self)
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    public var base: String { "http://127.0.0.1:\(port)" }

    /// Stops the server now (a test of what happens when nothing answers).
    public func stop() {
        try? stdin.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning && Date() < deadline { usleep(20_000) }
    }

    deinit {
        // Closing stdin asks the script to stop its servers by PID; give it
        // the time to, and only then terminate it.
        try? stdin.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
