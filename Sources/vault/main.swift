import Glibc
import VaultCLI

// The environment as bytes: looking for `=` by characters would break every
// variable into grapheme clusters first, in every process.
var environment: [String: String] = [:]
var entry = environ
while let pointer = entry.pointee {
    let pair = UnsafeBufferPointer(
        start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))
    if let eq = pair.firstIndex(of: UInt8(ascii: "=")) {
        environment[String(decoding: pair[..<eq], as: UTF8.self)] = String(decoding: pair[(eq + 1)...], as: UTF8.self)
    }
    entry += 1
}
exit(CLI.main(arguments: CommandLine.arguments, environment: environment))
