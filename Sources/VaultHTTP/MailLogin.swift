internal import CCurl
internal import Glibc
package import VaultCrypto

/// The mail protocols a login can be tried with.
package enum MailProtocol: String, Sendable {
    case imap, smtp
}

/// How a mail connection is protected.
package enum MailSecurity: String, Sendable {
    /// TLS from the first byte (imaps, smtps).
    case tls
    /// A plain connection that must switch to TLS with STARTTLS before the
    /// login; a server that does not offer it is not logged in to.
    case starttls
    /// No TLS: the token crosses in clear, so callers allow it only to a
    /// loopback host.
    case plain
}

/// The SASL mechanisms that carry an OAuth bearer token.
package enum BearerMechanism: String, Sendable {
    /// Google's and Microsoft's `user=...^Aauth=Bearer ...^A^A`.
    case xoauth2 = "XOAUTH2"
    /// RFC 7628.
    case oauthbearer = "OAUTHBEARER"
}

/// Where and how to try one login with a bearer token.
package struct MailLoginRequest: Sendable {
    package var mailProtocol: MailProtocol
    /// A host name, an IPv4 address or a bracketed IPv6 address.
    package var host: String
    package var port: Int
    package var security: MailSecurity
    package var mechanism: BearerMechanism
    /// The SASL user name.
    package var user: String
    /// A CA bundle to trust instead of the system's.
    package var caBundle: String?
    package var connectTimeout = 10.0
    package var timeout = 30.0

    /// A request with the default timeouts.
    package init(
        mailProtocol: MailProtocol, host: String, port: Int, security: MailSecurity, mechanism: BearerMechanism,
        user: String, caBundle: String?
    ) {
        self.mailProtocol = mailProtocol
        self.host = host
        self.port = port
        self.security = security
        self.mechanism = mechanism
        self.user = user
        self.caBundle = caBundle
    }

    /// The URL libcurl connects to (no user info: the user goes as an option).
    var url: String {
        let scheme = mailProtocol.rawValue + (security == .tls ? "s" : "")
        return "\(scheme)://\(host):\(port)/"
    }
}

