#!/usr/bin/env python3
"""Runs a private glewlwyd OpenID Connect provider on 127.0.0.1 for tests.

  glewlwyd.py start DIR [--rotate]   start, provision, print the settings as JSON
  glewlwyd.py stop DIR               stop the server started in DIR (by its PID)
  glewlwyd.py serve DIR [--rotate]   start and provision, print the settings, and
                                     stop the server when stdin closes (for tests)
  glewlwyd.py issuer DIR NAME SECONDS
                                     add a second OpenID Connect issuer to the server
                                     in DIR, at /api/NAME, whose refresh tokens roll
                                     and die after SECONDS unused (an inactivity
                                     limit); print its issuer URL
  glewlwyd.py feature DIR NAME FEATURE...
                                     add an OpenID Connect issuer at /api/NAME with
                                     FEATUREs on: par (pushed authorization requests
                                     taken), par-required (and no others), iss (the
                                     answer names the issuer), dpop (DPoP-bound tokens),
                                     dpop-nonce (and nonces), resource (RFC 8707
                                     resource indicators), rotate (refresh tokens
                                     rotate); print its issuer URL
  glewlwyd.py registration DIR NAME
                                     add an OpenID Connect issuer at /api/NAME that lets
                                     clients register themselves (RFC 7591, open: no
                                     initial access token) and delete their registration
                                     (RFC 7592); print its issuer URL
  glewlwyd.py client DIR CLIENT_ID   print the client as the admin API shows it (JSON),
                                     or exit 1 when there is none
  glewlwyd.py approve DIR URL [--print-only]
                                     log the test user in, consent, follow the
                                     authorization URL and deliver its redirect to
                                     the loopback listener (a browser); print it
  glewlwyd.py tokens DIR CLIENT [SECRET] [--issuer URL]
                                     run a whole code flow (PKCE) for CLIENT without
                                     vault and print the token response as JSON
                                     (at the issuer URL, default the first one; the
                                     confidential client's secret comes from the
                                     settings when not given)
  glewlwyd.py approve-device DIR CODE [CLIENT SCOPE]
                                     approve a device authorization user code
                                     (consenting for CLIENT first, when given)

Everything lives in DIR: database, configuration, log, PID file, settings.
The server binds 127.0.0.1 only. Install with `apt-get install glewlwyd sqlite3`.
"""
import gzip
import http.cookiejar
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from common import free_port, stop_pid, wait_for_port

SAMPLE = "/usr/share/doc/glewlwyd/glewlwyd.conf.sample.gz"
INIT_SQL = "/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz"
USER, PASSWORD, EMAIL = "ada", "ada-test-password", "ada@example.com"
PUBLIC_CLIENT, CONFIDENTIAL_CLIENT = "vault-public", "vault-confidential"
# A client that authenticates with private_key_jwt (RFC 7523 section 2.2)
# for client credentials: glewlwyd checks its assertions against the PEM
# public key in the client's "pubkey" property.
JWT_CLIENT = "vault-jwt"
CLIENT_SECRET = "vault-confidential-test-secret"
SCOPES = ["openid", "email", "profile", "mail"]
# The resources (RFC 8707) the "resource" feature lets grants with the email scope ask for.
RESOURCES = ("https://api.example.com/", "https://billing.example.com/v1")



