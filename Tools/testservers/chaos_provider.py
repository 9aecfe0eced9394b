#!/usr/bin/env python3
"""A strict token endpoint for the chaos test (Tools/chaos), on 127.0.0.1.

  chaos_provider.py EXPIRES_IN

Refresh tokens rotate on every use, access tokens live EXPIRES_IN seconds,
and a refresh token presented a second time revokes its whole family (the
refresh token that replaced it too), as Auth0 and Okta do on reuse. Every
refresh is logged. Prints the port, serves until stdin closes.

  POST .../token       grant_type=refresh_token, client_id=chaos
  POST /__mint         a new family: a token response to import
  GET  /__log          JSON: [{"time", "family", "outcome"}] for every
                       refresh: ok, reuse (a spent token: the family is
                       revoked; "first" is when it was spent before),
                       revoked (a token of a revoked family), unknown;
                       never a token
"""
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from common import answer_json, serve_http_until_stdin_closes

EXPIRES_IN = int(sys.argv[1]) if len(sys.argv) > 1 else 10
LOCK = threading.Lock()
TOKENS = {}  # refresh token -> {"family": n, "spent": time it was spent, or False}
REVOKED = set()
LOG = []
FAMILIES = [0]


def issue(family):
    refresh = "crt-" + secrets.token_urlsafe(18)
    TOKENS[refresh] = {"family": family, "spent": False}
    return {
        "access_token": "cat-%d-%s" % (family, secrets.token_urlsafe(12)),
        "refresh_token": refresh,
        "token_type": "Bearer",
        "expires_in": EXPIRES_IN,
        "scope": "chaos",
    }


class Provider(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, obj):
        answer_json(self, status, obj)

    def do_GET(self):
        if self.path == "/__log":
            with LOCK:
                return self.answer(200, list(LOG))
        self.answer(404, {"error": "not_found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path == "/__mint":
            with LOCK:
                FAMILIES[0] += 1
                return self.answer(200, issue(FAMILIES[0]))
        if not self.path.endswith("/token"):
            return self.answer(404, {"error": "not_found"})
        form = urllib.parse.parse_qs(raw.decode(), keep_blank_values=True)
        if form.get("grant_type") != ["refresh_token"] or form.get("client_id") != ["chaos"]:
            return self.answer(400, {"error": "unsupported_grant_type"})
        presented = form.get("refresh_token", [""])[0]
        with LOCK:
            entry = TOKENS.get(presented)
            now = time.time()
            if entry is None:
                LOG.append({"time": now, "family": None, "outcome": "unknown"})
                return self.answer(400, {"error": "invalid_grant"})
            family = entry["family"]
            if family in REVOKED:
                LOG.append({"time": now, "family": family, "outcome": "revoked"})
                return self.answer(400, {"error": "invalid_grant"})
            if entry["spent"]:
                REVOKED.add(family)
                LOG.append({"time": now, "family": family, "outcome": "reuse", "first": entry["spent"]})
                return self.answer(400, {"error": "invalid_grant", "error_description": "refresh token reused"})
            entry["spent"] = now
            LOG.append({"time": now, "family": family, "outcome": "ok"})
            return self.answer(200, issue(family))


if __name__ == "__main__":
    serve_http_until_stdin_closes(Provider)
