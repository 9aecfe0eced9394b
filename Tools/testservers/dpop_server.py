#!/usr/bin/env python3
"""An OAuth 2.0 provider that issues DPoP-bound tokens as RFC 9449 (the
final text) says, and checks every proof with an independent JOSE library
(jwcrypto), for tests.

  dpop_server.py serve      serve on a free 127.0.0.1 port (printed), until stdin closes
  dpop_server.py browse URL a scripted browser ($BROWSER): GET URL at the fixture
                            and deliver its redirect to vault
  dpop_server.py check      check proofs read from stdin as JSON: {"jkt": ..., "proofs":
                            [{"proof", "method", "url", "token", "nonce"}...]}; prints
                            one verdict per proof ("ok ALG" or "bad WHY"); exits 1 if any is bad

Endpoints (public clients `dpop-client` and `bearer-client`, PKCE S256 required):
  /.well-known/openid-configuration  metadata with dpop_signing_alg_values_supported
  /auth       answers at once with a redirect carrying the code (and iss); a
              `dpop_jkt` parameter binds the code to that key (section 10)
  /token      authorization_code and refresh_token grants; every request needs
              a valid proof with the server's current nonce (400
              use_dpop_nonce with a DPoP-Nonce header otherwise, section 8);
              tokens are bound to the proof's key (cnf.jkt), token_type DPoP,
              refresh tokens rotate and only the bound key may spend them;
              for `bearer-client` the access token is a bearer token and
              only the refresh token is bound (section 5 allows it)
  /userinfo   a protected resource: `Authorization: DPoP` with a proof that
              carries ath and the resource's nonce (401 with WWW-Authenticate
              error="use_dpop_nonce" otherwise, section 9); a bearer access
              token with `Authorization: Bearer` only (section 7.2)
  /__proofs   JSON: every proof seen, with the verdict and why

Checks on each proof (section 4.3): typ dpop+jwt; alg asymmetric and listed;
a public jwk (no private members) that verifies the signature; jti present
and never seen before; htm the request's method; htu the request's URL
without query and fragment; iat within 60 seconds of this machine's clock;
ath the SHA-256 of the access token; nonce the current one; and, for a bound
token or code, the key's thumbprint.
"""
import base64
import hashlib
import json
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from jwcrypto import jwk, jws

from common import answer_json, no_redirect_opener, serve_http_until_stdin_closes

CLIENT = "dpop-client"
# Its access tokens are bearer tokens; its refresh tokens are bound.
BEARER_CLIENT = "bearer-client"
ALGS = ["ES256", "EdDSA"]
WINDOW = 60
LOCK = threading.Lock()
STATE = {"codes": {}, "refresh": {}, "access": {}, "bearer": set(), "jtis": set(), "proofs": [],
         "nonce": {"token": secrets.token_urlsafe(12), "resource": secrets.token_urlsafe(12)}}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ProofError(Exception):
    pass


