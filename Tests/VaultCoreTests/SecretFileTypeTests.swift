import Foundation
import Testing
import VaultTestSupport

@testable import VaultCore

@Suite("secret files that are not regular files")
struct SecretFileTypeTests {
    @Test("a shell's process substitution (/dev/fd/N, a pipe) is called not a regular file, not missing")
    func processSubstitution() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        _ = write(ends[1], "s3cret", 6)
        let path = "/dev/fd/\(ends[0])"
        for read in [
            { _ = try SecretFile.read(path: path) }, { _ = try SecretFile.read(path: path, limit: 65536) },
            { _ = try Keyfile.read(path: path) },
        ] as [() throws -> Void] {
            do {
                try read()
                Issue.record("read a pipe")
            } catch let error as VaultError {
                #expect(error.reason == "\(path) is not a regular file (a pipe or a device could block or change)")
                #expect(error.remedy == .secretFromFileOrCommand)
            }
        }
    }
}