class Session:
    """An HTTP client with its own cookie jar that never follows redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    def __init__(self, base):
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), Session.NoRedirect,
            urllib.request.ProxyHandler({}))

    def call(self, method, path, body=None):
        url = path if path.startswith("http") else self.base + path
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with self.opener.open(req, timeout=10) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def ok(self, method, path, body=None):
        status, _, payload = self.call(method, path, body)
        if status >= 300:
            raise SystemExit("glewlwyd: %s %s -> %d %s" % (method, path, status, payload[:300]))
        return payload


def write_config(d, port):
    lines = gzip.open(SAMPLE, "rt").read().splitlines()
    out = []
    for line in lines:
        key = line.split("=")[0].strip()
        if key == "port":
            line = "port=%d" % port
        elif line.startswith("#bind_address"):
            line = 'bind_address="127.0.0.1"'
        elif key == "external_url":
            line = 'external_url="http://127.0.0.1:%d"' % port
        elif key == "log_mode":
            line = 'log_mode="file"'
        elif key == "log_file":
            line = 'log_file="%s/glewlwyd.log"' % d
        elif key in ("cookie_domain",):
            continue
        elif key == "cookie_secure":
            line = "cookie_secure=0"
        elif line.strip().startswith("path") and "glewlwyd.db" in line:
            line = '  path = "%s/glewlwyd.db"' % d
        out.append(line)
    with open(d + "/glewlwyd.conf", "w") as f:
        f.write("\n".join(out) + "\n")


def rsa_keys(d):
    subprocess.run(["openssl", "genrsa", "-out", d + "/key.pem", "2048"], check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", d + "/key.pem", "-pubout", "-out", d + "/pub.pem"], check=True,
                   capture_output=True)
    return open(d + "/key.pem").read(), open(d + "/pub.pem").read()


def client_keys(d):
    """A PKCS#8 key pair for JWT_CLIENT; the private key stays in d (0600)."""
    key = d + "/jwt-client-key.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key],
                   check=True, capture_output=True)
    os.chmod(key, 0o600)
    pub = subprocess.run(["openssl", "pkey", "-in", key, "-pubout"], check=True, capture_output=True, text=True)
    return key, pub.stdout


def oidc_parameters(key, pub, issuer, rotate, refresh_duration):
    """The OIDC plugin's parameters. With refresh-token-rolling, each use of
    a refresh token starts its duration again: the duration is how long it
    may go unused (an inactivity limit), not a lifetime."""
    return {
        "jwt-type": "rsa", "jwt-key-size": "256", "key": key, "cert": pub, "iss": issuer,
        "access-token-duration": 3600, "refresh-token-duration": refresh_duration, "code-duration": 600,
        "refresh-token-rolling": True, "refresh-token-one-use": "always" if rotate else "never",
        "client-refresh-token-one-use-parameter": "refresh-token-one-use",
        "allow-non-oidc": True, "auth-type-code-enabled": True, "auth-type-code-revoke-replayed": False,
        "auth-type-token-enabled": False, "auth-type-id-token-enabled": True, "auth-type-none-enabled": False,
        "auth-type-password-enabled": False, "auth-type-client-enabled": True, "auth-type-device-enabled": True,
        "auth-type-refresh-enabled": True, "scope": [], "additional-parameters": [], "claims": [],
        "jwks-show": True, "jwks-x5c": [], "request-parameter-allow": True, "request-maximum-exp": 3600, "secret-type": "public",
        "address-claim": {"type": "no"}, "name-claim": "on-demand", "name-claim-scope": [],
        "email-claim": "mandatory", "email-claim-scope": [], "scope-claim": "no", "scope-claim-scope": [],
        "allowed-scope": SCOPES, "pkce-allowed": True, "pkce-method-plain-allowed": False,
        "pkce-required": False, "pkce-required-public-client": True, "pkce-scopes": [],
        "introspection-revocation-allowed": True, "introspection-revocation-auth-scope": [],
        "introspection-revocation-allow-target-client": True, "register-client-allowed": False,
        "session-management-allowed": False, "device-authorization-expiration": 600,
        "device-authorization-interval": 1, "oauth-dpop-allowed": False, "resource-allowed": False,
        "oauth-rar-allowed": False, "oauth-par-allowed": False, "oauth-ciba-allowed": False,
        "client-pubkey-parameter": "pubkey",
    }


