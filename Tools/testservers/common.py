"""Helpers shared by the test servers in this folder."""
import os
import signal
import socket
import time


def free_port():
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, alive=lambda: True, seconds=5):
    """Waits until something accepts connections on 127.0.0.1:port."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            if not alive():
                return False
            time.sleep(0.05)
    return False


def stop_pid(pid, group=False):
    """SIGTERM, a moment's grace, then SIGKILL: the process (or its group) is gone."""
    kill = os.killpg if group else os.kill
    try:
        kill(pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.05)
        kill(pid, signal.SIGKILL)
    except OSError:
        pass


def answer_json(handler, status, doc, headers=()):
    """Answers a BaseHTTPRequestHandler's request with `doc` as JSON, not
    cached (as token endpoints answer), with any further `headers` pairs."""
    import json
    body = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Cache-Control", "no-store")
    handler.send_header("Content-Length", str(len(body)))
    for name, value in headers:
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def no_redirect_opener():
    """A urllib opener that ignores proxy settings and follows no redirect."""
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    opener.add_handler(NoRedirect())
    return opener


def forward(opener, url, method, body, headers, drop=(), keep_host=False):
    """Sends one request upstream as a proxy would, without the hop-by-hop
    headers and those in drop (and Host, unless keep_host); returns
    (status, body, header items), error statuses included."""
    import urllib.error
    import urllib.request
    skip = (() if keep_host else ("host",)) + ("content-length", "connection", "expect") + tuple(drop)
    kept = {k: v for k, v in headers if k.lower() not in skip}
    req = urllib.request.Request(url, data=body, method=method, headers=kept)
    try:
        with opener.open(req, timeout=20) as r:
            return r.status, r.read(), r.headers.items()
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.items()


def serve_http_until_stdin_closes(handler, port=0):
    """Serves handler on 127.0.0.1 at port (0: a free one), prints the
    port, and returns when stdin closes."""
    import sys
    import threading
    from http.server import ThreadingHTTPServer
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


def run_apache_until_stdin_closes(d, conf, port, info):
    """Starts a private Apache with configuration conf (PidFile in d/run),
    prints info as JSON once it listens on port, and stops it by its PID
    when stdin closes (children of a master that died hard are killed)."""
    import json
    import subprocess
    import sys
    with open(d + "/httpd.conf", "w") as f:
        f.write(conf)
    env = dict(os.environ, APACHE_RUN_DIR=d + "/run", APACHE_LOCK_DIR=d + "/run", APACHE_LOG_DIR=d + "/logs")
    subprocess.run(["apache2", "-f", d + "/httpd.conf", "-k", "start"], check=True, env=env)
    wait_for_port(port)
    print(json.dumps(info), flush=True)
    try:
        sys.stdin.read()
    finally:
        try:
            stop_pid(int(open(d + "/run/httpd.pid").read()))
        except (OSError, ValueError):
            pass
        subprocess.run(["pkill", "-KILL", "-f", "apache2 -f " + d + "/httpd.conf"])
