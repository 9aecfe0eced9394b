#!/usr/bin/env python3
"""git over smart HTTP on 127.0.0.1 through a private Apache, for tests.

  git_http.py serve DIR GLEWLWYD_SETTINGS_JSON

Serves a bare repository DIR/repos/repo.git at /git/repo.git behind Basic
authentication whose password must be an OAuth access token that the
OpenID Connect provider's introspection endpoint calls active (checked by
mod_authnz_external). Prints {"port": PORT, "url": URL} and stops Apache
(by its PID) when stdin closes. Install with
`apt-get install apache2 git libapache2-mod-authnz-external`.
"""
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys

from common import free_port, stop_pid, wait_for_port

MODULES = "/usr/lib/apache2/modules"

CHECKER = r'''#!/usr/bin/env python3
# mod_authnz_external "pipe" authenticator: user and password on stdin.
# The provider is shared with tests that add plugins to it meanwhile, and
# may fail a request while it does: a failed introspection is asked again,
# and an inactive answer once more, before the password is refused.
import base64, json, sys, time, urllib.parse, urllib.request
user = sys.stdin.readline().rstrip("\n")
token = sys.stdin.readline().rstrip("\n")
c = json.load(open(%r))
body = urllib.parse.urlencode({"token": token}).encode()
auth = base64.b64encode(("%%s:%%s" %% (c["client"], c["secret"])).encode()).decode()
inactive = 0
for attempt in range(4):
    req = urllib.request.Request(c["url"], data=body, headers={"Authorization": "Basic " + auth})
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10) as r:
            doc = json.load(r)
    except Exception:
        time.sleep(0.5)
        continue
    if doc.get("active") is True:
        sys.exit(0)
    inactive += 1
    if inactive == 2:
        break
    time.sleep(0.3)
sys.exit(1)
'''



def main():
    d = os.path.abspath(sys.argv[2])
    g = json.load(open(sys.argv[3]))
    www = pwd.getpwnam("www-data")
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d + "/repos")
    os.makedirs(d + "/run")
    os.makedirs(d + "/logs")
    # Apache's children run as www-data; they must reach these files.
    for p in (d, os.path.dirname(d)):
        os.chmod(p, os.stat(p).st_mode | 0o711)
    repo = d + "/repos/repo.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", repo], check=True)
    subprocess.run(["git", "-C", repo, "config", "http.receivepack", "true"], check=True)
    with open(d + "/introspect.json", "w") as f:
        json.dump({"url": g["issuer"] + "/introspect", "client": g["confidential_client"],
                   "secret": g["client_secret"]}, f)
    with open(d + "/check-token.py", "w") as f:
        f.write(CHECKER % (d + "/introspect.json"))
    os.chmod(d + "/check-token.py", 0o755)
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            os.chown(os.path.join(root, name), www.pw_uid, www.pw_gid)
    os.chown(d, www.pw_uid, www.pw_gid)
    os.chmod(d + "/introspect.json", 0o600)
    port = free_port()
    modules = ["mpm_prefork", "authz_core", "authz_user", "authn_core", "auth_basic", "authnz_external",
               "alias", "cgi", "env", "setenvif"]
    conf = "\n".join("LoadModule %s_module %s/mod_%s.so" % (m, MODULES, m) for m in modules) + """
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile {d}/run/httpd.pid
DefaultRuntimeDir {d}/run
ErrorLog {d}/logs/error.log
LogLevel notice
# What a failed test shows of each request: when, from which client port,
# the status, whether the connection stayed open (+), closed (-) or was
# cut before the answer was sent (X), and which child served it.
LogFormat "%{{%T}}t.%{{msec_frac}}t %a:%{{remote}}p \\"%r\\" %>s %X %Dus pid %P keep-alive %k" brief
CustomLog {d}/logs/access.log brief
# git runs its credential helper between two requests on one connection;
# on a loaded machine that can outlast Apache's default 5 s keep-alive, and
# curl then sends the next request into a connection Apache has closed.
KeepAliveTimeout 300
User www-data
Group www-data
DocumentRoot {d}/repos
SetEnv GIT_PROJECT_ROOT {d}/repos
SetEnv GIT_HTTP_EXPORT_ALL 1
ScriptAlias /git/ /usr/lib/git-core/git-http-backend/
DefineExternalAuth oauth pipe {d}/check-token.py
<Location /git/>
    AuthType Basic
    AuthName "git"
    AuthBasicProvider external
    AuthExternal oauth
    Require valid-user
</Location>
""".format(port=port, d=d)
    with open(d + "/httpd.conf", "w") as f:
        f.write(conf)
    env = dict(os.environ, APACHE_RUN_DIR=d + "/run", APACHE_LOCK_DIR=d + "/run", APACHE_LOG_DIR=d + "/logs")
    subprocess.run(["apache2", "-f", d + "/httpd.conf", "-k", "start"], check=True, env=env)
    wait_for_port(port)
    print(json.dumps({"port": port, "url": "http://127.0.0.1:%d/git/repo.git" % port}), flush=True)
    try:
        sys.stdin.read()
    finally:
        try:
            stop_pid(int(open(d + "/run/httpd.pid").read()))
        except (OSError, ValueError):
            pass
        # Children left by a master that died hard.
        subprocess.run(["pkill", "-KILL", "-f", "apache2 -f " + d + "/httpd.conf"])


if __name__ == "__main__":
    # Start (and start children) with no blocked signals, whatever the
    # launching thread had blocked, so a plain SIGTERM stops them.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
