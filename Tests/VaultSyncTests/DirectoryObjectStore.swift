import Foundation
import Glibc
import VaultCrypto
import VaultHTTP

/// A store kind that only tests use, made through the seams a new kind
/// uses (CONTRIBUTING.md, "Adding a store kind"): objects are files in a
/// local folder, and a write under a precondition is a compare-and-swap
/// under an exclusive lock of the folder, so several processes may share
/// it. An object's validator is the SHA-256 of its bytes.
final class DirectoryObjectStore: ObjectStore {
    let folder: String
    let session = ObjectStoreSession()
    var baseURL: String { "file://" + folder + "/" }

    init(folder: String) { self.folder = folder }

    func get(_ name: String) throws(ObjectStoreFailure) -> StoreObject? {
        try Self.checkName(name)
        session.count(bytesSent: 0, answered: true)
        guard let data = FileManager.default.contents(atPath: path(name)) else { return nil }
        let bytes = [UInt8](data)
        return StoreObject(bytes: bytes, etag: try validator(bytes))
    }

    func etag(_ name: String) throws(ObjectStoreFailure) -> String? { try get(name)?.etag }

    func put(_ name: String, _ bytes: [UInt8], precondition: ObjectPrecondition, attempts: Int?)
        throws(ObjectStoreFailure) -> ObjectWriteResult
    {
        try Self.checkName(name)
        session.count(bytesSent: bytes.count, answered: true)
        return try locked { () throws(ObjectStoreFailure) -> ObjectWriteResult in
            let current = FileManager.default.contents(atPath: path(name)).map { [UInt8]($0) }
            switch precondition {
            case .none: break
            case .absent where current != nil: return .preconditionFailed
            case .matches(let etag) where try current.map(validator) != etag: return .preconditionFailed
            case .absent, .matches: break
            }
            let temporary = path(name) + ".new"
            guard FileManager.default.createFile(atPath: temporary, contents: Data(bytes)),
                rename(temporary, path(name)) == 0
            else { throw ObjectStoreFailure(.transient, "cannot write \(name) in the folder") }
            return .stored
        }
    }

    func delete(_ name: String) throws(ObjectStoreFailure) {
        try Self.checkName(name)
        session.count(bytesSent: 0, answered: true)
        try locked { () throws(ObjectStoreFailure) in _ = unlink(path(name)) }
    }

    func createFolder() throws(ObjectStoreFailure) -> [String] {
        guard !FileManager.default.fileExists(atPath: folder) else { return [] }
        do { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) } catch {
            throw ObjectStoreFailure(.missingFolder, "cannot create the folder")
        }
        return [baseURL]
    }

    func conditionalWritesProblem() throws(ObjectStoreFailure) -> String? { nil }

    private func path(_ name: String) -> String { folder + "/" + name }

    private func validator(_ bytes: [UInt8]) throws(ObjectStoreFailure) -> String {
        do { return "\"" + (try SHA256.hash(bytes)).map { String(format: "%02x", $0) }.joined() + "\"" } catch {
            throw ObjectStoreFailure(.invalid, error.reason)
        }
    }

    /// `body` under an exclusive lock of the folder's lock file.
    private func locked<T>(_ body: () throws(ObjectStoreFailure) -> T) throws(ObjectStoreFailure) -> T {
        let fd = open(folder + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0, flock(fd, LOCK_EX) == 0 else { throw ObjectStoreFailure(.transient, "cannot lock the folder") }
        defer { close(fd) }
        return try body()
    }
}
