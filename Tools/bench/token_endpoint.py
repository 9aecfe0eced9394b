#!/usr/bin/env python3
"""A loopback token endpoint for the library benchmark (Tools/bench/library).

  token_endpoint.py [DELAY_SECONDS]

Binds 127.0.0.1 on a free port, prints the port, and serves until stdin
closes. POST /token answers every refresh with a new access token (after
DELAY_SECONDS, default 0.05, like a provider across a network); GET /count
answers {"requests": N}, the number of token requests so far.
"""
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
LOCK = threading.Lock()
COUNT = [0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with LOCK:
            COUNT[0] += 1
            n = COUNT[0]
        time.sleep(DELAY)
        self.answer({"access_token": "bench-access-%d" % n, "refresh_token": "bench-refresh-%d" % n,
                     "expires_in": 3600, "token_type": "Bearer"})

    def do_GET(self):
        with LOCK:
            self.answer({"requests": COUNT[0]})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    main()