def verify(proof, method, url, nonce, access_token=None, jkt=None):
    """The thumbprint of a proof's key after RFC 9449 section 4.3's checks."""
    if not proof or proof.count(".") != 2:
        raise ProofError("not a compact JWS")
    head_b64, body_b64, _ = proof.split(".")
    header = json.loads(b64decode(head_b64))
    claims = json.loads(b64decode(body_b64))
    if header.get("typ") != "dpop+jwt":
        raise ProofError("typ is not dpop+jwt")
    if header.get("alg") not in ALGS:
        raise ProofError("alg %r is not accepted" % header.get("alg"))
    if not isinstance(header.get("jwk"), dict):
        raise ProofError("no jwk")
    if any(k in header["jwk"] for k in ("d", "p", "q", "dp", "dq", "qi", "k")):
        raise ProofError("the jwk carries a private key")
    key = jwk.JWK(**header["jwk"])
    token = jws.JWS()
    token.deserialize(proof)
    try:
        token.verify(key, alg=header["alg"])
    except Exception as e:
        raise ProofError("bad signature (%s)" % e)
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise ProofError("no jti")
    if claims.get("htm") != method:
        raise ProofError("htm %r is not %r" % (claims.get("htm"), method))
    target = urllib.parse.urlsplit(url)._replace(query="", fragment="").geturl()
    if claims.get("htu") != target:
        raise ProofError("htu %r is not %r" % (claims.get("htu"), target))
    iat = claims.get("iat")
    if not isinstance(iat, int) or abs(time.time() - iat) > WINDOW:
        raise ProofError("iat outside the window")
    if access_token is not None:
        ath = b64url(hashlib.sha256(access_token.encode()).digest())
        if claims.get("ath") != ath:
            raise ProofError("ath is not the access token's hash")
    elif "ath" in claims:
        raise ProofError("ath without an access token")
    if nonce is not None and claims.get("nonce") != nonce:
        raise ProofError("use_dpop_nonce")
    thumbprint = key.thumbprint()
    if jkt is not None and thumbprint != jkt:
        raise ProofError("the proof's key is not the one the token is bound to")
    with LOCK:
        if jti in STATE["jtis"]:
            raise ProofError("jti replayed")
        STATE["jtis"].add(jti)
    return thumbprint, header["alg"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    @property
    def base(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def send(self, status, doc, headers=()):
        answer_json(self, status, doc, headers)

    def note(self, endpoint, ok, why, alg=None):
        with LOCK:
            STATE["proofs"].append({"endpoint": endpoint, "ok": ok, "why": why, "alg": alg})

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        if path == "/.well-known/openid-configuration":
            return self.send(200, {
                "issuer": self.base, "authorization_endpoint": self.base + "/auth",
                "token_endpoint": self.base + "/token", "userinfo_endpoint": self.base + "/userinfo",
                "dpop_signing_alg_values_supported": ALGS, "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "authorization_response_iss_parameter_supported": True})
        if path == "/auth":
            return self.authorize(query)
        if path == "/userinfo":
            return self.userinfo()
        if path == "/__proofs":
            with LOCK:
                return self.send(200, STATE["proofs"])
        self.send(404, {"error": "not_found"})

    def authorize(self, q):
        if q.get("client_id") not in (CLIENT, BEARER_CLIENT) or q.get("code_challenge_method") != "S256" \
                or not q.get("redirect_uri"):
            return self.send(400, {"error": "invalid_request"})
        code = secrets.token_urlsafe(16)
        with LOCK:
            STATE["codes"][code] = {"challenge": q["code_challenge"], "redirect_uri": q["redirect_uri"],
                                    "jkt": q.get("dpop_jkt"), "scope": q.get("scope", "")}
        location = q["redirect_uri"] + "?" + urllib.parse.urlencode(
            {"code": code, "state": q.get("state", ""), "iss": self.base})
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        if path != "/token":
            return self.send(404, {"error": "not_found"})
        client = form.get("client_id")
        if client not in (CLIENT, BEARER_CLIENT):
            return self.send(401, {"error": "invalid_client"})
        grant_type = form.get("grant_type")
        with LOCK:
            if grant_type == "authorization_code":
                bound = STATE["codes"].get(form.get("code"), {}).get("jkt")
            else:
                bound = STATE["refresh"].get(form.get("refresh_token"), {}).get("jkt")
            nonce = STATE["nonce"]["token"]
        try:
            thumbprint, alg = verify(self.headers.get("DPoP"), "POST", self.base + "/token", nonce, jkt=bound)
        except ProofError as e:
            self.note("token", False, str(e))
            if str(e) == "use_dpop_nonce":
                return self.send(400, {"error": "use_dpop_nonce", "error_description": "a nonce is needed"},
                                 [("DPoP-Nonce", nonce)])
            return self.send(400, {"error": "invalid_dpop_proof", "error_description": str(e)})
        self.note("token", True, "", alg)
        with LOCK:
            if grant_type == "authorization_code":
                entry = STATE["codes"].pop(form.get("code"), None)
                verifier = form.get("code_verifier", "")
                challenge = b64url(hashlib.sha256(verifier.encode()).digest())
                if not entry or entry["challenge"] != challenge or entry["redirect_uri"] != form.get("redirect_uri"):
                    return self.send(400, {"error": "invalid_grant"})
                scope = entry["scope"]
            elif grant_type == "refresh_token":
                entry = STATE["refresh"].pop(form.get("refresh_token"), None)
                if not entry:
                    return self.send(400, {"error": "invalid_grant"})
                scope = entry["scope"]
            else:
                return self.send(400, {"error": "unsupported_grant_type"})
            access = secrets.token_urlsafe(24)
            refresh = secrets.token_urlsafe(24)
            if client == BEARER_CLIENT:
                STATE["bearer"].add(access)
            else:
                STATE["access"][access] = thumbprint
            STATE["refresh"][refresh] = {"jkt": thumbprint, "scope": scope}
            STATE["nonce"]["token"] = secrets.token_urlsafe(12)
            fresh_nonce = STATE["nonce"]["token"]
        token_type = "Bearer" if client == BEARER_CLIENT else "DPoP"
        self.send(200, {"access_token": access, "token_type": token_type, "expires_in": 3600,
                        "refresh_token": refresh, "scope": scope}, [("DPoP-Nonce", fresh_nonce)])

    def userinfo(self):
        auth = self.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        with LOCK:
            bound = STATE["access"].get(token)
            bearer = token in STATE["bearer"]
            nonce = STATE["nonce"]["resource"]
        if bearer:
            # A bearer token with the DPoP scheme is refused: it is bound to no key.
            if scheme != "Bearer" or self.headers.get("DPoP") is not None:
                self.note("userinfo", False, "a bearer token sent as a DPoP token")
                return self.send(401, {"error": "invalid_token"}, [("WWW-Authenticate", 'Bearer error="invalid_token"')])
            self.note("userinfo", True, "", "bearer")
            return self.send(200, {"sub": "dpop-user", "email": "dpop@example.com"})
        if scheme != "DPoP" or bound is None:
            self.note("userinfo", False, "no DPoP-bound token")
            return self.send(401, {"error": "invalid_token"}, [("WWW-Authenticate", 'DPoP algs="ES256 EdDSA"')])
        try:
            _, alg = verify(self.headers.get("DPoP"), self.command, self.base + self.path, nonce,
                            access_token=token, jkt=bound)
        except ProofError as e:
            self.note("userinfo", False, str(e))
            if str(e) == "use_dpop_nonce":
                return self.send(401, {"error": "use_dpop_nonce"}, [
                    ("WWW-Authenticate", 'DPoP error="use_dpop_nonce", error_description="a nonce is needed"'),
                    ("DPoP-Nonce", nonce)])
            return self.send(401, {"error": "invalid_dpop_proof"},
                             [("WWW-Authenticate", 'DPoP error="invalid_dpop_proof"')])
        self.note("userinfo", True, "", alg)
        self.send(200, {"sub": "dpop-user", "email": "dpop@example.com"})


def browse(url):
    """The person's browser: /auth answers with a redirect at once, which goes to vault's listener."""
    import urllib.error
    opener = no_redirect_opener()
    location = url
    for _ in range(3):
        try:
            opener.open(location, timeout=10).read()
            return
        except urllib.error.HTTPError as e:
            location = e.headers.get("Location")
            if not location:
                return


def check():
    """Checks proofs other programs received (vault header's): the same
    rules, jti uniqueness across all of them."""
    doc = json.load(sys.stdin)
    bad = False
    for p in doc["proofs"]:
        try:
            _, alg = verify(p["proof"], p["method"], p["url"], p.get("nonce"), access_token=p["token"],
                            jkt=doc.get("jkt"))
            print("ok " + alg)
        except ProofError as e:
            print("bad " + str(e))
            bad = True
    sys.exit(1 if bad else 0)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "browse":
        return browse(sys.argv[2])
    if sys.argv[1:] == ["check"]:
        return check()
    if sys.argv[1:] != ["serve"]:
        raise SystemExit("usage: dpop_server.py serve | browse URL")
    serve_http_until_stdin_closes(Handler)


if __name__ == "__main__":
    main()
