internal import CCurl
internal import Glibc
internal import VaultCrypto

/// HTTP over libcurl: TLS verification always on, http and https only,
/// timeouts, a redirect limit, a response size cap, and proxy variables
/// (`https_proxy`, `no_proxy`, ...) honoured as libcurl does.
public struct CurlTransport: HTTPTransport, Sendable {
    /// A CA bundle to trust instead of the system's (`SSL_CERT_FILE`).
    public var caBundle: String?
    /// The User-Agent header.
    public var userAgent = "vault/0.1"

    /// Creates a transport; `caBundle` overrides the system certificates.
    public init(caBundle: String? = nil) {
        self.caBundle = caBundle
    }

    /// Performs one exchange with libcurl.
    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        try URLPolicy.check(request.url)
        let easy = try EasyHandle()
        let collector = ResponseCollector(limit: request.maximumResponseSize)
        try easy.configure(request, collector: collector, transport: self)
        let rc = easy.perform(bodyKeptAlive: request.body)
        if collector.overflowed {
            throw HTTPError(
                .tooLarge,
                "the response from \(URLPolicy.redacted(request.url)) is larger than \(request.maximumResponseSize) bytes"
            )
        }
        guard rc == CURLE_OK else { throw EasyHandle.error(rc, url: request.url) }
        let status = easy.responseCode()
        return HTTPResponse(status: status, headers: collector.finalHeaders(), body: try collector.body())
    }
}

/// Owns one `CURL *` and what it borrows (header list, strings), freed in
/// `deinit` after the handle.
final class EasyHandle {
    let handle: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var retained: [UnsafeMutablePointer<CChar>] = []

    init() throws(HTTPError) {
        var message: UnsafePointer<CChar>?
        guard vault_curl_load(&message) == 0 else {
            throw HTTPError(.unavailable, message.map { String(cString: $0) } ?? "cannot load libcurl")
        }
        guard let h = vault_curl_easy_init() else { throw HTTPError(.unavailable, "libcurl could not start a request") }
        handle = h
    }

    deinit {
        vault_curl_easy_cleanup(handle)
        vault_curl_slist_free_all(headerList)
        for p in retained { free(p) }
    }

    func check(_ rc: CURLcode, _ what: String) throws(HTTPError) {
        guard rc == CURLE_OK else { throw HTTPError(.unavailable, "libcurl refused \(what)") }
    }

    /// A C string that lives as long as the handle (libcurl copies most
    /// strings, but not all options promise to).
    func keep(_ s: String) -> UnsafeMutablePointer<CChar> {
        let p = strdup(s)!
        retained.append(p)
        return p
    }

