#!/usr/bin/env python3
"""A strict token endpoint for the chaos test (Tools/chaos), on 127.0.0.1.

  chaos_provider.py EXPIRES_IN

Refresh tokens rotate on every use, access tokens live EXPIRES_IN seconds,
and a refresh token presented a second time revokes its whole family (the
refresh token that replaced it too), as Auth0 and Okta do on reuse. Every
refresh is logged. Prints the port, serves until stdin closes.

  POST .../token       grant_type=refresh_token, client_id=chaos
  POST /__mint         a new family: a token response to import
  GET  /__expiries     JSON: {SHA-256 of an access token (hex): when it
                       expires (seconds since 1970)} for every access
                       token issued: what the test checks printed tokens
                       against, without ever holding the tokens itself
  GET  /__log          JSON: [{"time", "family", "outcome", "by"}] for
                       every refresh: ok, reuse (a spent token: the family
                       is revoked; "first" is when it was spent before and
                       "first_by" who spent it), revoked (a token of a
                       revoked family), unknown; never a token. "by" is the
                       process that sent the request, found through its
                       connection: {"pid", "pgid", "home", "command"}.
"""
import glob
import hashlib
import os
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from common import answer_json, serve_http_until_stdin_closes

EXPIRES_IN = int(sys.argv[1]) if len(sys.argv) > 1 else 10
LOCK = threading.Lock()
TOKENS = {}  # refresh token -> {"family": n, "spent": time it was spent, or False, "by": who spent it}
REVOKED = set()
LOG = []
FAMILIES = [0]
EXPIRIES = {}  # SHA-256 of an access token -> when it expires


def issue(family):
    refresh = "crt-" + secrets.token_urlsafe(18)
    TOKENS[refresh] = {"family": family, "spent": False, "by": None}
    access = "cat-%d-%s" % (family, secrets.token_urlsafe(12))
    EXPIRIES[hashlib.sha256(access.encode()).hexdigest()] = time.time() + EXPIRES_IN
    return {
        "access_token": access,
        "refresh_token": refresh,
        "token_type": "Bearer",
        "expires_in": EXPIRES_IN,
        "scope": "chaos",
    }


def presenter(peer_port, own_port):
    """The process on this machine whose TCP connection from 127.0.0.1:peer_port
    reaches own_port: its pid, process group, VAULT_HOME and first two
    arguments (vault's command line carries no secret), or None."""
    want_local, want_remote = "0100007F:%04X" % peer_port, "0100007F:%04X" % own_port
    inode = None
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == want_local and fields[2] == want_remote:
                inode = fields[9]
                break
    if inode is None:
        return None
    target = "socket:[%s]" % inode
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            if os.readlink(fd) != target:
                continue
            pid = int(fd.split("/")[2])
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            with open("/proc/%d/environ" % pid, "rb") as f:
                homes = [e[len(b"VAULT_HOME="):].decode(errors="replace")
                         for e in f.read().split(b"\0") if e.startswith(b"VAULT_HOME=")]
            return {"pid": pid, "pgid": os.getpgid(pid), "home": (homes or [""])[0],
                    "command": " ".join(a.rsplit("/", 1)[-1] for a in argv[:2])}
        except OSError:
            continue
    return None


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
        if self.path == "/__expiries":
            with LOCK:
                return self.answer(200, dict(EXPIRIES))
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
        by = presenter(self.client_address[1], self.server.server_address[1])
        with LOCK:
            entry = TOKENS.get(presented)
            now = time.time()
            if entry is None:
                LOG.append({"time": now, "family": None, "outcome": "unknown", "by": by})
                return self.answer(400, {"error": "invalid_grant"})
            family = entry["family"]
            if family in REVOKED:
                LOG.append({"time": now, "family": family, "outcome": "revoked", "by": by})
                return self.answer(400, {"error": "invalid_grant"})
            if entry["spent"]:
                REVOKED.add(family)
                LOG.append({"time": now, "family": family, "outcome": "reuse", "by": by,
                            "first": entry["spent"], "first_by": entry["by"]})
                return self.answer(400, {"error": "invalid_grant", "error_description": "refresh token reused"})
            entry["spent"] = now
            entry["by"] = by
            LOG.append({"time": now, "family": family, "outcome": "ok", "by": by})
            return self.answer(200, issue(family))


if __name__ == "__main__":
    serve_http_until_stdin_closes(Provider)
