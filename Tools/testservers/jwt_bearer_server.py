#!/usr/bin/env python3
"""An OAuth 2.0 token endpoint on 127.0.0.1 built on authlib, for grants
that machines hold: the RFC 7523 JWT bearer grant (standing in for
Google's service-account token endpoint) and client credentials with
client_secret_basic, client_secret_post or private_key_jwt (RFC 7523
section 2.2) client authentication.

  jwt_bearer_server.py SERVICE_ACCOUNT_PUBLIC_PEM CLIENT_PUBLIC_PEM

Prints JSON settings and serves until stdin closes:
  {"port", "token_endpoint", "sa_email", "sa_key_id", "client_id",
   "client_secret", "jwt_client_id", "user"}
  POST /token       the token endpoint (authlib's JWTBearerGrant and
                    ClientCredentialsGrant); assertions are checked further
                    than authlib does: "aud" must be this endpoint, "iat"
                    not in the future, "exp" - "iat" at most an hour (as
                    Google's), "jti" never seen before
  POST /revoke      RFC 7009: forgets the token, 200
  GET /userinfo     200 {"sub": ...} for a live bearer token, else 401
  POST /__settings  {"expires_in": N} for new tokens; {"disable_key": true|false}
                    deletes the service account's key (its assertions then
                    get invalid_grant, as Google answers for a deleted key)
  GET /__log        the token requests seen: grant_type, scope, the client
                    authentication used, and each assertion's header and
                    claims (never a secret or a signature)
"""
import base64
import json
import os
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from authlib.jose import JsonWebKey
from authlib.oauth2 import AuthorizationServer, OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, OAuth2Request, grants
from authlib.oauth2.rfc6749.errors import InvalidGrantError
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion, JWTBearerGrant

from common import free_port

LOCK = threading.Lock()
STATE = {"expires_in": 3600, "key_disabled": False, "log": [], "tokens": {}, "jtis": set()}
SA_EMAIL = "ci-bot@vault-test.iam.example"
SA_KEY_ID = "a1b2c3d4e5f6"
USER = "alice@example.com"


class Client(ClientMixin):
    def __init__(self, client_id, secret=None, public_key=None, grant=None, methods=()):
        self.client_id, self.secret, self.public_key = client_id, secret, public_key
        self.grant, self.methods = grant, methods

    def get_client_id(self):
        return self.client_id

    def get_allowed_scope(self, scope):
        return scope

    def check_client_secret(self, client_secret):
        return self.secret is not None and secrets.compare_digest(self.secret, client_secret)

    def check_endpoint_auth_method(self, method, endpoint):
        return method in self.methods

    def check_grant_type(self, grant_type):
        return grant_type == self.grant


def now():
    return int(time.time())


def check_times(claims, token_url):
    """What authlib leaves to the server: the audience, and dates that a
    server with a right clock can accept."""
    if claims.get("aud") != token_url:
        raise InvalidGrantError(description="the assertion is for another audience")
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int):
        raise InvalidGrantError(description="the assertion needs iat and exp")
    if iat > now() + 10:
        raise InvalidGrantError(description="the assertion is not yet valid (iat is in the future)")
    if exp - iat > 3600:
        raise InvalidGrantError(description="the assertion lives longer than an hour (check iat and exp)")
    jti = claims.get("jti")
    with LOCK:
        if not jti or jti in STATE["jtis"]:
            raise InvalidGrantError(description="the assertion has no jti or was seen before")
        STATE["jtis"].add(jti)


class ServiceAccountGrant(JWTBearerGrant):
    def process_assertion_claims(self, assertion):
        claims = super().process_assertion_claims(assertion)
        check_times(claims, self.server.token_url)
        return claims

    def resolve_issuer_client(self, issuer):
        return self.server.clients.get(issuer)

    def resolve_client_key(self, client, headers, payload):
        if client is None or client.client_id != SA_EMAIL or STATE["key_disabled"] or headers.get("kid") != SA_KEY_ID:
            raise InvalidGrantError(description="Invalid JWT Signature.")
        return client.public_key

    def authenticate_user(self, subject):
        return subject if subject == USER else None

    def has_granted_permission(self, client, user):
        return True


class ClientCredentials(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "client_assertion_jwt"]


class ClientAssertion(JWTBearerClientAssertion):
    def validate_jti(self, claims, jti):
        return True  # checked with the dates, in process_assertion_claims

    def process_assertion_claims(self, assertion, resolve_key):
        claims = super().process_assertion_claims(assertion, resolve_key)
        try:
            check_times(claims, self.token_url)
        except InvalidGrantError as e:
            from authlib.oauth2.rfc6749.errors import InvalidClientError
            raise InvalidClientError(description=e.description)
        return claims

    def resolve_client_public_key(self, client, headers):
        return client.public_key


