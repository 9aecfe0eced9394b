#!/usr/bin/env python3
"""An OAuth 1.0a protected resource on 127.0.0.1, validated by oauthlib.

  oauth1_server.py RSA_PUBLIC_KEY_PEM

Prints JSON settings (port, client and token credentials) and serves until
stdin closes:
  ANY /resource[?...]  200 {"ok": true, ...} when oauthlib's ResourceEndpoint
                       accepts the request's signature (HMAC-SHA1, RSA-SHA1
                       for client "rsa-client", PLAINTEXT), else 401
Nonces are remembered: a replayed request is refused. Install with
`pip install oauthlib`.
"""
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from oauthlib.oauth1 import RequestValidator, ResourceEndpoint

CLIENTS = {"vault-oauth1-client": "consumer-secret-31f", "rsa-client": None}
TOKENS = {"vault-oauth1-token": "token-secret-9a2"}
LOCK = threading.Lock()
SEEN = set()


class Validator(RequestValidator):
    # Test credentials are short and the server runs on plain loopback http.
    client_key_length = (3, 64)
    access_token_length = (3, 64)
    nonce_length = (3, 64)
    enforce_ssl = False
    allowed_signature_methods = ("HMAC-SHA1", "RSA-SHA1", "PLAINTEXT")
    safe_characters = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")

    def __init__(self, rsa_public_key):
        super().__init__()
        self.rsa_public_key = rsa_public_key

    @property
    def dummy_client(self):
        return "dummy-client"

    @property
    def dummy_access_token(self):
        return "dummy-token"

    def validate_client_key(self, client_key, request):
        return client_key in CLIENTS

    def validate_access_token(self, client_key, token, request):
        return token in TOKENS

    def validate_timestamp_and_nonce(self, client_key, timestamp, nonce, request, request_token=None,
                                     access_token=None):
        with LOCK:
            key = (client_key, timestamp, nonce, access_token)
            if key in SEEN:
                return False
            SEEN.add(key)
            return True

    def validate_realms(self, client_key, token, request, uri=None, realms=None):
        return True

    def get_client_secret(self, client_key, request):
        return CLIENTS.get(client_key) or "dummy-secret"

    def get_access_token_secret(self, client_key, token, request):
        return TOKENS.get(token, "dummy-secret")

    def get_rsa_key(self, client_key, request):
        return self.rsa_public_key


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    endpoint = None

    def log_message(self, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else None
        uri = "http://127.0.0.1:%d%s" % (self.server.server_address[1], self.path)
        headers = {k: v for k, v in self.headers.items()}
        ok = False
        if self.path.split("?")[0] == "/resource":
            ok, request = Handler.endpoint.validate_protected_resource_request(
                uri, http_method=self.command, body=body, headers=headers)
        payload = json.dumps({"ok": ok}).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


def main():
    Handler.endpoint = ResourceEndpoint(Validator(open(sys.argv[1]).read()))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(json.dumps({"port": server.server_address[1], "client_key": "vault-oauth1-client",
                      "client_secret": CLIENTS["vault-oauth1-client"], "token": "vault-oauth1-token",
                      "token_secret": TOKENS["vault-oauth1-token"]}), flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
