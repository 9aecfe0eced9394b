#!/usr/bin/env python3
"""A loopback HTTP server for fault injection in the HTTP client's tests.

Binds 127.0.0.1 on a free port, prints the port on stdout, and serves until
stdin closes (so it dies with the test that started it):
  /echo               the request as JSON: method, path, headers, body
  /, /test.txt        the same (the paths of AWS's published SigV4 examples)
  /status/N           status N
  /redirect/N         302 chains of length N, ending at /echo
  /redirect-to?u=URL  302 to URL
  /big/N              N bytes of body
  /slow/S             sleeps S seconds, then answers
  /drop               closes the connection without answering
  /stall              reads the request and never answers: holds the
                      connection until the client closes it or the server stops
  /stalls             JSON: {"arrived": requests that reached /stall,
                      "open": those whose connection is still held}
  /token?iss=&aud=&nonce=  a token response whose unsigned ID token carries
                      those claims (for ID token checks)
"""
import base64
import json
import select
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STALLS = {"arrived": 0, "open": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if parts[0] in ("echo", "", "test.txt"):
            doc = {"method": self.command, "path": self.path, "body": body.decode("utf-8", "replace"),
                   "headers": {k.lower(): v for k, v in self.headers.items()}}
            self.reply(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])
        elif parts[0] == "status":
            self.reply(int(parts[1]), ("status %s" % parts[1]).encode())
        elif parts[0] == "redirect":
            n = int(parts[1])
            target = "/echo" if n <= 1 else "/redirect/%d" % (n - 1)
            self.reply(302, b"", [("Location", target)])
        elif parts[0] == "redirect-to":
            self.reply(302, b"", [("Location", urllib.parse.parse_qs(url.query)["u"][0])])
        elif parts[0] == "big":
            self.reply(200, b"x" * int(parts[1]))
        elif parts[0] == "slow":
            time.sleep(float(parts[1]))
            self.reply(200, b"late")
        elif parts[0] == "token":
            q = dict(urllib.parse.parse_qsl(url.query))
            claims = {"iss": q.get("iss", ""), "sub": "subject-1", "aud": q.get("aud", ""),
                      "exp": int(time.time()) + 3600, "iat": int(time.time()), "nonce": q.get("nonce", ""),
                      "email": "fixture@example.com"}
            b64 = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
            token = {"access_token": "fixture-access", "token_type": "Bearer", "expires_in": 3600,
                     "id_token": b64({"alg": "none"}) + "." + b64(claims) + ".sig"}
            self.reply(200, json.dumps(token).encode(), [("Content-Type", "application/json")])
        elif parts[0] == "stall":
            self.stall()
        elif parts[0] == "stalls":
            with LOCK:
                doc = json.dumps(STALLS).encode()
            self.reply(200, doc, [("Content-Type", "application/json")])
        elif parts[0] == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
        else:
            self.reply(404, b"not found")

    def stall(self):
        # Counted on arrival, so a test knows the request got here before it
        # goes on; "open" drops when the client hangs up (times out, exits).
        with LOCK:
            STALLS["arrived"] += 1
            STALLS["open"] += 1
        try:
            while True:
                readable, _, _ = select.select([self.connection], [], [], 1.0)
                if readable and not self.connection.recv(4096, socket.MSG_DONTWAIT):
                    break
        except OSError:
            pass
        finally:
            with LOCK:
                STALLS["open"] -= 1
        self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the test closes our stdin or exits


if __name__ == "__main__":
    # Start (and start children) with no blocked signals, whatever the
    # launching thread had blocked, so a plain SIGTERM stops them.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