/// What came of a login: how it ended and what the server said.
package struct MailLoginResult: Sendable {
    /// How the attempt ended.
    package enum Outcome: Sendable, Equatable {
        /// The server accepted the token (and a NOOP after it).
        case loggedIn
        /// The server refused the login.
        case refused
        /// The server could not be reached, or the connection broke or timed out.
        case unreachable(String)
        /// The host refused the connection: nothing listens at the port.
        case nothingListening
        /// The connection was made and the server said nothing until the
        /// time ran out: a port that wants TLS from the first byte waits
        /// for a handshake a client expecting a greeting never starts.
        case silent
        /// TLS failed: the handshake, or STARTTLS not offered.
        case tls(String)
        /// The handshake got as far as the server's certificate, which did
        /// not verify: why, in words (a CA this system does not trust, expired).
        case untrustedCertificate(String)
        /// The server answered something that is not the protocol.
        case protocolError(String)
        /// The server's greeting is another protocol's (an SMTP `220` to
        /// IMAP, an IMAP `* OK` to SMTP): the port is the wrong one. Holds
        /// the protocol it spoke when the greeting says (`SMTP`, `IMAP`,
        /// `POP3`), nil when it is no mail protocol's.
        case wrongProtocol(String?)
        /// The server accepted the token, then failed (SMTP submission
        /// whose relay is down, an IMAP server that cannot open the
        /// mailbox): `afterLogin` holds its words.
        case failedAfterLogin(String)

        /// True when the server accepted the token, whatever came after.
        package var loggedIn: Bool {
            switch self {
            case .loggedIn, .failedAfterLogin: true
            default: false
            }
        }
    }

    /// How the attempt ended.
    package let outcome: Outcome
    /// The server's lines in order, without line endings. A line that
    /// repeats the token, as it is or in base64, is `MailLogin.withheld`.
    package let lines: [String]

    /// The SASL mechanisms the server offered, from its last capability
    /// list that names any (IMAP `AUTH=...`, SMTP `250 AUTH ...`).
    package var mechanisms: [String] {
        var found: [String] = []
        for line in lines {
            var words: [Substring] = []
            if let range = line.firstRange(of: "CAPABILITY ") {
                let rest = line[range.upperBound...]
                words = rest.prefix { $0 != "]" }.split(separator: " ").filter { $0.hasPrefix("AUTH=") }
                    .map { $0.dropFirst(5) }
            } else if line.hasPrefix("250-AUTH") || line.hasPrefix("250 AUTH") {
                words = line.dropFirst(8).split(whereSeparator: { $0 == " " || $0 == "=" })
            }
            if !words.isEmpty { found = words.map { $0.uppercased() } }
        }
        return found
    }

    /// The protocol a server's first line is the greeting of: `IMAP`
    /// (`* OK`, `* PREAUTH`, `* BYE`), `SMTP` (three digits), `POP3`
    /// (`+OK`), or nil for anything else.
    package static func greetingProtocol(_ line: String) -> String? {
        if line.hasPrefix("* OK") || line.hasPrefix("* PREAUTH") || line.hasPrefix("* BYE") { return "IMAP" }
        if line.hasPrefix("+OK") || line.hasPrefix("-ERR") { return "POP3" }
        let bytes = Array(line.utf8.prefix(4))
        if bytes.count >= 3, bytes.prefix(3).allSatisfy({ (0x30...0x39).contains($0) }),
            bytes.count == 3 || bytes[3] == UInt8(ascii: " ") || bytes[3] == UInt8(ascii: "-")
        {
            return "SMTP"
        }
        return nil
    }

    /// The server's refusal: its last IMAP `NO` or `BAD`, or SMTP 4xx or 5xx line.
    package var refusal: String? { lines.last(where: MailLoginResult.isRefusal) }

    /// Whether `line` is an IMAP tagged `NO` or `BAD`, or an SMTP 4xx or 5xx reply.
    static func isRefusal(_ line: String) -> Bool {
        let words = line.split(separator: " ", maxSplits: 2)
        if words.count >= 2, words[0] != "*", words[0] != "+", words[1] == "NO" || words[1] == "BAD" {
            return true
        }
        guard let first = line.utf8.first, first == UInt8(ascii: "4") || first == UInt8(ascii: "5") else {
            return false
        }
        return line.utf8.count >= 3 && line.utf8.prefix(3).allSatisfy { (0x30...0x39).contains($0) }
    }

    /// Where in `lines` the server accepted the login: SMTP's `235`, or
    /// IMAP's tagged answer to the SASL exchange (the first tagged line
    /// after a `+` go-ahead) when it is `OK`.
    package var loginAccepted: Int? {
        var goAhead = false
        for (i, line) in lines.enumerated() {
            if line == "235" || line.hasPrefix("235 ") || line.hasPrefix("235-") { return i }
            if line.hasPrefix("+") {
                goAhead = true
                continue
            }
            guard goAhead, !line.hasPrefix("*") else { continue }
            let words = line.split(separator: " ", maxSplits: 2)
            guard words.count >= 2 else { continue }
            return words[1] == "OK" ? i : nil
        }
        return nil
    }

    /// What the server said after it accepted the login, when that was a
    /// failure: its first IMAP `NO`, `BAD` or `BYE`, or SMTP 4xx or 5xx,
    /// after the acceptance.
    package var afterLogin: String? {
        guard let accepted = loginAccepted else { return nil }
        return lines[(accepted + 1)...].first { $0.hasPrefix("* BYE") || MailLoginResult.isRefusal($0) }
    }

    /// The server's last SASL challenge (`+ ...` or `334 ...`) decoded from
    /// base64, when it is text: XOAUTH2 servers send a JSON status there
    /// when they refuse a token.
    package var challenge: String? {
        for line in lines.reversed() {
            let payload: Substring
            if line.hasPrefix("+ ") {
                payload = line.dropFirst(2)
            } else if line.hasPrefix("334 ") {
                payload = line.dropFirst(4)
            } else {
                continue
            }
            let trimmed = payload.trimmingWhitespace()
            guard !trimmed.isEmpty, let bytes = Base64.decode(Array(trimmed.utf8), .standard),
                let text = String(validating: bytes, as: UTF8.self), !text.isEmpty,
                text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f })
            else { return nil }
            return text
        }
        return nil
    }
}

