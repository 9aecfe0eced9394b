internal import Foundation
internal import VaultCrypto
public import VaultHTTP

/// An HTTP transport that records requests and answers from a script,
/// for unit tests of protocol logic. Real servers prove the flows.
public final class FakeTransport: HTTPTransport, @unchecked Sendable {
    /// One recorded request: method, URL, headers and body as text.
    public struct Recorded: Sendable {
        public let method: String
        public let url: String
        public let headers: [String: String]
        public let body: String
    }

    /// The requests sent so far.
    public var requests: [Recorded] { lock.withLock { recorded } }
    private var recorded: [Recorded] = []
    private var answers: [(Int, String, [(String, String)])]
    private let lock = NSLock()

    /// Answers in order: status, body, headers.
    public init(_ answers: [(Int, String, [(String, String)])]) { self.answers = answers }

    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        var headers: [String: String] = [:]
        for h in request.headers { headers[h.name.lowercased()] = h.value }
        let body = request.body.map { $0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } } ?? ""
        let next = lock.withLock { () -> (Int, String, [(String, String)])? in
            recorded.append(Recorded(method: request.method, url: request.url, headers: headers, body: body))
            return answers.isEmpty ? nil : answers.removeFirst()
        }
        guard let (status, text, answerHeaders) = next else { throw HTTPError(.network, "no scripted answer left") }
        let bytes = (try? SecureBytes(copying: Array(text.utf8)))!
        return HTTPResponse(status: status, headers: answerHeaders.map { ($0.0.lowercased(), $0.1) }, body: bytes)
    }
}
