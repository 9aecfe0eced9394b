#!/usr/bin/env python3
"""A counting, switchable HTTP proxy in front of one upstream, for tests.

  counting_proxy.py UPSTREAM_BASE

Binds 127.0.0.1 on a free port, prints the port, forwards every request to
UPSTREAM_BASE with the same path, and serves until stdin closes. Control:
  GET /__counts   JSON: requests seen, and token requests by grant_type
  GET /__down     answer every later request by closing the connection
  GET /__up       forward again
  GET /__status/N answer every later request with HTTP N (N=0: forward again)
  GET /__hold     hold every later token request (counted on arrival) before
                  forwarding it, until /__release (or 60 s)
  GET /__release  forward the held token requests, and hold no more
  GET /__expires/N  say expires_in N in every later token answer (N=0: as
                  upstream said)
"""
import json
import signal
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler

from common import forward, no_redirect_opener, serve_http_until_stdin_closes

UPSTREAM = sys.argv[1].rstrip("/")
LOCK = threading.Lock()
STATE = {"down": False, "status": 0, "requests": 0, "grant_types": {}, "expires": 0}
RELEASED = threading.Event()
RELEASED.set()
OPENER = no_redirect_opener()


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        path = self.path
        if path == "/__counts":
            with LOCK:
                return self.answer(200, json.dumps(STATE).encode())
        if path in ("/__down", "/__up") or path.startswith("/__status/"):
            with LOCK:
                STATE["down"] = path == "/__down"
                STATE["status"] = int(path.split("/")[-1]) if path.startswith("/__status/") else 0
            return self.answer(200, b"ok")
        if path.startswith("/__expires/"):
            with LOCK:
                STATE["expires"] = int(path.split("/")[-1])
            return self.answer(200, b"ok")
        if path in ("/__hold", "/__release"):
            (RELEASED.clear if path == "/__hold" else RELEASED.set)()
            return self.answer(200, b"ok")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        grant = None
        with LOCK:
            STATE["requests"] += 1
            if body:
                grant = dict(urllib.parse.parse_qsl(body.decode(errors="replace"))).get("grant_type")
                if grant:
                    STATE["grant_types"][grant] = STATE["grant_types"].get(grant, 0) + 1
            down, forced, expires = STATE["down"], STATE["status"], STATE["expires"]
        if down:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if grant:
            RELEASED.wait(60)
        if forced:
            return self.answer(forced, b"", [("Content-Type", "text/plain")])
        status, payload, rh = forward(OPENER, UPSTREAM + path, self.command, body, self.headers.items())
        keep = [(k, v) for k, v in rh if k.lower() in ("content-type", "www-authenticate", "cache-control")]
        if grant and expires and status == 200:
            try:
                answer = json.loads(payload)
                if isinstance(answer, dict) and "expires_in" in answer:
                    answer["expires_in"] = expires
                    payload = json.dumps(answer).encode()
            except ValueError:
                pass
        self.answer(status, payload, keep)

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


def main():
    serve_http_until_stdin_closes(Proxy)


if __name__ == "__main__":
    # Start (and start children) with no blocked signals, whatever the
    # launching thread had blocked, so a plain SIGTERM stops them.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