/// One IMAP or SMTP login with an OAuth bearer token over libcurl, for
/// `vault test`: libcurl speaks the protocol, STARTTLS and SASL; this
/// keeps what the server said and never lets the token out.
package enum MailLogin {
    /// What stands in `lines` for a server line that repeats the token.
    package static let withheld = "[a line that repeats the access token, not shown]"

    /// Connects, logs in as `request.user` with `token`, sends a NOOP and
    /// disconnects. Throws only when libcurl cannot be used at all.
    package static func attempt(_ request: MailLoginRequest, token: SecureBytes) throws(HTTPError) -> MailLoginResult {
        let easy = try EasyHandle()
        let collector = ServerLines(token: token, expecting: request.mailProtocol)
        try easy.configureMail(request, token: token, collector: collector)
        let rc = easy.perform(bodyKeptAlive: nil)
        let lines = collector.lines
        if collector.overflowed {
            return MailLoginResult(outcome: .protocolError("the server said more than a login needs"), lines: lines)
        }
        if collector.wrongGreeting, let first = lines.first {
            return MailLoginResult(outcome: .wrongProtocol(MailLoginResult.greetingProtocol(first)), lines: lines)
        }
        var result = MailLoginResult(outcome: outcome(rc), lines: lines)
        if rc == CURLE_COULDNT_CONNECT {
            // Refused: the host is there, and no server at that port.
            var code = 0
            _ = vault_curl_getinfo_long(easy.handle, CURLINFO_OS_ERRNO, &code)
            if code == Int(ECONNREFUSED) { result = MailLoginResult(outcome: .nothingListening, lines: lines) }
        }
        if rc == CURLE_OPERATION_TIMEDOUT && lines.isEmpty {
            // Connected (libcurl times the connection once it is made),
            // then nothing: not a host that cannot be reached.
            var connected: curl_off_t = 0
            _ = vault_curl_getinfo_off_t(easy.handle, CURLINFO_CONNECT_TIME_T, &connected)
            if connected > 0 { result = MailLoginResult(outcome: .silent, lines: lines) }
        }
        if rc == CURLE_PEER_FAILED_VERIFICATION {
            var code = 0
            _ = vault_curl_getinfo_long(easy.handle, CURLINFO_SSL_VERIFYRESULT, &code)
            result = MailLoginResult(
                outcome: .untrustedCertificate(certificateProblem(code, host: request.host)), lines: lines)
        }
        // A failure after the server took the token is not the login's.
        guard result.loginAccepted != nil else { return result }
        switch result.outcome {
        case .unreachable(let why), .protocolError(let why), .tls(let why):
            return MailLoginResult(outcome: .failedAfterLogin(why), lines: lines)
        default: return result
        }
    }

    /// OpenSSL's verification result (`X509_V_ERR_*`, which libcurl
    /// reports as `CURLINFO_SSL_VERIFYRESULT`) in words.
    static func certificateProblem(_ code: Int, host: String) -> String {
        switch code {
        case 2, 19, 20, 21: "it comes from a CA this system does not trust"
        case 18: "it is self-signed"
        case 9: "it is not valid yet"
        case 10: "it has expired"
        case 62: "it is not valid for \(host)"
        default: "it did not verify (for \(host), from a CA this system trusts)"
        }
    }

    static func outcome(_ rc: CURLcode) -> MailLoginResult.Outcome {
        let text = String(cString: vault_curl_strerror(rc)).lowercased()
        switch rc {
        case CURLE_OK: return .loggedIn
        case CURLE_LOGIN_DENIED: return .refused
        case CURLE_USE_SSL_FAILED: return .tls("the server does not offer STARTTLS")
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return .tls(text)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT,
            CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING:
            return .unreachable(text)
        default: return .protocolError(text)
        }
    }
}

