import Foundation
import VaultCrypto
import VaultHTTP

/// The sync store of a simulation: a WebDAV collection in memory, answering
/// what `ObjectStore` sends (GET, PUT with If-Match or If-None-Match,
/// DELETE, PROPFIND, MKCOL) as Apache does, with the faults the schedule
/// orders. It also keeps the simulation's bookkeeping of what each root
/// carries (`knowledge`).
final class SimStore: @unchecked Sendable {
    struct Object {
        var bytes: [UInt8]
        var etag: String
        var modified: Double
    }

    static let base = "http://127.0.0.1:9/store/"

    private(set) var objects: [String: Object] = [:]
    private var version = 0
    /// False: the store ignores If-Match and If-None-Match (rclone, nginx).
    var honoursPreconditions = true
    /// True: a conditional write is checked, then the store lets others in
    /// before it writes (Apache checks two writers before either writes).
    var checksBeforeWriting = false
    /// Faults the schedule ordered: the next requests answered 500, the
    /// next writes applied and their answers lost, the next requests
    /// dropped before they arrive.
    var failNext = 0
    var loseNext = 0
    var dropNext = 0
    /// Seconds the answer to the next request takes (0: the usual moment).
    var slowNext: Double = 0
    /// The edits each root's content carries, by the root's hash: what a
    /// machine that merges it learns (`Oracle`).
    private(set) var knowledge: [[UInt8]: Set<Int>] = [:]
    /// Counts for the report.
    private(set) var requests = 0
    private(set) var faults: [String: Int] = [:]

    /// Answers `request` from `machine`; `pause` lets other actors in
    /// between a conditional write's check and its write.
    func handle(_ request: HTTPRequest, from machine: SimMachine, now: Double, pause: () -> Void) throws(HTTPError)
        -> HTTPResponse
    {
        requests += 1
        if dropNext > 0 {
            dropNext -= 1
            faults["dropped", default: 0] += 1
            throw HTTPError(.network, "connection reset by the store")
        }
        if failNext > 0 {
            failNext -= 1
            faults["500", default: 0] += 1
            return response(500, now: now)
        }
        let name = String(request.url.dropFirst(SimStore.base.count))
        switch request.method {
        case "PROPFIND": return response(207, now: now)
        case "MKCOL": return response(405, now: now)
        case "GET", "HEAD":
            guard let object = objects[name] else { return response(404, now: now) }
            return response(
                200, now: now, etag: object.etag, modified: object.modified,
                body: request.method == "GET" ? object.bytes : [])
        case "PUT":
            let condition = precondition(request)
            if let refused = check(condition, name, now: now) { return refused }
            if condition != nil && checksBeforeWriting {
                pause()
                if machine.actor?.crashed == true { throw HTTPError(.network, "the process was killed") }
            }
            version += 1
            let created = objects[name] == nil
            let bytes = request.body?.unsafeCopyToArray() ?? []
            objects[name] = Object(bytes: bytes, etag: "\"\(version)\"", modified: now)
            if name == "vault-root", let hash = try? GenericHash.hash(bytes) { knowledge[hash] = machine.known }
            try loseAnswer()
            return response(created ? 201 : 204, now: now)
        case "DELETE":
            let existed = objects.removeValue(forKey: name) != nil
            try loseAnswer()
            return response(existed ? 204 : 404, now: now)
        default:
            return response(405, now: now)
        }
    }

    /// The root's bytes now, if any.
    var root: [UInt8]? { objects["vault-root"]?.bytes }

    private enum Condition: Equatable {
        case absent
        case matches(String)
    }

    private func precondition(_ request: HTTPRequest) -> Condition? {
        for (name, value) in request.headers {
            switch name.lowercased() {
            case "if-none-match" where value == "*": return .absent
            case "if-match": return .matches(value)
            default: continue
            }
        }
        return nil
    }

    private func check(_ condition: Condition?, _ name: String, now: Double) -> HTTPResponse? {
        guard honoursPreconditions, let condition else { return nil }
        switch condition {
        case .absent where objects[name] != nil: return response(412, now: now)
        case .matches(let etag) where objects[name]?.etag != etag: return response(412, now: now)
        case .absent, .matches: return nil
        }
    }

    private func loseAnswer() throws(HTTPError) {
        guard loseNext > 0 else { return }
        loseNext -= 1
        faults["lost answers", default: 0] += 1
        throw HTTPError(.network, "the connection broke before the store's answer arrived")
    }

    private func response(
        _ status: Int, now: Double, etag: String? = nil, modified: Double? = nil, body: [UInt8] = []
    ) -> HTTPResponse {
        var headers: [(name: String, value: String)] = [("date", SimStore.httpDate(now))]
        if let etag { headers.append(("etag", etag)) }
        if let modified { headers.append(("last-modified", SimStore.httpDate(modified))) }
        if !body.isEmpty { headers.append(("content-type", "application/octet-stream")) }
        return HTTPResponse(status: status, headers: headers, body: SimStore.secure(body))
    }

    /// `bytes` in secure memory, as a transport hands a body over; a
    /// simulation that cannot allocate it stops.
    static func secure(_ bytes: [UInt8]) -> SecureBytes {
        do { return try SecureBytes(copying: bytes) } catch {
            fatalError("the simulation cannot allocate secure memory")
        }
    }

    /// An HTTP date (RFC 9110 IMF-fixdate) with whole seconds, as servers send.
    static func httpDate(_ seconds: Double) -> String {
        var t = time_t(seconds.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return
            "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