class Server(AuthorizationServer):
    def __init__(self, token_url, clients):
        super().__init__()
        self.token_url, self.clients = token_url, clients

    def query_client(self, client_id):
        return self.clients.get(client_id)

    def save_token(self, token, request):
        with LOCK:
            STATE["tokens"][token["access_token"]] = request.user or request.client.client_id

    def create_oauth2_request(self, request):
        return request

    def handle_response(self, status, body, headers):
        return status, body, headers

    def send_signal(self, name, *args, **kwargs):
        pass


def decoded(segment):
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def main():
    sa_key = JsonWebKey.import_key(open(sys.argv[1]).read(), {"kty": "RSA"})
    client_key = JsonWebKey.import_key(open(sys.argv[2]).read(), {"kty": "RSA"})
    port = free_port()
    token_url = "http://127.0.0.1:%d/token" % port
    client_secret = secrets.token_urlsafe(16)
    clients = {
        SA_EMAIL: Client(SA_EMAIL, public_key=sa_key, grant=JWTBearerGrant.GRANT_TYPE),
        "cc-secret": Client("cc-secret", secret=client_secret, grant="client_credentials",
                            methods=("client_secret_basic", "client_secret_post")),
        "cc-jwt": Client("cc-jwt", public_key=client_key, grant="client_credentials",
                         methods=("client_assertion_jwt",)),
    }
    server = Server(token_url, clients)
    server.register_grant(ServiceAccountGrant)
    server.register_grant(ClientCredentials)
    server.register_client_auth_method(ClientAssertion.CLIENT_AUTH_METHOD, ClientAssertion(token_url))
    server.register_token_generator("default", BearerTokenGenerator(
        access_token_generator=lambda *a, **k: "at-" + secrets.token_urlsafe(18),
        expires_generator=lambda client, grant_type: STATE["expires_in"]))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body, headers=()):
            data = json.dumps(body).encode()
            self.send_response(status)
            for k, v in headers:
                if k.lower() != "content-type":
                    self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def form(self):
            n = int(self.headers.get("Content-Length") or 0)
            return dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))

        def do_GET(self):
            if self.path == "/__log":
                with LOCK:
                    return self.answer(200, STATE["log"])
            if self.path == "/userinfo":
                token = (self.headers.get("Authorization") or "")[len("Bearer "):]
                with LOCK:
                    who = STATE["tokens"].get(token)
                return self.answer(200, {"sub": who}) if who else self.answer(401, {"error": "invalid_token"})
            self.answer(404, {})

        def do_POST(self):
            form = self.form() if self.path != "/__settings" else None
            if self.path == "/__settings":
                n = int(self.headers.get("Content-Length") or 0)
                settings = json.loads(self.rfile.read(n) or b"{}")
                with LOCK:
                    if "expires_in" in settings:
                        STATE["expires_in"] = settings["expires_in"]
                    if "disable_key" in settings:
                        STATE["key_disabled"] = bool(settings["disable_key"])
                return self.answer(200, {})
            if self.path == "/revoke":
                with LOCK:
                    STATE["tokens"].pop(form.get("token"), None)
                return self.answer(200, {})
            if self.path != "/token":
                return self.answer(404, {})
            auth = self.headers.get("Authorization") or ""
            entry = {"grant_type": form.get("grant_type"), "scope": form.get("scope"),
                     "client_auth": "basic" if auth.startswith("Basic ") else
                     "jwt" if "client_assertion" in form else "post" if "client_secret" in form else "none"}
            for field in ("assertion", "client_assertion"):
                if field in form:
                    parts = form[field].split(".")
                    entry[field] = {"header": decoded(parts[0]), "claims": decoded(parts[1])}
            with LOCK:
                STATE["log"].append(entry)
            request = OAuth2Request("POST", token_url, body=form, headers=dict(self.headers.items()))
            try:
                status, body, headers = server.create_token_response(request)
            except OAuth2Error as e:
                status, body, headers = e.status_code, dict(e.get_body()), ()
            self.answer(status, body, headers)

    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"  # plain http, on loopback only
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(json.dumps({"port": port, "token_endpoint": token_url, "sa_email": SA_EMAIL, "sa_key_id": SA_KEY_ID,
                      "client_id": "cc-secret", "client_secret": client_secret, "jwt_client_id": "cc-jwt",
                      "user": USER}), flush=True)
    sys.stdin.read()
    httpd.shutdown()


if __name__ == "__main__":
    main()