extension EasyHandle {
    /// Sets up an IMAP or SMTP login: the bearer token as libcurl's
    /// XOAUTH2 bearer, the mechanism as its login option, TLS verified, no
    /// verbose output (it would show the SASL response), server lines to
    /// `collector`, and NOOP as the one command after the login.
    func configureMail(_ r: MailLoginRequest, token: SecureBytes, collector: ServerLines) throws(HTTPError) {
        try check(vault_curl_setopt_string(handle, CURLOPT_URL, keep(r.url)), "the url")
        try check(vault_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "imap,imaps,smtp,smtps"), "protocols")
        try check(vault_curl_setopt_long(handle, CURLOPT_VERBOSE, 0), "verbose")
        let ssl = r.security == .plain ? CURLUSESSL_NONE : CURLUSESSL_ALL
        try check(vault_curl_setopt_long(handle, CURLOPT_USE_SSL, Int(ssl.rawValue)), "tls")
        try check(vault_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1), "tls verification")
        try check(vault_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2), "tls host verification")
        if let ca = r.caBundle {
            try check(vault_curl_setopt_string(handle, CURLOPT_CAINFO, keep(ca)), "the ca bundle")
        }
        // A proxy would see a plain connection, and the token in it.
        if r.security == .plain {
            try check(vault_curl_setopt_string(handle, CURLOPT_NOPROXY, "*"), "no proxy")
        }
        try check(vault_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1), "nosignal")
        try check(vault_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(r.connectTimeout * 1000)), "timeout")
        try check(vault_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(r.timeout * 1000)), "timeout")
        try check(vault_curl_setopt_long(handle, CURLOPT_NETRC, Int(CURL_NETRC_IGNORED.rawValue)), "netrc")
        try check(vault_curl_setopt_string(handle, CURLOPT_USERNAME, keep(r.user)), "the user")
        try check(
            vault_curl_setopt_string(handle, CURLOPT_LOGIN_OPTIONS, keep("AUTH=" + r.mechanism.rawValue)),
            "the mechanism")
        try setSecret(CURLOPT_XOAUTH2_BEARER, token, "the token")
        // Without an initial response the SASL response goes on a line of
        // its own after the server's go-ahead, which a 1-2 KB token needs
        // with SMTP (RFC 4954's line limit).
        try check(vault_curl_setopt_long(handle, CURLOPT_SASL_IR, 0), "sasl initial response")
        try check(vault_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, "NOOP"), "the command")
        let context = Unmanaged.passUnretained(collector).toOpaque()
        try check(vault_curl_setopt_callback(handle, CURLOPT_WRITEFUNCTION, ServerLines.onData), "data callback")
        try check(vault_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context), "data context")
        try check(vault_curl_setopt_callback(handle, CURLOPT_HEADERFUNCTION, ServerLines.onLine), "line callback")
        try check(vault_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context), "line context")
    }
}

/// Collects the server's response lines, which libcurl passes to its
/// header callback for IMAP and SMTP (never what the client sent). Each
/// line is checked for the token before it is kept.
final class ServerLines {
    private let token: SecureBytes
    private(set) var lines: [String] = []
    private var size = 0
    private(set) var overflowed = false
    /// The protocol whose greeting the first line must be.
    private let expected: MailProtocol
    /// Set when the first line was not that greeting: libcurl is stopped
    /// there, as it would wait out its timeout for a greeting that never
    /// comes (an SMTP server's `220` is no IMAP `* OK`).
    private(set) var wrongGreeting = false
    static let maximumLines = 500
    static let maximumBytes = 256 * 1024

    init(token: SecureBytes, expecting: MailProtocol) {
        self.token = token
        self.expected = expecting
    }

