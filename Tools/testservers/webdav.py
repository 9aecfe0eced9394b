#!/usr/bin/env python3
"""A WebDAV collection on 127.0.0.1 through a private Apache, for tests.

  webdav.py DIR PASSWORD_FILE

Serves DIR/www/store/ as a WebDAV collection (mod_dav, mod_dav_fs) at
/store/ behind Basic authentication for the user "vault" with the password
in PASSWORD_FILE (never on a command line). `FileETag Digest` gives strong
ETags, so Apache honours If-Match and If-None-Match. Prints
{"port": PORT, "url": URL}, and stops Apache by its PID when stdin closes.
Install with `apt-get install apache2 apache2-utils`.
"""
import os
import pwd
import shutil
import signal
import subprocess
import sys

from common import free_port, run_apache_until_stdin_closes

MODULES = "/usr/lib/apache2/modules"


def main():
    d = os.path.abspath(sys.argv[1])
    password = open(sys.argv[2], "rb").read().rstrip(b"\n")
    www = pwd.getpwnam("www-data")
    if os.path.exists(d):
        shutil.rmtree(d)
    for sub in ("www/store", "run", "logs", "dav"):
        os.makedirs(d + "/" + sub)
    # Apache's children run as www-data; they must reach these files.
    for p in (d, os.path.dirname(d)):
        os.chmod(p, os.stat(p).st_mode | 0o711)
    subprocess.run(["htpasswd", "-i", "-c", "-B", d + "/htpasswd", "vault"], input=password, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            os.chown(os.path.join(root, name), www.pw_uid, www.pw_gid)
    os.chown(d, www.pw_uid, www.pw_gid)
    port = free_port()
    modules = ["mpm_prefork", "authz_core", "authz_user", "authn_core", "authn_file", "auth_basic", "alias",
               "dav", "dav_fs"]
    conf = "\n".join("LoadModule %s_module %s/mod_%s.so" % (m, MODULES, m) for m in modules) + """
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile {d}/run/httpd.pid
DefaultRuntimeDir {d}/run
ErrorLog {d}/logs/error.log
LogLevel warn
User www-data
Group www-data
DocumentRoot {d}/www
DAVLockDB {d}/dav/lockdb
FileETag Digest
LimitRequestBody 67108864
<Directory {d}/www/store>
    Dav On
    AuthType Basic
    AuthName "vault store"
    AuthBasicProvider file
    AuthUserFile {d}/htpasswd
    Require valid-user
</Directory>
""".format(port=port, d=d)
    run_apache_until_stdin_closes(d, conf, port, {"port": port, "url": "http://127.0.0.1:%d/store/" % port})


if __name__ == "__main__":
    # Start (and start children) with no blocked signals, whatever the
    # launching thread had blocked, so a plain SIGTERM stops them.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
