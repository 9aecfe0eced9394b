#!/usr/bin/env python3
"""A token endpoint that is slow on purpose, for benchmarks of the refresh path.

Binds 127.0.0.1 on a free port, prints the port on stdout, and serves until
stdin closes (so it dies with whatever started it):
  POST /delay/S/token  answers a refresh_token grant after S seconds with a new
                       access token (valid one hour; the refresh token does not
                       rotate); any client and refresh token are accepted
  POST /delay/S/rotating/token  the same, and a new refresh token with each answer
  POST /stall/token    reads the request, then never answers: the connection
                       stays open until the client gives up
  GET  /__counts       JSON: "requests" (token requests so far), "stalled"
                       (stalled connections whose client is still there),
                       "in_flight" and "peak_in_flight" (delayed requests being
                       served now, and the most at once since the last reset)
  POST /__reset        sets "peak_in_flight" to the current "in_flight"
  POST /__release      closes every stalled connection now, without an answer
"""
import select
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import answer_json

LOCK = threading.Lock()
STATE = {"requests": 0, "stalled": 0, "in_flight": 0, "peak_in_flight": 0, "issued": 0, "released": 0}
STOP = threading.Event()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def json_answer(self, status, doc):
        answer_json(self, status, doc)

    def stall(self):
        """Holds the connection without a byte of answer until the client
        closes it, /__release is asked, or this server stops."""
        with LOCK:
            STATE["stalled"] += 1
            generation = STATE["released"]
        try:
            while not STOP.is_set() and STATE["released"] == generation:
                readable, _, _ = select.select([self.connection], [], [], 0.05)
                if readable and not self.connection.recv(1, socket.MSG_DONTWAIT):  # b"": the client left
                    break
            # Closed before it stops counting, so the client knows by then.
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            with LOCK:
                STATE["stalled"] -= 1
        self.close_connection = True

    def delayed(self, seconds, form, rotating=False):
        with LOCK:
            STATE["in_flight"] += 1
            STATE["peak_in_flight"] = max(STATE["peak_in_flight"], STATE["in_flight"])
        try:
            time.sleep(seconds)
        finally:
            with LOCK:
                STATE["in_flight"] -= 1
                STATE["issued"] += 1
                issued = STATE["issued"]
        if form.get("grant_type") != "refresh_token":
            return self.json_answer(400, {"error": "unsupported_grant_type"})
        answer = {"access_token": "bench-refreshed-%06d" % issued, "token_type": "Bearer", "expires_in": 3600}
        if rotating:
            answer["refresh_token"] = "bench-rotated-%06d" % issued
        self.json_answer(200, answer)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urllib.parse.urlsplit(self.path).path.strip("/").split("/")
        if parts == ["__reset"]:
            with LOCK:
                STATE["peak_in_flight"] = STATE["in_flight"]
            return self.json_answer(200, {})
        if parts == ["__release"]:
            with LOCK:
                STATE["released"] += 1
            return self.json_answer(200, {})
        if parts[-1:] == ["token"]:
            with LOCK:
                STATE["requests"] += 1
            form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace")))
            if parts[:1] == ["stall"] and len(parts) == 2:
                return self.stall()
            rotating = parts[2:3] == ["rotating"] and len(parts) == 4
            if parts[:1] == ["delay"] and (len(parts) == 3 or rotating):
                try:
                    seconds = float(parts[1])
                except ValueError:
                    seconds = -1
                if 0 <= seconds <= 600:
                    return self.delayed(seconds, form, rotating)
        self.json_answer(404, {"error": "not_found"})

    def do_GET(self):
        if urllib.parse.urlsplit(self.path).path == "/__counts":
            with LOCK:
                doc = {k: v for k, v in STATE.items() if k not in ("issued", "released")}
            return self.json_answer(200, doc)
        self.json_answer(404, {"error": "not_found"})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until whoever started us closes our stdin or exits
    STOP.set()


if __name__ == "__main__":
    # Start with no blocked signals, whatever the launching thread had
    # blocked, so a plain SIGTERM stops this server.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
