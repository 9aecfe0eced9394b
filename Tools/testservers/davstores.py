#!/usr/bin/env python3
"""Other WebDAV servers than Apache, on 127.0.0.1, for the sync tests.

  davstores.py KIND DIR PASSWORD_FILE
  davstores.py KIND --check

KIND is one of
  rclone   `rclone serve webdav` (Debian's rclone): ignores If-Match and
           If-None-Match; a PUT into a missing folder gets 404;
  nginx    nginx with its dav module and dav_ext (Debian's nginx-light and
           libnginx-mod-http-dav-ext): ignores preconditions on PUT; without
           create_full_put_path (left off here, as nginx ships it) a PUT into
           a missing folder gets 409, and MKCOL wants a trailing slash;
  wsgidav  WsgiDAV on cheroot (PyPI wsgidav, cheroot).

Serves DIR/store/ as /store/ for the user "vault" with the password in
PASSWORD_FILE (never on a command line: an htpasswd file for rclone and
nginx, a 0600 configuration file for wsgidav). Prints {"port": PORT, "url":
URL}, and stops the server by its PID when stdin closes. `--check` exits 0
when KIND can run on this machine (Tools/setup installs all three).
"""
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys

from common import free_port, stop_pid, wait_for_port

NGINX_DAV_EXT = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"


def wsgidav_python():
    """An interpreter that has wsgidav and cheroot, or None."""
    for python in ("/usr/bin/python3", shutil.which("python3")):
        if python and subprocess.run([python, "-c", "import wsgidav, cheroot"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL).returncode == 0:
            return python
    return None


def available(kind):
    if kind == "rclone":
        return shutil.which("rclone") is not None and shutil.which("htpasswd") is not None
    if kind == "nginx":
        return (os.path.exists("/usr/sbin/nginx") and os.path.exists(NGINX_DAV_EXT)
                and shutil.which("htpasswd") is not None)
    if kind == "wsgidav":
        return wsgidav_python() is not None
    return False


def htpasswd(path, password):
    # MD5 (apr1): both rclone and nginx read it.
    subprocess.run(["htpasswd", "-i", "-c", "-m", path, "vault"], input=password, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.chmod(path, 0o644)


def start_rclone(d, password, port):
    htpasswd(d + "/htpasswd", password)
    return subprocess.Popen(
        ["rclone", "serve", "webdav", d + "/data", "--addr", "127.0.0.1:%d" % port, "--baseurl", "/store",
         "--htpasswd", d + "/htpasswd", "--config", d + "/rclone.conf", "--log-file", d + "/rclone.log"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), d + "/data/"


def start_nginx(d, password, port):
    htpasswd(d + "/htpasswd", password)
    www = pwd.getpwnam("www-data")
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            os.chown(os.path.join(root, name), www.pw_uid, www.pw_gid)
    for p in (d, os.path.dirname(d)):
        os.chmod(p, os.stat(p).st_mode | 0o711)
    os.makedirs(d + "/tmp", exist_ok=True)
    os.chown(d + "/tmp", www.pw_uid, www.pw_gid)
    conf = """load_module {ext};
daemon off;
master_process on;
worker_processes 1;
user www-data www-data;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp;
    proxy_temp_path {d}/tmp;
    fastcgi_temp_path {d}/tmp;
    uwsgi_temp_path {d}/tmp;
    scgi_temp_path {d}/tmp;
    client_max_body_size 64m;
    server {{
        listen 127.0.0.1:{port};
        root {d}/www;
        location /store/ {{
            auth_basic "vault store";
            auth_basic_user_file {d}/htpasswd;
            dav_methods PUT DELETE MKCOL COPY MOVE;
            dav_ext_methods PROPFIND OPTIONS;
            dav_access user:rw group:r;
        }}
    }}
}}
""".format(ext=NGINX_DAV_EXT, d=d, port=port)
    with open(d + "/nginx.conf", "w") as f:
        f.write(conf)
    return subprocess.Popen(["/usr/sbin/nginx", "-c", d + "/nginx.conf", "-p", d],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(d + "/stderr.log", "wb")), d + "/www/store/"


def start_wsgidav(d, password, port):
    config = {
        "host": "127.0.0.1", "port": port, "server": "cheroot",
        "provider_mapping": {"/store": d + "/data"},
        "http_authenticator": {"accept_basic": True, "accept_digest": False, "default_to_digest": False},
        "simple_dc": {"user_mapping": {"*": {"vault": {"password": password.decode()}}}},
        "verbose": 1, "logging": {"enable": False},
        "property_manager": True, "lock_storage": True,
        "dir_browser": {"enable": False},
    }
    path = d + "/wsgidav.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(config, f)
    code = "import sys; from wsgidav.server.server_cli import run; sys.argv = ['wsgidav', '--config', %r]; run()" % path
    return subprocess.Popen([wsgidav_python(), "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(d + "/stderr.log", "wb")), d + "/data/"


def main():
    kind = sys.argv[1]
    if sys.argv[2:] == ["--check"]:
        sys.exit(0 if available(kind) else 1)
    d = os.path.abspath(sys.argv[2])
    password = open(sys.argv[3], "rb").read().rstrip(b"\n")
    if os.path.exists(d):
        shutil.rmtree(d)
    # The collection /store/ exists; the tests make folders below it.
    for sub in ("data", "www/store"):
        os.makedirs(d + "/" + sub)
    port = free_port()
    start = {"rclone": start_rclone, "nginx": start_nginx, "wsgidav": start_wsgidav}[kind]
    process, files = start(d, password, port)
    if not wait_for_port(port, alive=lambda: process.poll() is None, seconds=10):
        stop_pid(process.pid)
        sys.exit("%s did not start" % kind)
    print(json.dumps({"port": port, "url": "http://127.0.0.1:%d/store/" % port, "files": files}), flush=True)
    try:
        sys.stdin.read()
    finally:
        stop_pid(process.pid)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
