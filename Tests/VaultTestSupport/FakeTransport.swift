public import VaultCrypto
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

    public private(set) var requests: [Recorded] = []
    private var answers: [(Int, String, [(String, String)])]

    /// Answers in order: status, body, headers.
    public init(_ answers: [(Int, String, [(String, String)])]) { self.answers = answers }

    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        var headers: [String: String] = [:]
        for h in request.headers { headers[h.name.lowercased()] = h.value }
        let body = request.body.map { $0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } } ?? ""
        requests.append(Recorded(method: request.method, url: request.url, headers: headers, body: body))
        guard !answers.isEmpty else { throw HTTPError(.network, "no scripted answer left") }
        let (status, text, answerHeaders) = answers.removeFirst()
        let bytes = (try? SecureBytes(copying: Array(text.utf8)))!
        return HTTPResponse(status: status, headers: answerHeaders.map { ($0.0.lowercased(), $0.1) }, body: bytes)
    }
}
