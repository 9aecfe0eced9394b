#!/usr/bin/env python3
"""The loopback endpoints a committed format fixture remembers, on its fixed port.

  fixture_endpoints.py PORT STORE_UPSTREAM MANIFEST

A fixture vault (Tests/Fixtures/vN, made by Tools/fixtures/generate) keeps
URLs with a port in them: its grants' token endpoint and its sync store.
Those bytes cannot change after the fact, so this server binds exactly
127.0.0.1:PORT (never another port: if PORT is taken it says so on stderr and
exits 1 without printing anything), prints PORT, and serves until stdin
closes:

  POST /oauth/token   the refresh_token grant for the client and refresh tokens
                      of MANIFEST's "token_endpoint" object:
                      {"client_id": ..., "client_secret": ...,
                       "refresh": {REFRESH_TOKEN: TOKEN_RESPONSE, ...}}.
                      Each refresh token works once (they rotate); an unknown
                      or spent one gets 400 invalid_grant, a wrong client
                      401 invalid_client. Client authentication: HTTP Basic or
                      client_id and client_secret in the form.
                      When the object also has "mint":
                      {"client_credentials": TOKEN_RESPONSE,
                       "jwt_bearer": {"issuer": ..., "response": TOKEN_RESPONSE}},
                      the client_credentials grant (that client) and the
                      RFC 7523 JWT bearer grant (an assertion whose iss is
                      that issuer and whose aud is this endpoint; its
                      signature is not checked) get that answer, as often as
                      asked.
  /store/...          forwarded to STORE_UPSTREAM with the same path (the
                      project's Apache WebDAV server, Tools/testservers/webdav.py),
                      preconditions and ETags included.
  GET /__counts       JSON: {"refreshed": N, "refused": N, "minted": N}
"""
import base64
import json
import signal
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import forward, no_redirect_opener

LOCK = threading.Lock()
COUNTS = {"refreshed": 0, "refused": 0, "minted": 0}
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SPENT = set()
OPENER = no_redirect_opener()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    endpoint = {}
    upstream = ""

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def json_answer(self, status, doc):
        self.answer(status, json.dumps(doc).encode(), [("Content-Type", "application/json"),
                                                       ("Cache-Control", "no-store")])

    def client(self, form):
        """(client_id, client_secret) from the Basic header, else from the form."""
        auth = self.headers.get("Authorization") or ""
        if auth.lower().startswith("basic "):
            try:
                user, _, secret = base64.b64decode(auth[6:].strip()).decode().partition(":")
                return urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(secret)
            except ValueError:
                return None, None
        return form.get("client_id"), form.get("client_secret")

    def refuse(self, status, error):
        with LOCK:
            COUNTS["refused"] += 1
        self.json_answer(status, {"error": error})

    def mint(self, response):
        with LOCK:
            COUNTS["minted"] += 1
        self.json_answer(200, response)

    def jwt_bearer(self, form):
        """The JWT bearer grant: the assertion's issuer and audience, not its signature."""
        rule = self.endpoint.get("mint", {}).get("jwt_bearer")
        try:
            payload = form.get("assertion", "").split(".")[1]
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (IndexError, ValueError):
            return self.refuse(400, "invalid_grant")
        url = "http://%s:%d/oauth/token" % self.server.server_address[:2]
        if not rule or claims.get("iss") != rule.get("issuer") or claims.get("aud") != url:
            return self.refuse(400, "invalid_grant")
        self.mint(rule["response"])

    def token(self, body):
        form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace")))
        grant_type = form.get("grant_type")
        if grant_type == JWT_BEARER and "jwt_bearer" in self.endpoint.get("mint", {}):
            return self.jwt_bearer(form)
        minted = self.endpoint.get("mint", {}).get("client_credentials")
        if grant_type != "refresh_token" and not (grant_type == "client_credentials" and minted):
            return self.json_answer(400, {"error": "unsupported_grant_type"})
        client_id, secret = self.client(form)
        if client_id != self.endpoint.get("client_id") or secret != self.endpoint.get("client_secret"):
            return self.refuse(401, "invalid_client")
        if grant_type == "client_credentials":
            return self.mint(minted)
        presented = form.get("refresh_token", "")
        with LOCK:
            response = self.endpoint.get("refresh", {}).get(presented)
            usable = response is not None and presented not in SPENT
            if usable:
                SPENT.add(presented)
                COUNTS["refreshed"] += 1
            else:
                COUNTS["refused"] += 1
        if not usable:
            return self.json_answer(400, {"error": "invalid_grant"})
        self.json_answer(200, response)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        path = urllib.parse.urlsplit(self.path).path
        if path == "/__counts" and self.command == "GET":
            with LOCK:
                return self.json_answer(200, COUNTS)
        if path == "/oauth/token" and self.command == "POST":
            return self.token(body or b"")
        if path == "/store" or path.startswith("/store/"):
            status, payload, rh = forward(OPENER, self.upstream + self.path, self.command, body,
                                          self.headers.items())
            keep = [(k, v) for k, v in rh if k.lower() in ("content-type", "etag", "www-authenticate")]
            return self.answer(status, payload, keep)
        self.answer(404, b"not found", [("Content-Type", "text/plain")])

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any


def main():
    port = int(sys.argv[1])
    Handler.upstream = sys.argv[2].rstrip("/")
    with open(sys.argv[3]) as f:
        Handler.endpoint = json.load(f)["token_endpoint"]
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as e:
        print("fixture_endpoints.py: cannot listen on 127.0.0.1:%d (%s); the fixture's URLs need exactly that port"
              % (port, e.strerror), file=sys.stderr)
        sys.exit(1)
    server.daemon_threads = True
    print(port, flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the test closes our stdin or exits


if __name__ == "__main__":
    # Start (and start children) with no blocked signals, whatever the
    # launching thread had blocked, so a plain SIGTERM stops them.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
