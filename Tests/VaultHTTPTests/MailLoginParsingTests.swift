import Foundation
import Testing
import VaultCrypto

@testable import VaultHTTP

@Suite("mail logins: reading the server's lines")
struct MailLoginParsingTests {
    let token = "ya29.a0AfB_byC-secretTokenValue_0123456789abcdefXYZ"

    func repeats(_ line: String) throws -> Bool {
        TokenEcho.repeats(Array(line.utf8), token: try SecureBytes(copying: Array(token.utf8)))
    }

    @Test("a line repeating the token, whole, cut, or in base64 at any alignment, is caught")
    func echoes() throws {
        let response = Array("user=ada\u{1}auth=Bearer \(token)\u{1}\u{1}".utf8)
        let b64 = Data(response).base64EncodedString()
        let urlSafe = b64.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        for shift in 0..<3 {
            let shifted = Data(response.dropFirst(shift)).base64EncodedString()
            #expect(try repeats("+ " + shifted), "shift \(shift)")
            #expect(try repeats("A2 NO [ALERT] " + String(shifted.dropFirst(8).prefix(60))), "cut at shift \(shift)")
        }
        #expect(try repeats("* OK " + token))
        #expect(try repeats("A2 NO bad token " + token.dropFirst(10).prefix(20)))
        #expect(try repeats("334 " + urlSafe.replacingOccurrences(of: "=", with: "")))
        // Positive controls: ordinary lines are kept.
        #expect(
            try !repeats(
                "+ eyJzdGF0dXMiOiI0MDAiLCJzY2hlbWVzIjoiQmVhcmVyIiwic2NvcGUiOiJodHRwczovL21haWwuZ29vZ2xlLmNvbS8ifQ=="))
        #expect(try !repeats("A002 NO [AUTHENTICATIONFAILED] Authentication failed."))
        #expect(try !repeats("250-AUTH XOAUTH2 OAUTHBEARER PLAIN"))
    }

    @Test("a server's first line names the protocol it greets with")
    func greetings() {
        for (line, spoken) in [
            ("* OK [CAPABILITY IMAP4rev1] Dovecot ready.", "IMAP"), ("* PREAUTH ready", "IMAP"),
            ("* BYE too many connections", "IMAP"), ("220 vm Dovecot (Debian) ready.", "SMTP"),
            ("220-smtp.example.com ESMTP", "SMTP"), ("554", "SMTP"), ("+OK Dovecot ready.", "POP3"),
        ] {
            #expect(MailLoginResult.greetingProtocol(line) == spoken, "\(line)")
        }
        for line in ["SSH-2.0-OpenSSH_9.2", "HTTP/1.1 400 Bad Request", "2200 x", "22 x", "", "*OK"] {
            #expect(MailLoginResult.greetingProtocol(line) == nil, "\(line)")
        }
    }

    @Test("mechanisms, the refusal and the decoded challenge")
    func reading() {
        let imap = MailLoginResult(
            outcome: .refused,
            lines: [
                "* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] ready", "* CAPABILITY IMAP4rev1 AUTH=XOAUTH2 AUTH=OAUTHBEARER",
                "A001 OK done",
                "+ eyJzdGF0dXMiOiI0MDAiLCJzY2hlbWVzIjoiQmVhcmVyIiwic2NvcGUiOiJodHRwczovL21haWwuZ29vZ2xlLmNvbS8ifQ==",
                "A002 NO [AUTHENTICATIONFAILED] Invalid credentials (Failure)",
            ])
        #expect(imap.mechanisms == ["XOAUTH2", "OAUTHBEARER"])
        #expect(imap.refusal == "A002 NO [AUTHENTICATIONFAILED] Invalid credentials (Failure)")
        #expect(imap.challenge == #"{"status":"400","schemes":"Bearer","scope":"https://mail.google.com/"}"#)

        let smtp = MailLoginResult(
            outcome: .refused,
            lines: [
                "220 smtp ready", "250-smtp", "250-AUTH LOGIN XOAUTH2", "250 PIPELINING", "334 ",
                "535 5.7.3 Authentication unsuccessful",
            ])
        #expect(smtp.mechanisms == ["LOGIN", "XOAUTH2"])
        #expect(smtp.refusal == "535 5.7.3 Authentication unsuccessful")
        #expect(smtp.challenge == nil)
        // A challenge that is not text is not shown decoded.
        let binary = MailLoginResult(outcome: .refused, lines: ["+ AAECAw=="])
        #expect(binary.challenge == nil)
    }
}

@Suite("mail logins: a failure after the login")
struct MailLoginAfterLoginTests {
    @Test("SMTP: 235, then a 421 from a submission server whose relay is down")
    func smtpRelayDown() {
        let r = MailLoginResult(
            outcome: .failedAfterLogin("weird server reply"),
            lines: [
                "220 mx Dovecot ready.", "250-mx", "250-AUTH XOAUTH2 OAUTHBEARER", "250 PIPELINING", "334 ",
                "235 2.7.0 Logged in.", "421 4.4.0 mx Failed to connect to relay server (connect)",
            ])
        #expect(r.loginAccepted == 5)
        #expect(r.afterLogin == "421 4.4.0 mx Failed to connect to relay server (connect)")
        #expect(r.outcome.loggedIn)
    }

    @Test("IMAP: the tagged OK after the go-ahead is the login; a BYE after it is what went wrong")
    func imapBye() {
        let r = MailLoginResult(
            outcome: .failedAfterLogin("connection died"),
            lines: [
                "* OK [CAPABILITY IMAP4rev1 AUTH=XOAUTH2] ready", "A001 OK Pre-login capabilities listed", "+ ",
                "A002 OK Logged in", "* BYE Internal error occurred. Refer to server log for more information.",
            ])
        #expect(r.loginAccepted == 3)
        #expect(r.afterLogin?.hasPrefix("* BYE Internal error") == true)
    }

    @Test("a refused login was never accepted, whatever came before (controls)")
    func refusedIsNotAccepted() {
        let imap = MailLoginResult(
            outcome: .refused,
            lines: [
                "* OK ready", "A001 OK Pre-login capabilities listed", "+ eyJzdGF0dXMiOiI0MDEifQ==",
                "A002 NO [AUTHENTICATIONFAILED] Authentication failed.",
            ])
        #expect(imap.loginAccepted == nil && imap.afterLogin == nil)
        #expect(!imap.outcome.loggedIn)
        let smtp = MailLoginResult(
            outcome: .refused, lines: ["220 ready", "250 AUTH XOAUTH2", "334 ", "535 5.7.8 Authentication failed."])
        #expect(smtp.loginAccepted == nil && smtp.afterLogin == nil)
        // STARTTLS's tagged OK comes before any go-ahead: not a login.
        let starttls = MailLoginResult(
            outcome: .protocolError("x"), lines: ["* OK ready", "A001 OK Begin TLS negotiation now."])
        #expect(starttls.loginAccepted == nil)
    }
}
