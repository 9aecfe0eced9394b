#!/usr/bin/env python3
"""An OAuth 1.0a protected resource on 127.0.0.1, validated by oauthlib.

  oauth1_server.py RSA_PUBLIC_KEY_PEM

Prints JSON settings (port, client and token credentials) and serves until
stdin closes:
  ANY /resource[?...]  200 {"ok": true, ...} when oauthlib's ResourceEndpoint
                       accepts the request's signature (HMAC-SHA1, RSA-SHA1
                       for client "rsa-client", PLAINTEXT), else 401
  POST /request_token  temporary credentials (RequestTokenEndpoint)
  GET /authorize?oauth_token=T&decision=allow|deny
                       the person's decision: a redirect to the callback with
                       oauth_token and oauth_verifier (or denied=T), or for an
                       "oob" callback a page showing the verifier
  POST /access_token   token credentials (AccessTokenEndpoint); the new access
                       tokens are accepted by /resource
Nonces are remembered: a replayed request is refused. Install with
`pip install oauthlib`.
"""
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import secrets
import urllib.parse

from oauthlib.oauth1 import AccessTokenEndpoint, AuthorizationEndpoint, RequestTokenEndpoint, RequestValidator, ResourceEndpoint

CLIENTS = {"vault-oauth1-client": "consumer-secret-31f", "rsa-client": None}
TOKENS = {"vault-oauth1-token": "token-secret-9a2"}
LOCK = threading.Lock()
SEEN = set()
REQUEST_TOKENS = {}  # token -> {"secret", "client", "callback", "verifier"}


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

    # Three-legged authorization (RFC 5849 section 2).
    request_token_length = (3, 64)
    verifier_length = (3, 64)

    @property
    def dummy_request_token(self):
        return "dummy-request-token"

    def get_default_realms(self, client_key, request):
        return []

    def validate_requested_realms(self, client_key, realms, request):
        return True

    def validate_redirect_uri(self, client_key, redirect_uri, request):
        # Loopback callbacks only, or out of band.
        return redirect_uri == "oob" or redirect_uri.startswith("http://127.0.0.1:")

    def save_request_token(self, token, request):
        with LOCK:
            REQUEST_TOKENS[token["oauth_token"]] = {"secret": token["oauth_token_secret"], "client": request.client_key,
                                                    "callback": request.redirect_uri, "verifier": None}

    def get_request_token_secret(self, client_key, token, request):
        return REQUEST_TOKENS.get(token, {}).get("secret", "dummy-secret")

    def validate_request_token(self, client_key, token, request):
        return token in REQUEST_TOKENS and REQUEST_TOKENS[token]["client"] == client_key

    def verify_request_token(self, token, request):
        return token in REQUEST_TOKENS

    def get_realms(self, token, request):
        return []

    def get_redirect_uri(self, token, request):
        return REQUEST_TOKENS[token]["callback"]

    def save_verifier(self, token, verifier, request):
        REQUEST_TOKENS[token]["verifier"] = verifier["oauth_verifier"]

    def validate_verifier(self, client_key, token, verifier, request):
        entry = REQUEST_TOKENS.get(token)
        return bool(entry and entry["verifier"] and secrets.compare_digest(entry["verifier"], verifier))

    def invalidate_request_token(self, client_key, request_token, request):
        REQUEST_TOKENS.pop(request_token, None)

    def save_access_token(self, token, request):
        with LOCK:
            TOKENS[token["oauth_token"]] = token["oauth_token_secret"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    endpoint = None
    request_endpoint = None
    authorization_endpoint = None
    access_endpoint = None

    def log_message(self, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else None
        uri = "http://127.0.0.1:%d%s" % (self.server.server_address[1], self.path)
        headers = {k: v for k, v in self.headers.items()}
        path = self.path.split("?")[0]
        if path == "/request_token":
            h, payload, status = Handler.request_endpoint.create_request_token_response(
                uri, http_method=self.command, body=body, headers=headers)
            return self.answer(status, payload, h)
        if path == "/access_token":
            h, payload, status = Handler.access_endpoint.create_access_token_response(
                uri, http_method=self.command, body=body, headers=headers)
            return self.answer(status, payload, h)
        if path == "/authorize":
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            token = query.get("oauth_token", "")
            entry = REQUEST_TOKENS.get(token)
            if not entry:
                return self.answer(400, "unknown request token", {})
            if query.get("decision") != "allow":
                REQUEST_TOKENS.pop(token, None)
                if entry["callback"] == "oob":
                    return self.answer(200, "You denied access.", {})
                return self.answer(302, "", {"Location": entry["callback"] + "?denied=" + token})
            h, payload, status = Handler.authorization_endpoint.create_authorization_response(
                uri, http_method="GET", credentials={"resource_owner_key": token})
            if entry["callback"] == "oob":
                # oauthlib answers oob with the verifier in a form body; show it as a person would see it.
                verifier = dict(urllib.parse.parse_qsl(payload)).get("oauth_verifier", "")
                return self.answer(200, "Your verifier: " + verifier, {})
            return self.answer(status, payload or "", h)
        ok = False
        if path == "/resource":
            ok, request = Handler.endpoint.validate_protected_resource_request(
                uri, http_method=self.command, body=body, headers=headers)
        self.answer(200 if ok else 401, json.dumps({"ok": ok}), {"Content-Type": "application/json"})

    def answer(self, status, payload, headers):
        data = payload.encode() if isinstance(payload, str) else (payload or b"")
        self.send_response(status)
        for k, v in (headers or {}).items():
            if k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


def main():
    validator = Validator(open(sys.argv[1]).read())
    Handler.endpoint = ResourceEndpoint(validator)
    Handler.request_endpoint = RequestTokenEndpoint(validator)
    Handler.authorization_endpoint = AuthorizationEndpoint(validator)
    Handler.access_endpoint = AccessTokenEndpoint(validator)
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