def start(d, rotate):
    os.makedirs(d, mode=0o700, exist_ok=True)
    db = d + "/glewlwyd.db"
    if os.path.exists(db):
        os.remove(db)
    con = sqlite3.connect(db)
    con.executescript(gzip.open(INIT_SQL, "rt").read())
    con.close()
    port = free_port()
    write_config(d, port)
    log = open(d + "/stdout.log", "w")
    proc = subprocess.Popen(["glewlwyd", "-c", d + "/glewlwyd.conf"], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    with open(d + "/pid", "w") as f:
        f.write(str(proc.pid))
    base = "http://127.0.0.1:%d" % port
    if not wait_for_port(port, alive=lambda: proc.poll() is None):
        raise SystemExit("glewlwyd did not start: " + open(d + "/stdout.log").read())
    admin = Session(base)
    admin.ok("POST", "/api/auth/", {"username": "admin", "password": "password"})
    key, pub = rsa_keys(d)
    issuer = base + "/api/oidc"
    params = oidc_parameters(key, pub, issuer, rotate, 1209600)
    admin.ok("POST", "/api/mod/plugin/", {"module": "oidc", "name": "oidc", "display_name": "OIDC",
                                          "enabled": True, "parameters": params})
    for scope in SCOPES[1:]:
        admin.ok("POST", "/api/scope/", {"name": scope, "display_name": scope, "description": scope,
                                         "password_required": False, "password_max_age": 0, "scheme": {}})
    admin.ok("POST", "/api/user/", {"username": USER, "name": "Ada Lovelace", "email": EMAIL,
                                    "password": PASSWORD, "scope": SCOPES, "enabled": True})
    redirect = "http://127.0.0.1:%d/callback" % free_port()
    common = {"enabled": True, "redirect_uri": [redirect], "scope": SCOPES,
              "authorization_type": ["code", "device_authorization", "refresh_token"]}
    admin.ok("POST", "/api/client/", dict(common, client_id=PUBLIC_CLIENT, name="vault public",
                                          confidential=False))
    admin.ok("POST", "/api/client/", dict(common, client_id=CONFIDENTIAL_CLIENT, name="vault confidential",
                                          confidential=True, password=CLIENT_SECRET,
                                          token_endpoint_auth_method=["client_secret_basic",
                                                                      "client_secret_post"],
                                          authorization_type=common["authorization_type"] +
                                          ["client_credentials"]))
    jwt_key, jwt_pub = client_keys(d)
    admin.ok("POST", "/api/client/", {"enabled": True, "client_id": JWT_CLIENT, "name": "vault private_key_jwt",
                                      "confidential": True, "redirect_uri": [redirect], "scope": SCOPES,
                                      "token_endpoint_auth_method": ["private_key_jwt"], "pubkey": jwt_pub,
                                      "authorization_type": ["client_credentials"]})
    settings = {
        "jwt_client": JWT_CLIENT, "jwt_client_key": jwt_key,
        "port": port, "base": base, "issuer": issuer, "pid": proc.pid, "redirect_uri": redirect,
        "user": USER, "password": PASSWORD, "email": EMAIL, "public_client": PUBLIC_CLIENT,
        "confidential_client": CONFIDENTIAL_CLIENT, "client_secret": CLIENT_SECRET, "rotate": rotate,
        "discovery": issuer + "/.well-known/openid-configuration",
    }
    with open(d + "/settings.json", "w") as f:
        json.dump(settings, f, indent=1)
    print(json.dumps(settings))


def add_issuer(d, name, seconds):
    """A second OIDC plugin instance on the running server, with the same
    key, clients and user, non-rotating refresh tokens that roll and die
    after `seconds` unused."""
    if not name.isalnum() or name == "oidc" or seconds <= 0:
        raise SystemExit("glewlwyd: issuer NAME must be alphanumeric (not oidc), SECONDS positive")
    s = json.load(open(d + "/settings.json"))
    admin = Session(s["base"])
    admin.ok("POST", "/api/auth/", {"username": "admin", "password": "password"})
    issuer = s["base"] + "/api/" + name
    if admin.call("GET", "/api/mod/plugin/" + name)[0] != 200:
        params = oidc_parameters(open(d + "/key.pem").read(), open(d + "/pub.pem").read(), issuer, False, seconds)
        admin.ok("POST", "/api/mod/plugin/", {"module": "oidc", "name": name, "display_name": name,
                                              "enabled": True, "parameters": params})
    print(issuer)


# The OIDC plugin's parameters for the features of `feature`.
FEATURES = {
    "par": {"oauth-par-allowed": True, "oauth-par-request_uri-prefix": "urn:ietf:params:oauth:request_uri:",
            "oauth-par-duration": 90},
    "par-required": {"oauth-par-allowed": True, "oauth-par-required": True,
                     "oauth-par-request_uri-prefix": "urn:ietf:params:oauth:request_uri:", "oauth-par-duration": 90},
    "iss": {"oauth-as-iss-id": True},
    # DPoP (RFC 9449; glewlwyd implements draft 07): proofs up to 60 s old,
    # 5 s ahead of its clock; with dpop-nonce, a nonce it gives is needed too.
    "dpop": {"oauth-dpop-allowed": True, "oauth-dpop-iat-duration": 60, "oauth-dpop-iat-gap-duration": 5},
    "dpop-nonce": {"oauth-dpop-allowed": True, "oauth-dpop-iat-duration": 60, "oauth-dpop-iat-gap-duration": 5,
                   "oauth-dpop-nonce-mandatory": True, "oauth-dpop-nonce-counter": 10},
    # RFC 8707 resource indicators: a grant whose scopes include "email"
    # may ask for tokens for either resource below (the aud claim then
    # names it); any other resource is refused with invalid_target.
    "resource": {"resource-allowed": True, "resource-scope-and-client-property": False,
                 "resource-scope": {"email": list(RESOURCES)}},
    # Refresh tokens rotate at every use (glewlwyd then ties the new one
    # to the resource its refresh asked for).
    "rotate": {"refresh-token-one-use": "always"},
    # Clients register themselves (RFC 7591, open: no initial access
    # token) and manage their registration (RFC 7592).
    "registration": {"register-client-allowed": True, "register-client-auth-scope": [],
                     "register-client-credentials-scope": [], "register-client-management-allowed": True,
                     "register-default-properties": []},
}


def add_feature_issuer(d, name, features):
    """Another OIDC plugin instance on the running server, with the same
    key, clients and user, and the given features on."""
    if not name.isalnum() or name == "oidc" or not features or any(f not in FEATURES for f in features):
        raise SystemExit("glewlwyd: feature NAME FEATURE...: NAME alphanumeric (not oidc), FEATURE one of "
                         + ", ".join(sorted(FEATURES)))
    s = json.load(open(d + "/settings.json"))
    admin = Session(s["base"])
    admin.ok("POST", "/api/auth/", {"username": "admin", "password": "password"})
    issuer = s["base"] + "/api/" + name
    if admin.call("GET", "/api/mod/plugin/" + name)[0] != 200:
        params = oidc_parameters(open(d + "/key.pem").read(), open(d + "/pub.pem").read(), issuer, False, 1209600)
        for f in features:
            params.update(FEATURES[f])
        admin.ok("POST", "/api/mod/plugin/", {"module": "oidc", "name": name, "display_name": name,
                                              "enabled": True, "parameters": params})
    print(issuer)


def add_registration_issuer(d, name):
    """An OIDC plugin instance on the running server where any client may
    register (no initial access token) and manage its registration."""
    add_feature_issuer(d, name, ["registration"])


def show_client(d, client_id):
    s = json.load(open(d + "/settings.json"))
    admin = Session(s["base"])
    admin.ok("POST", "/api/auth/", {"username": "admin", "password": "password"})
    status, _, body = admin.call("GET", "/api/client/" + urllib.parse.quote(client_id))
    if status != 200:
        raise SystemExit(1)
    print(body.decode())


def stop(d):
    try:
        stop_pid(int(open(d + "/pid").read()), group=True)
    except (OSError, ValueError):
        pass


def user_session(d):
    s = json.load(open(d + "/settings.json"))
    session = Session(s["base"])
    session.ok("POST", "/api/auth/", {"username": s["user"], "password": s["password"]})
    return s, session


def approve(d, url, deliver=True):
    """What a person does in the browser: log in, consent, continue to the redirect."""
    s, session = user_session(d)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    # A pushed request's scopes are not in the address: consent to them all.
    default = " ".join(SCOPES) if "request_uri" in query else "openid"
    session.ok("PUT", "/api/auth/grant/%s" % query["client_id"][0], {"scope": query.get("scope", [default])[0]})
    status, headers, body = session.call("GET", url + "&g_continue")
    location = headers.get("Location")
    if status != 302 or not location:
        raise SystemExit("glewlwyd: no redirect (%d): %s" % (status, body[:300]))
    # Deliver the redirect to the application's loopback listener, as a browser would.
    if deliver and location.startswith("http://127.0.0.1"):
        try:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(location, timeout=10).read()
        except urllib.error.URLError as e:
            raise SystemExit("glewlwyd: the redirect was not accepted: %s" % e)
    print(location)


class Retry(Exception):
    """A flow that glewlwyd ended without its result, worth another try."""


def tokens_once(d, client, secret=None, issuer=None):
    import base64
    import hashlib
    import secrets
    s = json.load(open(d + "/settings.json"))
    issuer = issuer or s["issuer"]
    if secret is None and client == s["confidential_client"]:
        secret = s["client_secret"]  # from the settings file, never a command line
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": client, "redirect_uri": s["redirect_uri"],
        "scope": "openid email", "state": secrets.token_urlsafe(8), "nonce": secrets.token_urlsafe(8),
        "code_challenge": challenge, "code_challenge_method": "S256"})
    import io
    import contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        approve(d, issuer + "/auth?" + query, deliver=False)
    answer = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(out.getvalue().strip()).query))
    if "code" not in answer:
        raise Retry("glewlwyd: no code in the redirect (error %r)" % answer.get("error"))
    code = answer["code"]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": s["redirect_uri"],
            "code_verifier": verifier, "client_id": client}
    if secret:
        form["client_secret"] = secret
    req = urllib.request.Request(issuer + "/token", data=urllib.parse.urlencode(form).encode(), method="POST")
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10) as r:
            print(r.read().decode())
    except urllib.error.HTTPError as e:
        # A code refused (403) while another test adds a plugin instance
        # to the same glewlwyd: its codes are lost, so start again.
        if e.code == 403:
            raise Retry("glewlwyd: the code was refused (HTTP 403)")
        raise


