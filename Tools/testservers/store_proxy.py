#!/usr/bin/env python3
"""A fault-injecting HTTP proxy in front of a sync store, for tests.

  store_proxy.py UPSTREAM_BASE [PORT] [--keep-host]

Binds 127.0.0.1 on PORT (default: a free port; a given one lets a test stop
the proxy and bring the store back at the same address), prints the port,
forwards every request to UPSTREAM_BASE with the same path, and serves until
stdin closes. With --keep-host the client's Host header goes upstream as it
came, so requests signed for the proxy's address (S3's SigV4) stay valid;
mode nocas then breaks their signatures, as it removes signed headers. It keeps every body it forwarded on a PUT, per path, to replay
old ones. Control (GET, answered by the proxy itself):
  /__mode/NAME     one of:
     pass          forward (the default)
     nocas         drop If-Match and If-None-Match (a store that ignores them)
     old           answer GET with the previous body PUT at that path
     flip          flip one byte in the middle of GET bodies
     truncate      cut GET bodies in half
     html          answer everything 200 with an HTML login page
     412           answer every PUT 412
     500           answer everything 500
     stall         accept, then send nothing for 60 s
     reset         close the connection at once, forwarding nothing (a
                   partition)
     redirect      answer everything 302 to another host
  /__delay/MS      hold every request MS milliseconds before forwarding it
  /__fail/N        answer the next N requests 500, then go back to the mode
  /__lostack/N     forward every Nth PUT or DELETE to the store, then close
                   the connection without answering (the store applied it;
                   the answer was lost); 0 turns it off
  /__oldonce       answer the next GET of a path PUT at least twice with its
                   previous body, once (an overwritten read racing a write)
  /__counts        JSON: requests and PUT body bytes seen since the last reset
  /__reset         zero the counts
"""
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

from common import forward, no_redirect_opener, serve_http_until_stdin_closes

ARGS = [a for a in sys.argv[1:] if a != "--keep-host"]
KEEP_HOST = "--keep-host" in sys.argv
UPSTREAM = ARGS[0].rstrip("/")
LOCK = threading.Lock()
STATE = {"mode": "pass", "fail": 0, "oldonce": False, "requests": 0, "put_bytes": 0, "lostack": 0, "writes": 0,
         "lost": 0, "delay": 0}
HISTORY = {}
OPENER = no_redirect_opener()

HTML = b"<!DOCTYPE html><html><body><form>Sign in</form></body></html>"


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
        if self.command != "HEAD":
            self.wfile.write(body)

    def control(self, path):
        with LOCK:
            if path.startswith("/__mode/"):
                STATE["mode"] = path[len("/__mode/"):]
            elif path.startswith("/__fail/"):
                STATE["fail"] = int(path[len("/__fail/"):])
            elif path.startswith("/__delay/"):
                STATE["delay"] = int(path[len("/__delay/"):])
            elif path.startswith("/__lostack/"):
                STATE["lostack"] = int(path[len("/__lostack/"):])
                STATE["writes"] = 0
            elif path == "/__oldonce":
                STATE["oldonce"] = True
            elif path == "/__reset":
                STATE["requests"] = 0
                STATE["put_bytes"] = 0
            return self.answer(200, json.dumps(STATE).encode(), [("Content-Type", "application/json")])

    def handle_any(self):
        path = self.path
        if path.startswith("/__"):
            return self.control(path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        with LOCK:
            STATE["requests"] += 1
            if self.command == "PUT":
                STATE["put_bytes"] += length
            mode = STATE["mode"]
            delay = STATE["delay"]
            failing = STATE["fail"] > 0
            if failing:
                STATE["fail"] -= 1
        if delay:
            time.sleep(delay / 1000)
        if mode == "reset":
            self.close_connection = True
            return
        if failing or mode == "500":
            return self.answer(500, b"", [("Content-Type", "text/plain")])
        if mode == "html":
            return self.answer(200, HTML, [("Content-Type", "text/html; charset=utf-8")])
        if mode == "redirect":
            return self.answer(302, b"", [("Location", "http://example.com" + path)])
        if mode == "stall":
            time.sleep(60)
            return
        if mode == "412" and self.command == "PUT":
            return self.answer(412, b"", [("Content-Type", "text/plain")])
        if self.command == "GET":
            with LOCK:
                bodies = HISTORY.get(path, [])
                once = STATE["oldonce"] and len(bodies) >= 2
                if once:
                    STATE["oldonce"] = False
            if (mode == "old" or once) and len(bodies) >= 2:
                return self.answer(200, bodies[-2], [("Content-Type", "application/octet-stream")])
        drop = ("if-match", "if-none-match") if mode == "nocas" else ()
        status, payload, rh = forward(OPENER, UPSTREAM + path, self.command, body, self.headers.items(), drop,
                                      keep_host=KEEP_HOST)
        if self.command in ("PUT", "DELETE"):
            with LOCK:
                STATE["writes"] += 1
                lose = STATE["lostack"] > 0 and STATE["writes"] % STATE["lostack"] == 0
                if lose:
                    STATE["lost"] += 1
            if lose:
                if self.command == "PUT" and status in (200, 201, 204):
                    with LOCK:
                        HISTORY.setdefault(path, []).append(body or b"")
                self.close_connection = True
                return
        if self.command == "PUT" and status in (200, 201, 204):
            with LOCK:
                HISTORY.setdefault(path, []).append(body or b"")
        if self.command == "GET" and status == 200 and payload:
            if mode == "flip":
                payload = bytearray(payload)
                payload[len(payload) // 2] ^= 0x01
                payload = bytes(payload)
            elif mode == "truncate":
                payload = payload[: len(payload) // 2]
        keep = [(k, v) for k, v in rh if k.lower() in ("content-type", "etag", "www-authenticate", "location")]
        self.answer(status, payload, keep)

    do_GET = do_PUT = do_DELETE = do_HEAD = handle_any


def main():
    serve_http_until_stdin_closes(Proxy, int(ARGS[1]) if len(ARGS) > 1 else 0)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