    func configure(_ r: HTTPRequest, collector: ResponseCollector, transport: CurlTransport) throws(HTTPError) {
        try check(vault_curl_setopt_string(handle, CURLOPT_URL, keep(r.url)), "the url")
        try check(vault_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"), "protocols")
        // Redirects may only go to https, so they cannot downgrade.
        try check(vault_curl_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "https"), "redirect protocols")
        try check(vault_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, r.followRedirects ? 1 : 0), "redirects")
        try check(vault_curl_setopt_long(handle, CURLOPT_MAXREDIRS, r.maximumRedirects), "redirect limit")
        try check(vault_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1), "tls verification")
        try check(vault_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2), "tls host verification")
        if let ca = transport.caBundle {
            try check(vault_curl_setopt_string(handle, CURLOPT_CAINFO, keep(ca)), "the ca bundle")
        }
        try check(vault_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1), "nosignal")
        try check(vault_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(r.connectTimeout * 1000)), "timeout")
        try check(vault_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(r.timeout * 1000)), "timeout")
        try check(vault_curl_setopt_string(handle, CURLOPT_USERAGENT, keep(transport.userAgent)), "user agent")
        try check(vault_curl_setopt_string(handle, CURLOPT_ACCEPT_ENCODING, ""), "encodings")
        // Never read ~/.netrc or send credentials the caller did not give.
        try check(vault_curl_setopt_long(handle, CURLOPT_NETRC, Int(CURL_NETRC_IGNORED.rawValue)), "netrc")
        if let signature = r.awsSignature { try sign(with: signature) }

        let method = r.method.uppercased()
        switch method {
        case "GET": try check(vault_curl_setopt_long(handle, CURLOPT_HTTPGET, 1), "get")
        case "HEAD": try check(vault_curl_setopt_long(handle, CURLOPT_NOBODY, 1), "head")
        default: try check(vault_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, keep(method)), "the method")
        }
        if let body = r.body {
            // Point libcurl at the secure buffer itself: no copy of the
            // secret outside guarded memory. The caller's request keeps
            // `body` alive until perform returns.
            try body.withUnsafeBytes { (b: UnsafeRawBufferPointer) throws(HTTPError) in
                try check(
                    vault_curl_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(b.count)), "body size")
                try check(
                    vault_curl_setopt_pointer(
                        handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: b.baseAddress)), "the body")
            }
        }
        var list: UnsafeMutablePointer<curl_slist>? = nil
        // An empty Expect stops libcurl from waiting for "100 Continue"
        // (which it asks for only above 1 MiB). Not when signing: libcurl
        // would sign the header it then leaves out, and the store would
        // find the signature wrong.
        let expect = r.awsSignature == nil ? ["Expect:"] : []
        for line in r.headers.map({ "\($0.name): \($0.value)" }) + expect {
            list = vault_curl_slist_append(list, line)
        }
        headerList = list
        try check(vault_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, list), "headers")

        let context = Unmanaged.passUnretained(collector).toOpaque()
        try check(vault_curl_setopt_callback(handle, CURLOPT_WRITEFUNCTION, ResponseCollector.onBody), "body callback")
        try check(vault_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context), "body context")
        try check(
            vault_curl_setopt_callback(handle, CURLOPT_HEADERFUNCTION, ResponseCollector.onHeader), "header callback")
        try check(vault_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context), "header context")
    }

    /// AWS Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4): it signs the
    /// method, path, query, host, `x-amz-date` (its own) and the headers the
    /// request sets, taking the payload hash from `x-amz-content-sha256`.
    /// libcurl copies the secret from a NUL-terminated secure buffer.
    private func sign(with signature: AWSSignature) throws(HTTPError) {
        let scope = "aws:amz:\(signature.region):\(signature.service)"
        try check(vault_curl_setopt_string(handle, CURLOPT_AWS_SIGV4, keep(scope)), "aws signing")
        try check(vault_curl_setopt_string(handle, CURLOPT_USERNAME, keep(signature.accessKeyID)), "the access key id")
        try setSecret(CURLOPT_PASSWORD, signature.secretAccessKey, "the secret access key")
    }

    /// Hands libcurl a secret string option from a NUL-terminated copy in
    /// secure memory; libcurl keeps its own copy.
    func setSecret(_ option: CURLoption, _ secret: SecureBytes, _ what: String) throws(HTTPError) {
        let terminated: SecureBytes
        do {
            terminated = try SecureBytes(count: secret.count + 1) { dst in
                secret.withUnsafeBytes { src in
                    if let base = src.baseAddress { dst.baseAddress!.copyMemory(from: base, byteCount: src.count) }
                }
                dst[secret.count] = 0
            }
        } catch {
            throw HTTPError(.unavailable, error.reason)
        }
        try terminated.withUnsafeBytes { (b: UnsafeRawBufferPointer) throws(HTTPError) in
            try check(
                vault_curl_setopt_string(handle, option, b.baseAddress!.assumingMemoryBound(to: CChar.self)), what)
        }
    }

    func perform(bodyKeptAlive body: SecureBytes?) -> CURLcode {
        withExtendedLifetime(body) { vault_curl_perform(handle) }
    }

    func responseCode() -> Int {
        var code = 0
        _ = vault_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    static func error(_ rc: CURLcode, url: String) -> HTTPError {
        let text = String(cString: vault_curl_strerror(rc)).lowercased()
        let place = URLPolicy.redacted(url)
        switch rc {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT,
            CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            var error = HTTPError(.network, "\(place): \(text)")
            switch rc {
            case CURLE_COULDNT_RESOLVE_HOST: error.cause = .resolveHost
            case CURLE_COULDNT_RESOLVE_PROXY: error.cause = .resolveProxy
            case CURLE_COULDNT_CONNECT: error.cause = .connect
            case CURLE_OPERATION_TIMEDOUT: error.cause = .timeout
            default: break
            }
            return error
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return HTTPError(.tls, "\(place): \(text)")
        case CURLE_TOO_MANY_REDIRECTS, CURLE_UNSUPPORTED_PROTOCOL:
            return HTTPError(.redirect, "\(place): \(text)")
        case CURLE_URL_MALFORMAT:
            return HTTPError(.refusedURL, "\(place): \(text)")
        default:
            return HTTPError(.network, "\(place): \(text)")
        }
    }
}

/// Collects a response from libcurl's callbacks: body chunks (wiped once
/// assembled into secure memory) and the headers of the last response.
final class ResponseCollector {
    let limit: Int
    private var chunks: [[UInt8]] = []
    private var size = 0
    private(set) var overflowed = false
    private var headers: [(name: String, value: String)] = []

    init(limit: Int) { self.limit = limit }

    deinit {
        for i in chunks.indices { secureZero(&chunks[i]) }
    }

    static let onBody: vault_curl_data_callback = { data, size, count, context in
        let collector = Unmanaged<ResponseCollector>.fromOpaque(context!).takeUnretainedValue()
        let n = size * count
        guard collector.size + n <= collector.limit else {
            collector.overflowed = true
            return 0  // makes libcurl stop with a write error
        }
        if n > 0, let data {
            collector.chunks.append(Array(UnsafeRawBufferPointer(start: data, count: n)))
            collector.size += n
        }
        return n
    }

    static let onHeader: vault_curl_data_callback = { data, size, count, context in
        let collector = Unmanaged<ResponseCollector>.fromOpaque(context!).takeUnretainedValue()
        let n = size * count
        guard let data else { return n }
        let line = String(decoding: UnsafeRawBufferPointer(start: data, count: n), as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            collector.headers = []  // a new response (after a redirect or 100)
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingWhitespace()
            collector.headers.append((name, value))
        }
        return n
    }

    func finalHeaders() -> [(name: String, value: String)] { headers }

    func body() throws(HTTPError) -> SecureBytes {
        do {
            let out = try SecureBytes(count: size) { dst in
                var offset = 0
                for chunk in chunks {
                    chunk.withUnsafeBytes {
                        dst.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count)
                    }
                    offset += chunk.count
                }
            }
            for i in chunks.indices { secureZero(&chunks[i]) }
            chunks = []
            return out
        } catch {
            throw HTTPError(.unavailable, error.reason)
        }
    }
}

extension Substring {
    func trimmingWhitespace() -> String {
        // "\r\n" is a single Character, which isWhitespace covers.
        guard let start = firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let end = lastIndex(where: { !$0.isWhitespace })!
        return String(self[start...end])
    }
}