def tokens(d, client, secret=None, issuer=None):
    """A whole code flow; glewlwyd's SQLite backend answers 500, ends the
    consent without a code, or refuses a code, now and then when several
    tests use it at once (one adding a plugin instance), so those are
    retried a few times."""
    for attempt in range(4):
        try:
            return tokens_once(d, client, secret, issuer)
        except urllib.error.HTTPError as e:
            if e.code < 500 or attempt == 3:
                raise
            time.sleep(0.2 * (attempt + 1))
        except Retry:
            # A busy glewlwyd sometimes ends the consent without a code.
            if attempt == 3:
                raise
            time.sleep(0.2 * (attempt + 1))


def approve_device(d, code, client=None, scope=None):
    _, session = user_session(d)
    if client:
        session.ok("PUT", "/api/auth/grant/%s" % client, {"scope": scope or "openid"})
    status, _, body = session.call("GET", "/api/oidc/device?code=%s&g_continue" % urllib.parse.quote(code))
    if status >= 400:
        raise SystemExit("glewlwyd: device approval failed (%d): %s" % (status, body[:300]))


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    cmd, d = sys.argv[1], os.path.abspath(sys.argv[2])
    if cmd == "start":
        start(d, "--rotate" in sys.argv)
    elif cmd == "stop":
        stop(d)
    elif cmd == "serve":
        try:
            start(d, "--rotate" in sys.argv)
            sys.stdout.flush()
            sys.stdin.read()  # until the test run closes our stdin or exits
        finally:
            stop(d)
    elif cmd == "approve":
        approve(d, sys.argv[3], deliver="--print-only" not in sys.argv)
    elif cmd == "registration":
        add_registration_issuer(d, sys.argv[3])
    elif cmd == "client":
        show_client(d, sys.argv[3])
    elif cmd == "issuer":
        add_issuer(d, sys.argv[3], int(sys.argv[4]))
    elif cmd == "feature":
        add_feature_issuer(d, sys.argv[3], sys.argv[4:])
    elif cmd == "tokens":
        args, issuer = sys.argv[3:], None
        if "--issuer" in args:
            at = args.index("--issuer")
            issuer = args[at + 1]
            del args[at:at + 2]
        tokens(d, args[0], args[1] if len(args) > 1 else None, issuer)
    elif cmd == "approve-device":
        approve_device(d, sys.argv[3], *sys.argv[4:6])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    # Start (and start children) with no blocked signals, whatever the
    # launching thread had blocked, so a plain SIGTERM stops them.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
