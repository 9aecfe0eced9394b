#!/usr/bin/env python3
"""A Kubernetes API server for kubectl, just enough of one, for tests.

  kube_api.py serve DIR GLEWLWYD_SETTINGS_JSON
  kube_api.py serve-any DIR     takes any bearer token (Tools/bench, which
                                compares vault with a token in the kubeconfig)

HTTPS on 127.0.0.1 with a certificate made here (a CA and a server
certificate for IP 127.0.0.1, written to DIR/ca.pem). Every request needs
`Authorization: Bearer TOKEN` where TOKEN is an access token that the
OpenID Connect provider's introspection endpoint calls active, or an ID
token of the provider for its confidential client (signature checked with
the provider's keys by jwcrypto, issuer, audience and expiry), as a
cluster's OIDC settings take one; anything else gets the 401 Status an API
server sends. It answers the discovery kubectl
does (/api, /api/v1, /apis) and lists pods in namespace default
(/api/v1/namespaces/default/pods: web-1 and web-2).

Prints {"port": PORT, "ca": PATH} and serves until stdin closes.
DIR/tokens.log gets one line per request: the first 16 hex digits of the
SHA-256 of the bearer token sent (never the token), the status answered,
and which kind of token it took (`access`, `id`, `any` with serve-any,
or `-`).
Needs openssl (the command).
"""
import hashlib
import json
import os
import ssl
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import free_port


def make_certificates(d):
    """A CA and a server certificate for 127.0.0.1 signed by it."""
    run = lambda *args: subprocess.run(["openssl"] + list(args), check=True, capture_output=True)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
        "-subj", "/CN=vault test cluster CA", "-keyout", d + "/ca.key", "-out", d + "/ca.pem")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", d + "/server.key", "-out", d + "/server.csr")
    with open(d + "/ext.cnf", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", d + "/server.csr", "-CA", d + "/ca.pem", "-CAkey", d + "/ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", d + "/ext.cnf", "-out", d + "/server.pem")


def handler_for(d, introspection, provider):
    log_lock = threading.Lock()

    def id_token(token):
        """True for an ID token of the provider for its confidential client."""
        from jwcrypto import jwk, jws
        import time
        try:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(provider["issuer"] + "/.well-known/openid-configuration", timeout=10) as r:
                jwks_uri = json.load(r)["jwks_uri"]
            with opener.open(jwks_uri, timeout=10) as r:
                keys = jwk.JWKSet.from_json(r.read())
            signed = jws.JWS()
            signed.deserialize(token)
            for key in keys["keys"]:
                try:
                    signed.verify(key)
                    break
                except Exception:
                    continue
            else:
                return False
            claims = json.loads(signed.payload)
            # An access token in JWT form (RFC 9068, typ at+jwt) is no ID token.
            if str(signed.jose_header.get("typ", "")).lower() in ("at+jwt", "application/at+jwt"):
                return False
            audience = claims.get("aud")
            audience = [audience] if isinstance(audience, str) else audience or []
            return claims.get("iss") == provider["issuer"] and provider["client"] in audience \
                and float(claims.get("exp", 0)) > time.time()
        except Exception:
            return False

    def active(token):
        body = urllib.parse.urlencode({"token": token}).encode()
        req = urllib.request.Request(introspection["url"], data=body, headers={
            "Authorization": "Basic " + introspection["basic"]})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=10) as r:
                return json.load(r).get("active") is True
        except Exception:
            return False

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, doc):
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            auth = self.headers.get("Authorization", "")
            token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
            kind = "-"
            if token and provider is None:
                kind = "any"
            elif token.count(".") == 2 and id_token(token):
                kind = "id"
            elif token and active(token):
                kind = "access"
            ok = kind != "-"
            with log_lock, open(d + "/tokens.log", "a") as f:
                digest = hashlib.sha256(token.encode()).hexdigest()[:16] if token else "-"
                f.write("%s %d %s\n" % (digest, 200 if ok else 401, kind))
            if not ok:
                return self.answer(401, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                         "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
            path = urllib.parse.urlsplit(self.path).path
            if path == "/api":
                return self.answer(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:%d" % self.server.server_port}]})
            if path == "/apis":
                return self.answer(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
            if path == "/api/v1":
                return self.answer(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
                                         "resources": [{"name": "pods", "singularName": "", "namespaced": True,
                                                        "kind": "Pod", "verbs": ["get", "list"],
                                                        "shortNames": ["po"]}]})
            if path == "/api/v1/namespaces/default/pods":
                pods = [{"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": n, "namespace": "default", "uid": "uid-" + n,
                                      "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
                         "spec": {"containers": [{"name": "web", "image": "nginx"}]},
                         "status": {"phase": "Running"}} for n in ("web-1", "web-2")]
                return self.answer(200, {"kind": "PodList", "apiVersion": "v1",
                                         "metadata": {"resourceVersion": "1"}, "items": pods})
            return self.answer(404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                     "message": "the server could not find the requested resource",
                                     "reason": "NotFound", "code": 404})

    return Handler


def main():
    d = os.path.abspath(sys.argv[2])
    os.makedirs(d, exist_ok=True)
    introspection, provider = None, None
    if sys.argv[1] == "serve":
        g = json.load(open(sys.argv[3]))
        import base64
        introspection = {"url": g["issuer"] + "/introspect", "basic": base64.b64encode(
            ("%s:%s" % (g["confidential_client"], g["client_secret"])).encode()).decode()}
        provider = {"issuer": g["issuer"], "client": g["confidential_client"]}
    make_certificates(d)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(d + "/server.pem", d + "/server.key")
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler_for(d, introspection, provider))
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": server.server_port, "ca": d + "/ca.pem"}), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
