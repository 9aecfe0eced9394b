#!/usr/bin/env python3
"""A private Dovecot (IMAP and SMTP submission) on 127.0.0.1 that accepts
only XOAUTH2 and OAUTHBEARER, checking each token at the OpenID Connect
provider's introspection endpoint.

  dovecot.py serve DIR GLEWLWYD_SETTINGS_JSON
  dovecot.py serve DIR --long-tokens
  dovecot.py serve DIR (GLEWLWYD_SETTINGS_JSON | --long-tokens) --relay-down

Prints {"imap": PORT, "imaps": PORT, "submission": PORT, "submissions":
PORT, "ca": FILE}; Dovecot runs in the foreground as this script's child and
is stopped by its PID when stdin closes. Install with `apt-get install
dovecot-imapd dovecot-submissiond`. Dovecot reads the mail in DIR as its own
user, so DIR's parents must let that user through.

TLS: "imaps" and "submissions" speak TLS from the first byte, "imap" and
"submission" offer STARTTLS (and, for older tests, accept a login without
it). The certificate is for localhost and 127.0.0.1, issued by a CA made
here for this run; FILE is that CA's certificate, for SSL_CERT_FILE.

With --long-tokens, Dovecot checks tokens at a small token endpoint of this
script instead, which issues JWTs of LONG_TOKEN bytes (the size of
Microsoft's access tokens; glewlwyd's are about 830) for any refresh token,
and its port is printed as "issuer" (POST /token, POST /introspect).

The user's mailbox holds one message, WELCOME_SUBJECT, from the start. Mail
sent through submission is relayed to a sink here that delivers it to the
recipient's mailbox (the address's local part), so it can be read over IMAP.
With --relay-down nothing listens on the relay's port: submission accepts a
login, then answers that it cannot reach its relay, as a server whose relay
is down does.
"""
import base64
import hashlib
import hmac
import http.server
import json
import os
import pwd
import secrets
import signal
import socketserver
import subprocess
import sys
import threading
import time
import urllib.parse

from common import answer_json, free_port, wait_for_port

USER = "ada"
LONG_TOKEN = 1536
WELCOME_SUBJECT = "welcome to the test mailbox"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer(http.server.BaseHTTPRequestHandler):
    """POST /token: a refresh_token grant answered with a new JWT-sized
    access token for USER; POST /introspect: whether a token is one of them."""
    key = secrets.token_bytes(32)
    issued = set()
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def mint(self):
        header = b64url(json.dumps({"typ": "JWT", "alg": "HS256", "kid": secrets.token_hex(20)}).encode())
        now = int(time.time())
        claims = {"aud": "https://outlook.office.com", "iss": "http://127.0.0.1/issuer", "iat": now, "nbf": now,
                  "exp": now + 3600, "upn": USER + "@example.com", "scp": "IMAP.AccessAsUser.All SMTP.Send",
                  "wids": []}
        # Group and role ids, as Microsoft's tokens carry, up to the size.
        while True:
            payload = b64url(json.dumps(claims).encode())
            signature = b64url(hmac.new(self.key, (header + "." + payload).encode(), hashlib.sha256).digest())
            token = header + "." + payload + "." + signature
            if len(token) >= LONG_TOKEN:
                return token
            claims["wids"].append(secrets.token_hex(2))

    def do_POST(self):
        form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()))
        if self.path == "/token":
            if form.get("grant_type") != "refresh_token" or not form.get("refresh_token"):
                return answer_json(self, 400, {"error": "invalid_grant"})
            token = self.mint()
            with Issuer.lock:
                Issuer.issued.add(token)
            return answer_json(self, 200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600})
        if self.path == "/introspect":
            with Issuer.lock:
                active = form.get("token") in Issuer.issued
            return answer_json(self, 200, {"active": True, "username": USER} if active else {"active": False})
        answer_json(self, 404, {"error": "not_found"})


def deliver(mail, owner, recipient, message):
    """Puts a message into the maildir of the recipient's local part."""
    box = os.path.join(mail, os.path.basename(recipient.split("@")[0]))
    for sub in ("", "/tmp", "/new", "/cur"):
        os.makedirs(box + sub, exist_ok=True)
        os.chown(box + sub, owner.pw_uid, owner.pw_gid)
    name = "%d.%s.test" % (time.time_ns(), secrets.token_hex(4))
    with open(box + "/tmp/" + name, "wb") as f:
        f.write(message)
    os.chown(box + "/tmp/" + name, owner.pw_uid, owner.pw_gid)
    os.rename(box + "/tmp/" + name, box + "/new/" + name)


def make_certificates(d):
    """A CA of this run and a certificate it issues for localhost and
    127.0.0.1; returns the CA's certificate, the server's chain and key."""
    os.makedirs(d, exist_ok=True)

    def openssl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", d + "/ca.key", "-out", d + "/ca.pem",
            "-days", "2", "-subj", "/CN=vault test mail CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", d + "/server.key", "-out", d + "/server.csr",
            "-subj", "/CN=localhost")
    with open(d + "/server.ext", "w") as f:
        f.write("subjectAltName = DNS:localhost, IP:127.0.0.1\nextendedKeyUsage = serverAuth\n")
    openssl("x509", "-req", "-in", d + "/server.csr", "-CA", d + "/ca.pem", "-CAkey", d + "/ca.key",
            "-CAcreateserial", "-out", d + "/server.pem", "-days", "2", "-extfile", d + "/server.ext")
    os.chmod(d + "/server.key", 0o600)
    return d + "/ca.pem", d + "/server.pem", d + "/server.key"