    static let onLine: vault_curl_data_callback = { data, size, count, context in
        let collector = Unmanaged<ServerLines>.fromOpaque(context!).takeUnretainedValue()
        let n = size * count
        guard let data else { return n }
        collector.size += n
        guard collector.lines.count < maximumLines, collector.size <= maximumBytes else {
            collector.overflowed = true
            return 0  // makes libcurl stop
        }
        var bytes = Array(UnsafeRawBufferPointer(start: data, count: n))
        while let last = bytes.last, last == 0x0a || last == 0x0d { bytes.removeLast() }
        collector.lines.append(
            TokenEcho.repeats(bytes, token: collector.token)
                ? MailLogin.withheld : String(decoding: bytes, as: UTF8.self))
        secureZero(&bytes)
        if collector.lines.count == 1,
            MailLoginResult.greetingProtocol(collector.lines[0]) != collector.expected.rawValue.uppercased()
        {
            collector.wrongGreeting = true
            return 0  // makes libcurl stop
        }
        return n
    }

    /// Untagged data after the NOOP: not needed, and not written anywhere.
    static let onData: vault_curl_data_callback = { _, size, count, _ in size * count }
}

/// Whether a server line repeats a token: a run of it (16 bytes, or the
/// whole token when shorter) as it is, or inside any base64 word of the
/// line, decoded at each of its four alignments. A server that echoes the
/// SASL response back, whole or cut, is caught either way.
enum TokenEcho {
    static func repeats(_ line: [UInt8], token: SecureBytes) -> Bool {
        token.withUnsafeBytes { secret in
            let secretBytes = secret.bindMemory(to: UInt8.self)
            let window = min(16, secretBytes.count)
            guard window > 0 else { return false }
            if contains(line, secretBytes, window: window) { return true }
            for word in base64Words(line) {
                for offset in 0..<4 where word.count - offset >= 4 {
                    guard var decoded = decode(Array(word.dropFirst(offset))) else { continue }
                    defer { secureZero(&decoded) }
                    if contains(decoded, secretBytes, window: window) { return true }
                }
            }
            return false
        }
    }

    /// Whether `haystack` holds any `window`-byte run of `secret`.
    static func contains(_ haystack: [UInt8], _ secret: UnsafeBufferPointer<UInt8>, window: Int) -> Bool {
        guard haystack.count >= window else { return false }
        for start in 0...(haystack.count - window) {
            for s in 0...(secret.count - window) where haystack[start] == secret[s] {
                var k = 1
                while k < window && haystack[start + k] == secret[s + k] { k += 1 }
                if k == window { return true }
            }
        }
        return false
    }

    /// Runs of base64 characters (either alphabet) of at least 8 bytes.
    static func base64Words(_ line: [UInt8]) -> [ArraySlice<UInt8>] {
        func isBase64(_ b: UInt8) -> Bool {
            (0x41...0x5a).contains(b) || (0x61...0x7a).contains(b) || (0x30...0x39).contains(b)
                || b == UInt8(ascii: "+") || b == UInt8(ascii: "/") || b == UInt8(ascii: "-")
                || b == UInt8(ascii: "_") || b == UInt8(ascii: "=")
        }
        return line.split(whereSeparator: { !isBase64($0) }).filter { $0.count >= 8 }
    }

    /// Decodes base64 of either alphabet, padded or not, cut to whole
    /// four-character groups.
    static func decode(_ word: [UInt8]) -> [UInt8]? {
        var normalized: [UInt8] = word.compactMap {
            switch $0 {
            case UInt8(ascii: "="): return nil
            case UInt8(ascii: "+"): return UInt8(ascii: "-")
            case UInt8(ascii: "/"): return UInt8(ascii: "_")
            default: return $0
            }
        }
        normalized.removeLast(normalized.count % 4)
        defer { secureZero(&normalized) }
        return Base64.decode(normalized, .urlSafeUnpadded)
    }
}
