#!/usr/bin/env python3
"""An OAuth 2.0 token endpoint on 127.0.0.1 that implements RFC 8693 token
exchange (glewlwyd does not), plus the refresh-token grant, for vault's
narrowed tokens (`vault token NAME --exchange --audience A`).

  token_exchange_server.py

Prints JSON settings and serves until stdin closes:
  {"port", "token_endpoint", "client_id", "client_secret",
   "other_client_id", "other_client_secret", "audiences", "resources"}
  POST /token       grant_type refresh_token (rotating refresh tokens), and
                    grant_type urn:ietf:params:oauth:grant-type:token-exchange,
                    checked as RFC 8693 section 2.1 says: the client
                    authenticates (client_secret_basic or _post; else 401
                    invalid_client) and may exchange (else 400
                    unauthorized_client); subject_token_type is the
                    access_token URN and subject_token an access token this
                    server issued to that client, not expired (else 400
                    invalid_request); requested_token_type, when sent, is
                    the access_token URN; every audience and resource is one
                    this server knows (else 400 invalid_target); a scope is
                    within the subject token's (else 400 invalid_scope). The
                    answer carries issued_token_type, a Bearer access token
                    for that audience and scope, no refresh token.
  POST /__issue     mints a grant for client_id (no authorization step):
                    {"access_token", "refresh_token", "expires_in", "scope"}
  GET /__introspect?token=T
                    what this server knows of a token: {"active", "aud",
                    "scope", "client_id", "exchanged"} (for the tests' checks)
  GET /__log        the token requests seen: grant_type, client, audience,
                    resource, scope, outcome (never a token or secret)
"""
import base64
import json
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import free_port

ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
AUDIENCES = ("billing", "reports")
RESOURCES = ("https://billing.example.com/api",)
LOCK = threading.Lock()
STATE = {"tokens": {}, "refresh": {}, "log": []}


class Refusal(Exception):
    def __init__(self, status, error, description):
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


def issue(client, scope, audience=None, exchanged=False, lifetime=3600):
    token = ("xt-" if exchanged else "at-") + secrets.token_urlsafe(18)
    STATE["tokens"][token] = {"client_id": client, "scope": scope, "aud": audience, "exchanged": exchanged,
                              "expires": time.time() + lifetime}
    return token