def relay_sink(port, mail, owner):
    """A minimal SMTP server for Dovecot's submission relay that delivers
    each message to the recipients' mailboxes."""

    class Session(socketserver.StreamRequestHandler):
        def reply(self, line):
            self.wfile.write(line.encode() + b"\r\n")

        def handle(self):
            self.reply("220 sink ready")
            recipients = []
            for raw in self.rfile:
                verb = raw.decode("latin-1").strip().split(" ", 1)[0].upper()
                if verb in ("EHLO", "HELO"):
                    self.reply("250 sink")
                elif verb == "MAIL":
                    recipients = []
                    self.reply("250 ok")
                elif verb == "RCPT":
                    recipients.append(raw.decode("latin-1").split("<", 1)[1].split(">", 1)[0])
                    self.reply("250 ok")
                elif verb == "DATA":
                    self.reply("354 go on")
                    lines = []
                    for line in self.rfile:
                        if line.rstrip(b"\r\n") == b".":
                            break
                        lines.append(line[1:] if line.startswith(b"..") else line)
                    for r in recipients:
                        deliver(mail, owner, r, b"".join(lines))
                    self.reply("250 delivered")
                elif verb == "QUIT":
                    self.reply("221 bye")
                    return
                else:
                    self.reply("250 ok")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", port), Session)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main():
    d = os.path.abspath(sys.argv[2])
    long_tokens = sys.argv[3] == "--long-tokens"
    relay_down = "--relay-down" in sys.argv[4:]
    for sub in ("run", "state", "mail"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    # Mail is kept by Dovecot's own unprivileged account.
    owner = pwd.getpwnam("dovecot")
    os.chown(d + "/mail", owner.pw_uid, owner.pw_gid)
    os.chmod(d, 0o755)
    imap, imaps, submission, submissions, relay = (free_port() for _ in range(5))
    ca, cert, key = make_certificates(d + "/tls")
    ports = {"imap": imap, "imaps": imaps, "submission": submission, "submissions": submissions, "ca": ca}
    deliver(d + "/mail", owner, USER, ("From: vault tests <tests@example.com>\r\nTo: %s@example.com\r\n"
                                       "Subject: %s\r\n\r\nHello.\r\n" % (USER, WELCOME_SUBJECT)).encode())
    if not relay_down:
        relay_sink(relay, d + "/mail", owner)
    if long_tokens:
        issuer = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Issuer)
        threading.Thread(target=issuer.serve_forever, daemon=True).start()
        ports["issuer"] = issuer.server_address[1]
        introspection = "http://127.0.0.1:%d/introspect" % ports["issuer"]
    else:
        g = json.load(open(sys.argv[3]))
        introspection = "http://%s:%s@127.0.0.1:%d/api/oidc/introspect" % (
            g["confidential_client"], g["client_secret"],
            g["port"] if "port" in g else int(g["base"].rsplit(":", 1)[1]))
    with open(d + "/oauth2.conf.ext", "w") as f:
        f.write("introspection_mode = post\nintrospection_url = %s\nusername_attribute = username\n"
                "active_attribute = active\nactive_value = true\n" % introspection)
    os.chmod(d + "/oauth2.conf.ext", 0o600)
    with open(d + "/dovecot.conf", "w") as f:
        f.write("""
base_dir = {d}/run
state_dir = {d}/state
log_path = {d}/dovecot.log
protocols = imap submission
listen = 127.0.0.1
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
disable_plaintext_auth = no
auth_mechanisms = xoauth2 oauthbearer
auth_failure_delay = 0
mail_location = maildir:{d}/mail/%u
first_valid_uid = {uid}
passdb {{
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = {d}/oauth2.conf.ext
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={d}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps}
    ssl = yes
  }}
}}
service submission-login {{
  inet_listener submission {{
    address = 127.0.0.1
    port = {submission}
  }}
  inet_listener submissions {{
    address = 127.0.0.1
    port = {submissions}
    ssl = yes
  }}
}}
submission_relay_host = 127.0.0.1
submission_relay_port = {relay}
service anvil {{
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
""".format(d=d, imap=imap, imaps=imaps, submission=submission, submissions=submissions, relay=relay,
           cert=cert, key=key, uid=owner.pw_uid, gid=owner.pw_gid))
    conf = d + "/dovecot.conf"
    # In the foreground, as our child: stopped by the PID we started.
    master = subprocess.Popen(["dovecot", "-F", "-c", conf], stdin=subprocess.DEVNULL, start_new_session=True)
    wait_for_port(imap, alive=lambda: master.poll() is None)
    print(json.dumps(ports), flush=True)
    try:
        sys.stdin.read()
    finally:
        master.terminate()
        try:
            master.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(master.pid, signal.SIGKILL)


if __name__ == "__main__":
    # Start (and start children) with no blocked signals, whatever the
    # launching thread had blocked, so a plain SIGTERM stops them.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