def main():
    port = free_port()
    token_url = "http://127.0.0.1:%d/token" % port
    clients = {"vault-app": secrets.token_urlsafe(16), "vault-other": secrets.token_urlsafe(16)}
    may_exchange = {"vault-app"}

    def authenticate(headers, form):
        auth = headers.get("Authorization") or ""
        if auth.startswith("Basic "):
            try:
                raw = base64.b64decode(auth[6:]).decode()
                client, secret = (urllib.parse.unquote_plus(p) for p in raw.split(":", 1))
            except (ValueError, UnicodeDecodeError):
                raise Refusal(401, "invalid_client", "malformed Basic credentials")
        else:
            client, secret = form.get("client_id"), form.get("client_secret")
        if client not in clients or secret is None or not secrets.compare_digest(clients[client], secret):
            raise Refusal(401, "invalid_client", "client authentication failed")
        return client

    def refresh(client, form):
        with LOCK:
            grant = STATE["refresh"].pop(form.get("refresh_token", ""), None)
            if grant is None or grant["client_id"] != client:
                raise Refusal(400, "invalid_grant", "unknown or spent refresh token")
            rotated = secrets.token_urlsafe(24)
            STATE["refresh"][rotated] = grant
            access = issue(client, grant["scope"])
        return {"access_token": access, "token_type": "Bearer", "expires_in": 3600, "refresh_token": rotated,
                "scope": grant["scope"]}

    def exchange(client, form):
        if client not in may_exchange:
            raise Refusal(400, "unauthorized_client", "this client may not exchange tokens")
        if form.get("subject_token_type") != ACCESS_TOKEN_TYPE:
            raise Refusal(400, "invalid_request", "subject_token_type must be an access token")
        if form.get("requested_token_type", ACCESS_TOKEN_TYPE) != ACCESS_TOKEN_TYPE:
            raise Refusal(400, "invalid_request", "only access tokens are issued")
        if "actor_token" in form:
            raise Refusal(400, "invalid_request", "delegation is not supported")
        with LOCK:
            subject = STATE["tokens"].get(form.get("subject_token", ""))
        if subject is None or subject["client_id"] != client or subject["expires"] < time.time():
            raise Refusal(400, "invalid_request", "the subject token is not one this server issued to the client")
        audience, resource = form.get("audience"), form.get("resource")
        if audience is None and resource is None:
            raise Refusal(400, "invalid_target", "an audience or a resource is needed")
        if (audience is not None and audience not in AUDIENCES) or (resource is not None and resource not in RESOURCES):
            raise Refusal(400, "invalid_target", "unknown audience or resource")
        have = set(subject["scope"].split())
        asked = set(form["scope"].split()) if form.get("scope") else have
        if not asked <= have:
            raise Refusal(400, "invalid_scope", "the scope is wider than the subject token's")
        scope = " ".join(sorted(asked))
        with LOCK:
            token = issue(client, scope, audience or resource, exchanged=True, lifetime=600)
        return {"access_token": token, "issued_token_type": ACCESS_TOKEN_TYPE, "token_type": "Bearer",
                "expires_in": 600, "scope": scope}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body, headers=()):
            data = json.dumps(body).encode()
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/__log":
                with LOCK:
                    return self.answer(200, STATE["log"])
            if url.path == "/__introspect":
                token = dict(urllib.parse.parse_qsl(url.query)).get("token", "")
                with LOCK:
                    t = STATE["tokens"].get(token)
                if t is None:
                    return self.answer(200, {"active": False})
                return self.answer(200, {"active": t["expires"] > time.time(), "aud": t["aud"], "scope": t["scope"],
                                         "client_id": t["client_id"], "exchanged": t["exchanged"]})
            self.answer(404, {})

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n).decode()
            if self.path == "/__issue":
                with LOCK:
                    rt = secrets.token_urlsafe(24)
                    STATE["refresh"][rt] = {"client_id": "vault-app", "scope": "read write"}
                    at = issue("vault-app", "read write")
                return self.answer(200, {"access_token": at, "refresh_token": rt, "expires_in": 3600,
                                         "scope": "read write", "token_type": "Bearer"})
            if self.path != "/token":
                return self.answer(404, {})
            form = dict(urllib.parse.parse_qsl(body))
            entry = {k: form.get(k) for k in ("grant_type", "audience", "resource", "scope")}
            try:
                client = authenticate(self.headers, form)
                entry["client_id"] = client
                grant = form.get("grant_type")
                if grant == "refresh_token":
                    result = refresh(client, form)
                elif grant == EXCHANGE:
                    result = exchange(client, form)
                else:
                    raise Refusal(400, "unsupported_grant_type", "refresh_token or token exchange only")
                entry["outcome"] = "ok"
                status = 200
            except Refusal as e:
                entry["outcome"] = e.error
                status, result = e.status, {"error": e.error, "error_description": e.description}
            with LOCK:
                STATE["log"].append(entry)
            headers = [("WWW-Authenticate", 'Basic realm="token"')] if status == 401 else []
            self.answer(status, result, headers)

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(json.dumps({"port": port, "token_endpoint": token_url, "client_id": "vault-app",
                      "client_secret": clients["vault-app"], "other_client_id": "vault-other",
                      "other_client_secret": clients["vault-other"], "audiences": list(AUDIENCES),
                      "resources": list(RESOURCES)}), flush=True)
    sys.stdin.read()
    httpd.shutdown()


if __name__ == "__main__":
    main()
