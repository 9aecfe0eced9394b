#!/usr/bin/env python3
"""A scriptable OAuth 2.0 / OpenID Connect provider on 127.0.0.1, for tests.

  provider_fixture.py PERSONA      serve; PERSONA is rfc, github, google or microsoft
  provider_fixture.py browse URL   a scripted browser ($BROWSER): GET URL at the
                                   fixture and deliver its redirect to vault
  provider_fixture.py browse-after SECONDS URL   the same, SECONDS later

The server binds a free port, prints it, and serves until stdin closes.
Each persona answers the way its provider documents (see PERSONAS below):
  rfc        RFC 6749, 7009, 8628 and OpenID Connect Discovery to the letter:
             errors as 400 JSON (401 for invalid_client), client
             authentication by the methods its discovery document lists
  github     errors in HTTP 200 answers, JSON only when asked for with
             Accept: application/json (else form-encoded), scopes answered
             with commas, GitHub's own error codes (bad_verification_code,
             bad_refresh_token, incorrect_client_credentials, ...), no refresh
             token unless the setting github_app is on (then expiring tokens,
             rotating refresh tokens and refresh_token_expires_in)
  google     a refresh token only for access_type=offline with prompt=consent,
             refresh tokens that do not rotate, an ID token in refresh
             answers, the device answer's older verification_url, and the
             device-poll statuses 428 (authorization_pending) and 403
             (slow_down, access_denied)
  microsoft  a public client (a client secret is refused with invalid_client),
             a refresh token only with the offline_access scope, refresh
             tokens that rotate (the old one then answers invalid_grant),
             ext_expires_in, ID tokens issued by the user's own tenant, and
             authorization_declined for a denied device code

Endpoints (any path prefix, matched on the last segments):
  GET  .../.well-known/openid-configuration
  GET  .../authorize        the person approves at once: 302 to redirect_uri
                            with code and state (or error=access_denied)
  POST .../token, .../access_token   authorization_code, refresh_token, device_code
  POST .../device, .../devicecode, .../device/code   RFC 8628 section 3.1
  POST .../par              RFC 9126 pushed authorization requests: 201 with a
                            request_uri that GET .../authorize takes once
  POST .../revoke           RFC 7009
  GET  .../userinfo, .../user   the bearer token's owner
Control, for the tests (never secrets in the log):
  POST /__settings JSON     merge into the persona's settings; "clock_offset": S
                            moves the Date header of every answer S seconds
  POST /__script JSON       queue canned answers: {"token": [A...], "device":
                            [...], "authorize": [...], "revoke": [...],
                            "userinfo": [...], "discovery": {fields}}
  POST /__mint JSON         a token response for {"scope": "..."} issued as
                            if by a code exchange (to import)
  POST .../register         RFC 7591 client registration (when the setting
                            "registration" is on): 201 with the persona's client,
                            a registration_client_uri and a registration access token
  GET, DELETE .../register/ID   RFC 7592 with that token: 200 / 204, 401 once deleted
Settings for RFC 7591 and RFC 7592: "registration" (discovery names the
registration endpoint). Canned answers "register" and "register_delete"
replace the next answer of each.
Setting "discovery_status": N answers discovery with HTTP N and no document.
Client assertions (private_key_jwt, when "auth_methods" lists it) are taken
unverified; the log keeps their decoded claims (never the assertion) as
"assertion_claims".
Settings for RFC 9126 and RFC 9207: "par" (discovery names the pushed-request
endpoint), "par_required" (and says it is required; /authorize then refuses a
request that was not pushed), "par_expires_in" (seconds a request_uri lasts),
"iss_parameter" (the redirect carries iss, the issuer) and "advertise_iss"
(discovery says so; default: as "iss_parameter"). A canned "authorize" answer
may carry "iss": VALUE (null: none) for that one redirect.
Settings every persona takes: "refresh_inactivity" (seconds a refresh token
may go unused before refreshing with it answers invalid_grant, as
Microsoft's AADSTS700082 does; a use is a refresh) and "clock_offset"
(seconds added to the fixture's clock, to move it with a vault run under
libfaketime).
  GET  /__log               the requests seen: endpoint, grant_type, client
                            authentication used, form keys, Accept, time

A canned answer A is used by the next request to its endpoint (for "token",
the next one whose grant_type equals A's "when", if given), before the
persona's own behaviour:
  {"error": CODE, "description": TEXT}   an error shaped by the persona
  {"issue": {FIELD: VALUE}}              the persona's success answer with
                                         fields replaced (null removes one);
                                         "id_token_claims" changes the ID token
  {"status": N, "json": OBJ | "form": OBJ | "body": TEXT,
   "content_type": TYPE, "headers": {NAME: VALUE}}   exactly this answer
  {"deny": true}                         (authorize) the person says no
"""
import base64
import hashlib
import json
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from common import no_redirect_opener, serve_http_until_stdin_closes

TENANT = "9188040d-6c67-4c5b-b112-36a304b66dad"

PERSONAS = {
    "rfc": {
        "client_id": "vault-test", "client_secret": "fixture-client-secret",
        "auth_methods": ["client_secret_basic", "client_secret_post"],
        "rotate": False, "refresh_token_expires_in": None, "expires_in": 3600, "interval": 1,
        "device_expires_in": 900, "openid": True,
        "par": False, "par_required": False, "par_expires_in": 60, "iss_parameter": False, "advertise_iss": None,
    },
    "github": {
        "client_id": "vault-test", "client_secret": "fixture-client-secret",
        "auth_methods": ["client_secret_post", "client_secret_basic"],
        "github_app": False, "rotate": True, "refresh_token_expires_in": 15897600, "expires_in": 28800,
        "interval": 1, "device_expires_in": 900, "openid": False,
    },
    "google": {
        "client_id": "vault-test.apps.googleusercontent.com", "client_secret": "fixture-client-secret",
        "auth_methods": ["client_secret_post", "client_secret_basic"],
        "rotate": False, "refresh_token_expires_in": None, "expires_in": 3599, "interval": 1,
        "device_expires_in": 1800, "openid": True,
    },
    "microsoft": {
        "client_id": "00000000-0000-0000-0000-00000000vault", "client_secret": None,
        "auth_methods": ["none"],
        "rotate": True, "refresh_token_expires_in": None, "expires_in": 3600, "interval": 1,
        "device_expires_in": 900, "openid": True,
    },
}

# The provider's own error codes for the standard situations.
NATIVE_ERRORS = {
    "rfc": {"bad_code": "invalid_grant", "bad_refresh": "invalid_grant", "bad_client": "invalid_client",
            "denied": "access_denied", "bad_device": "invalid_grant"},
    "github": {"bad_code": "bad_verification_code", "bad_refresh": "bad_refresh_token",
               "bad_client": "incorrect_client_credentials", "denied": "access_denied",
               "bad_device": "incorrect_device_code"},
    "google": {"bad_code": "invalid_grant", "bad_refresh": "invalid_grant", "bad_client": "invalid_client",
               "denied": "access_denied", "bad_device": "invalid_grant"},
    "microsoft": {"bad_code": "invalid_grant", "bad_refresh": "invalid_grant", "bad_client": "invalid_client",
                  "denied": "authorization_declined", "bad_device": "bad_verification_code"},
}

# Google's device-poll statuses; everything else of Google's is 400 (401 for invalid_client).
GOOGLE_STATUS = {"authorization_pending": 428, "slow_down": 403, "access_denied": 403, "invalid_client": 401}

SECRET_KEYS = {"client_secret", "code", "code_verifier", "refresh_token", "device_code", "token", "assertion"}


class State:
    def __init__(self, persona):
        self.persona = persona
        self.settings = dict(PERSONAS[persona])
        self.lock = threading.Lock()
        self.queues = {}
        self.discovery = {}
        self.log = []
        self.counter = 0
        self.codes = {}  # code -> request facts
        self.refresh = {}  # refresh token -> grant facts
        self.used = {}  # refresh token -> when it was issued or last used (fixture clock)
        self.access = {}  # access token -> grant facts
        self.devices = {}  # device code -> facts
        self.pushed = {}  # request_uri -> (authorization parameters, expiry on the fixture clock)
        self.registrations = {}  # registered client id -> its registration access token

    def next_id(self, prefix):
        self.counter += 1
        return "%s-%d-%s" % (prefix, self.counter, hashlib.sha256(str(time.time()).encode()).hexdigest()[:12])

    def now(self):
        return time.time() + float(self.settings.get("clock_offset") or 0)

    def take(self, endpoint, grant_type=None):
        queue = self.queues.get(endpoint, [])
        for i, answer in enumerate(queue):
            if answer.get("when") in (None, grant_type):
                return queue.pop(i)
        return None


STATE = None


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def assertion_claims(jwt):
    """The claims of a client assertion (RFC 7523), unverified; None when it is not a JWT."""
    try:
        part = jwt.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (IndexError, ValueError):
        return None


def pkce_ok(challenge, verifier):
    return challenge is None or b64url(hashlib.sha256((verifier or "").encode()).digest()) == challenge


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    # -- plumbing ---------------------------------------------------------

    @property
    def base(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def issuer(self):
        if STATE.persona == "microsoft":
            return "%s/%s/v2.0" % (self.base, TENANT)
        return self.base

    def date_time_string(self, timestamp=None):
        # A provider whose clock is off: the Date header every answer carries.
        offset = STATE.settings.get("clock_offset") or 0
        return super().date_time_string((timestamp if timestamp is not None else time.time()) + offset)

    def send(self, status, body=b"", content_type="application/json", headers=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        if body:
            self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-store")
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def wants_json(self):
        return "application/json" in (self.headers.get("Accept") or "")

    def answer_object(self, status, obj, encoding=None, headers=()):
        """A JSON object, or form-encoded where the persona (or the script) says so."""
        if encoding is None:
            encoding = "form" if STATE.persona == "github" and not self.wants_json() else "json"
        if encoding == "form":
            pairs = [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in obj.items() if v is not None]
            return self.send(status, urllib.parse.urlencode(pairs), "application/x-www-form-urlencoded", headers)
        return self.send(status, json.dumps(obj), "application/json", headers)

    def error(self, code, description=None, status=None, headers=()):
        """An error answer the way the persona's provider sends one."""
        persona = STATE.persona
        obj = {"error": code}
        if description is not None:
            obj["error_description"] = description
        if persona == "github":
            obj["error_uri"] = "https://docs.github.com/apps/troubleshooting"
            return self.answer_object(200 if status is None else status, obj, headers=headers)
        if persona == "google":
            status = status or GOOGLE_STATUS.get(code, 400)
        elif persona == "microsoft":
            obj.update({"error_codes": [70000], "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()),
                        "trace_id": "00000000-0000-0000-0000-000000000000",
                        "correlation_id": "00000000-0000-0000-0000-000000000001"})
        status = status or (401 if code == "invalid_client" else 400)
        extra = list(headers)
        if status == 401:
            extra.append(("WWW-Authenticate", 'Basic realm="fixture"'))
        return self.answer_object(status, obj, encoding="json", headers=extra)

    def canned(self, answer, success=None):
        """Sends a scripted answer; `success` builds the persona's success answer for "issue"."""
        if "error" in answer:
            return self.error(answer["error"], answer.get("description"), answer.get("status"),
                              list((answer.get("headers") or {}).items()))
        if "issue" in answer and success is not None:
            return success(answer["issue"])
        headers = list((answer.get("headers") or {}).items())
        status = answer.get("status", 200)
        if "json" in answer:
            return self.send(status, json.dumps(answer["json"]), answer.get("content_type", "application/json"),
                             headers)
        if "form" in answer:
            return self.send(status, urllib.parse.urlencode(list(answer["form"].items())),
                             answer.get("content_type", "application/x-www-form-urlencoded"), headers)
        return self.send(status, answer.get("body", ""), answer.get("content_type", "text/plain"), headers)

    def read_form(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        return dict(urllib.parse.parse_qsl(raw, keep_blank_values=True))

    def client_auth(self, form):
        """(method, client_id, secret) as the client presented itself."""
        header = self.headers.get("Authorization") or ""
        if header.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            except Exception:
                return ("malformed", None, None)
            # RFC 6749 section 2.3.1: both parts are form-encoded.
            return ("client_secret_basic", urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password))
        if "client_secret" in form:
            return ("client_secret_post", form.get("client_id"), form["client_secret"])
        if "client_assertion" in form:
            return ("private_key_jwt", form.get("client_id"), None)
        return ("none", form.get("client_id"), None)

    def record(self, endpoint, form, auth=None):
        entry = {"endpoint": endpoint, "method": self.command, "path": self.path.split("?")[0],
                 "grant_type": form.get("grant_type"), "auth": auth,
                 "form": {k: ("(sent)" if k in SECRET_KEYS else v) for k, v in form.items()},
                 "accept": self.headers.get("Accept"), "time": time.time()}
        if "client_assertion" in form:
            entry["assertion_claims"] = assertion_claims(form["client_assertion"])
        with STATE.lock:
            STATE.log.append(entry)

    def check_client(self, form, endpoint):
        """None when the client may proceed; else the error answer was sent."""
        method, client_id, secret = self.client_auth(form)
        self.record(endpoint, form, method)
        s = STATE.settings
        native = NATIVE_ERRORS[STATE.persona]["bad_client"]
        if client_id != s["client_id"]:
            return self.error(native, "unknown client") or True
        if STATE.persona == "microsoft" and secret is not None:
            return self.error("invalid_client", "AADSTS700025: Client is public so neither 'client_assertion' "
                              "nor 'client_secret' should be presented.") or True
        if s["client_secret"] is None or endpoint == "device" and STATE.persona in ("github", "microsoft"):
            return None
        if method == "private_key_jwt" and method in s["auth_methods"]:
            return None  # the claims are logged; the signature is not checked
        # Without a list, OpenID Connect Discovery's default: client_secret_basic.
        if method not in (s["auth_methods"] or ["client_secret_basic"]):
            return self.error(native, "client authentication %s is not accepted" % method) or True
        if secret != s["client_secret"]:
            return self.error(native, "the client secret is wrong") or True
        return None

    # -- tokens -----------------------------------------------------------

    def id_token(self, facts, overrides=None):
        now = int(STATE.now())
        claims = {"iss": self.issuer(), "sub": facts["sub"], "aud": STATE.settings["client_id"], "iat": now,
                  "exp": now + 3600, "auth_time": facts["auth_time"], "email": facts["email"],
                  "email_verified": True}
        if facts.get("nonce"):
            claims["nonce"] = facts["nonce"]
        if STATE.persona == "microsoft":
            claims["tid"] = TENANT
        for k, v in (overrides or {}).items():
            if v is None:
                claims.pop(k, None)
            else:
                claims[k] = v
        return b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode()) + "." + b64url(
            json.dumps(claims).encode()) + ".fixture-signature"

    def token_answer(self, facts, with_refresh, old_refresh=None, overrides=None):
        """Issues tokens for `facts` and sends the persona's success answer."""
        s = STATE.settings
        persona = STATE.persona
        overrides = dict(overrides or {})
        with STATE.lock:
            access = STATE.next_id("at")
            STATE.access[access] = facts
            refresh = None
            if with_refresh:
                if old_refresh and not s["rotate"]:
                    refresh = None  # the old refresh token stays valid and is not repeated
                    STATE.used[old_refresh] = STATE.now()
                else:
                    refresh = STATE.next_id("rt")
                    STATE.refresh[refresh] = facts
                    STATE.used[refresh] = STATE.now()
                    if old_refresh:
                        STATE.refresh.pop(old_refresh, None)
        scope = facts["scope"]
        obj = {"access_token": access, "token_type": "bearer" if persona == "github" else "Bearer"}
        if persona == "github":
            obj["scope"] = ",".join(scope.split())
        else:
            obj["scope"] = scope
        if persona != "github" or s.get("github_app"):
            obj["expires_in"] = s["expires_in"]
        if refresh:
            obj["refresh_token"] = refresh
            if s.get("refresh_token_expires_in") is not None and (persona != "github" or s.get("github_app")):
                obj["refresh_token_expires_in"] = s["refresh_token_expires_in"]
        if persona == "microsoft":
            obj["ext_expires_in"] = s["expires_in"]
        claims = overrides.pop("id_token_claims", None)
        if s["openid"] and "openid" in scope.split():
            obj["id_token"] = self.id_token(facts, claims)
        encoding = overrides.pop("encoding", None)
        for k, v in overrides.items():
            if v is None:
                obj.pop(k, None)
            else:
                obj[k] = v
        return self.answer_object(200, obj, encoding=encoding)

    def may_refresh(self, facts):
        """Whether the persona issues a refresh token for this authorization."""
        persona = STATE.persona
        if persona == "github":
            return bool(STATE.settings.get("github_app"))
        if persona == "google":
            return facts.get("access_type") == "offline" and facts.get("prompt") == "consent"
        if persona == "microsoft":
            return "offline_access" in facts["scope"].split()
        return True

    def new_facts(self, scope, nonce=None, extra=None):
        facts = {"scope": scope, "sub": "user-1", "email": "ada@example.com", "auth_time": int(time.time()),
                 "nonce": nonce}
        facts.update(extra or {})
        return facts

    def token(self):
        form = self.read_form()
        if self.check_client(form, "token"):
            return
        grant_type = form.get("grant_type")
        with STATE.lock:
            answer = STATE.take("token", grant_type)
        native = NATIVE_ERRORS[STATE.persona]
        if grant_type == "authorization_code":
            with STATE.lock:
                facts = STATE.codes.pop(form.get("code"), None)
            if facts is not None and (facts["redirect_uri"] != form.get("redirect_uri")
                                      or not pkce_ok(facts["challenge"], form.get("code_verifier"))):
                facts = None
            if answer is not None:
                return self.canned(answer, lambda o: self.token_answer(
                    facts or self.new_facts("openid email"), True, overrides=o))
            if facts is None:
                return self.error(native["bad_code"], "The code passed is incorrect or expired.")
            return self.token_answer(facts, self.may_refresh(facts))
        if grant_type == "refresh_token":
            old = form.get("refresh_token")
            with STATE.lock:
                facts = STATE.refresh.get(old)
                limit = STATE.settings.get("refresh_inactivity")
                if facts is not None and limit and STATE.now() - STATE.used.get(old, STATE.now()) > limit:
                    STATE.refresh.pop(old, None)  # died of inactivity
                    facts = None
            if answer is not None:
                return self.canned(answer, lambda o: self.token_answer(
                    facts or self.new_facts("openid email"), True, old, overrides=o))
            if facts is None:
                return self.error(native["bad_refresh"], "The refresh token is invalid or was already used.")
            if form.get("scope"):
                facts = dict(facts, scope=form["scope"])
            return self.token_answer(facts, True, old)
        if grant_type == "urn:ietf:params:oauth:grant-type:device_code":
            with STATE.lock:
                facts = STATE.devices.get(form.get("device_code"))
            if answer is not None:
                return self.canned(answer, lambda o: self.token_answer(
                    facts or self.new_facts("openid email"), True, overrides=o))
            if facts is None:
                return self.error(native["bad_device"], "The device code is not known.")
            with STATE.lock:
                STATE.devices.pop(form.get("device_code"), None)
            return self.token_answer(facts, self.may_refresh(facts))
        return self.error("unsupported_grant_type")

    def device(self):
        form = self.read_form()
        if self.check_client(form, "device"):
            return
        with STATE.lock:
            answer = STATE.take("device")
        if answer is not None and "issue" not in answer:
            return self.canned(answer)
        s = STATE.settings
        scope = form.get("scope", "")
        facts = self.new_facts(scope, extra={"access_type": "offline", "prompt": "consent"})
        with STATE.lock:
            code = STATE.next_id("dc")
            STATE.devices[code] = facts
        obj = {"device_code": code, "user_code": "WDJB-MJHT", "expires_in": s["device_expires_in"],
               "interval": s["interval"]}
        verification = self.base + "/activate"
        if STATE.persona == "google":
            obj["verification_url"] = verification  # Google's older name
        else:
            obj["verification_uri"] = verification
        if STATE.persona == "microsoft":
            obj["message"] = "To sign in, use a web browser to open the page %s and enter the code %s." % (
                verification, obj["user_code"])
        for k, v in ((answer or {}).get("issue") or {}).items():
            if v is None:
                obj.pop(k, None)
            else:
                obj[k] = v
        encoding = obj.pop("encoding", None)
        return self.answer_object(200, obj, encoding=encoding)

    def pushed_request(self):
        """RFC 9126 section 2: the authorization request, authenticated like
        a token request, kept under a request_uri for one use."""
        form = self.read_form()
        if self.check_client(form, "par"):
            return
        with STATE.lock:
            answer = STATE.take("par")
        if answer is not None:
            return self.canned(answer)
        if "request_uri" in form:
            return self.error("invalid_request", "request_uri cannot be pushed")
        if not form.get("redirect_uri") or form.get("response_type") != "code":
            return self.error("invalid_request", "redirect_uri and response_type=code are required")
        form.pop("client_secret", None)
        form["client_id"] = STATE.settings["client_id"]
        lifetime = STATE.settings.get("par_expires_in") or 60
        with STATE.lock:
            uri = "urn:ietf:params:oauth:request_uri:" + STATE.next_id("par")
            STATE.pushed[uri] = (form, STATE.now() + lifetime)
        self.send(201, json.dumps({"request_uri": uri, "expires_in": lifetime}))

    # -- client registration (RFC 7591, RFC 7592) --------------------------

    def read_json(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"{}") if length else {}
        except ValueError:
            return None

    def register(self):
        """RFC 7591 section 3: registers the persona's client for the metadata sent."""
        body = self.read_json()
        self.record("register", {k: json.dumps(v) for k, v in (body or {}).items()})
        with STATE.lock:
            answer = STATE.take("register")
        if answer is not None:
            return self.canned(answer)
        if not isinstance(body, dict) or not body.get("redirect_uris"):
            return self.answer_object(400, {"error": "invalid_client_metadata"}, encoding="json")
        s = STATE.settings
        client_id = s["client_id"]
        with STATE.lock:
            token = s.get("registration_access_token") or STATE.next_id("rat")
            STATE.registrations[client_id] = token
        doc = dict(body, client_id=client_id, registration_access_token=token,
                   registration_client_uri="%s/register/%s" % (self.base, urllib.parse.quote(client_id)))
        if s["client_secret"] is not None:
            doc.update(client_secret=s["client_secret"], token_endpoint_auth_method="client_secret_basic")
        self.send(201, json.dumps(doc))

    def registration(self):
        """RFC 7592: GET reads, DELETE deletes, with the registration access token."""
        client_id = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path.rstrip("/").rsplit("/", 1)[-1])
        header = self.headers.get("Authorization") or ""
        token = header[7:] if header.startswith("Bearer ") else None
        self.record("register_" + self.command.lower(), {"client_id": client_id})
        if self.command == "DELETE":
            with STATE.lock:
                answer = STATE.take("register_delete")
            if answer is not None:
                return self.canned(answer)
        with STATE.lock:
            known = STATE.registrations.get(client_id)
            if known is None or token != known:
                known = None
            elif self.command == "DELETE":
                del STATE.registrations[client_id]
        if known is None:
            # RFC 7592 section 2: an unknown or deleted client's token gets 401.
            return self.send(401, "", headers=[("WWW-Authenticate", 'Bearer error="invalid_token"')])
        if self.command == "DELETE":
            return self.send(204)
        return self.send(200, json.dumps({"client_id": client_id}))

    def authorize(self):
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        self.record("authorize", {k: v for k, v in query.items() if k not in ("code_challenge",)})
        with STATE.lock:
            answer = STATE.take("authorize")
        s = STATE.settings
        expired = False
        if "request_uri" in query:
            with STATE.lock:
                pushed, expiry = STATE.pushed.pop(query["request_uri"], (None, 0))
            if pushed is None or query.get("client_id") != pushed["client_id"]:
                return self.send(400, "<html><body>unknown request_uri</body></html>", "text/html")
            expired = STATE.now() > expiry
            query = pushed
        redirect, state = query.get("redirect_uri"), query.get("state")
        if not redirect or query.get("client_id") != s["client_id"]:
            return self.send(400, "<html><body>unknown client or redirect</body></html>", "text/html")
        params = {"state": state}
        iss = answer.get("iss", self.issuer()) if answer is not None and "iss" in answer else (
            self.issuer() if s.get("iss_parameter") else None)
        if iss is not None:
            params["iss"] = iss
        if expired:
            params.update(error="invalid_request_uri", error_description="The request_uri has expired")
        elif s.get("par_required") and "request_uri" not in urllib.parse.urlsplit(self.path).query:
            params.update(error="invalid_request", error_description="Pushed authorization requests are required")
        elif answer is not None and answer.get("deny"):
            params.update(error=NATIVE_ERRORS[STATE.persona]["denied"], error_description="The user said no")
        else:
            facts = self.new_facts(query.get("scope", ""), query.get("nonce"),
                                   {"redirect_uri": redirect, "challenge": query.get("code_challenge"),
                                    "access_type": query.get("access_type"), "prompt": query.get("prompt")})
            with STATE.lock:
                code = STATE.next_id("code")
                STATE.codes[code] = facts
            params["code"] = code
        sep = "&" if "?" in redirect else "?"
        self.send(302, b"", headers=[("Location", redirect + sep + urllib.parse.urlencode(params))])

    def revoke(self):
        form = self.read_form()
        if self.check_client(form, "revoke"):
            return
        with STATE.lock:
            answer = STATE.take("revoke")
            if answer is None:
                STATE.refresh.pop(form.get("token"), None)
                STATE.access.pop(form.get("token"), None)
        if answer is not None:
            return self.canned(answer)
        self.send(200)

    def userinfo(self):
        self.record("userinfo", {})
        with STATE.lock:
            answer = STATE.take("userinfo")
        if answer is not None:
            return self.canned(answer)
        header = self.headers.get("Authorization") or ""
        token = header.split(" ", 1)[1] if " " in header else ""
        with STATE.lock:
            facts = STATE.access.get(token)
        if facts is None:
            return self.send(401, "", headers=[("WWW-Authenticate", 'Bearer error="invalid_token"')])
        if STATE.persona == "github":
            return self.send(200, json.dumps({"login": "octocat", "id": 1}))
        return self.send(200, json.dumps({"sub": facts["sub"], "email": facts["email"], "email_verified": True}))

    def discovery_document(self):
        if STATE.persona == "github":
            return self.send(404, "Not Found", "text/plain")
        failing = STATE.settings.get("discovery_status")
        if failing:
            return self.send(failing, "<html><body>unavailable</body></html>", "text/html")
        base = self.base
        prefix = base + ("/common/oauth2/v2.0" if STATE.persona == "microsoft" else "")
        doc = {"issuer": self.issuer() if STATE.persona != "microsoft" else base + "/{tenantid}/v2.0",
               "authorization_endpoint": prefix + "/authorize", "token_endpoint": prefix + "/token",
               "device_authorization_endpoint": prefix + ("/devicecode" if STATE.persona == "microsoft"
                                                          else "/device"),
               "revocation_endpoint": base + "/revoke", "userinfo_endpoint": base + "/userinfo",
               "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
               "token_endpoint_auth_methods_supported": STATE.settings["auth_methods"]}
        s = STATE.settings
        if s.get("par"):
            doc["pushed_authorization_request_endpoint"] = prefix + "/par"
            doc["require_pushed_authorization_requests"] = bool(s.get("par_required"))
        if s.get("registration"):
            doc["registration_endpoint"] = base + "/register"
        advertise = s.get("advertise_iss")
        if advertise if advertise is not None else s.get("iss_parameter"):
            doc["authorization_response_iss_parameter_supported"] = True
        with STATE.lock:
            doc.update(STATE.discovery)
        self.send(200, json.dumps({k: v for k, v in doc.items() if v is not None}))

    # -- control ----------------------------------------------------------

    def control(self, path):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}") if length else {}
        if path == "/__settings":
            with STATE.lock:
                STATE.settings.update(body)
            return self.send(200, "{}")
        if path == "/__script":
            with STATE.lock:
                for endpoint, answers in body.items():
                    if endpoint == "discovery":
                        STATE.discovery.update(answers)
                    else:
                        STATE.queues.setdefault(endpoint, []).extend(answers)
            return self.send(200, "{}")
        if path == "/__mint":
            scope = body.get("scope", "openid email")
            facts = self.new_facts(scope, extra={"access_type": "offline", "prompt": "consent"})
            return self.token_answer(facts, True, overrides={"encoding": "json"})
        if path == "/__registrations":
            with STATE.lock:
                return self.send(200, json.dumps(sorted(STATE.registrations)))
        if path == "/__log":
            with STATE.lock:
                return self.send(200, json.dumps(STATE.log))
        return self.send(404, "unknown control")

    def route(self):
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/__"):
            return self.control(path)
        if path.endswith("/.well-known/openid-configuration"):
            return self.discovery_document()
        last = path.rstrip("/").rsplit("/", 1)[-1]
        if last == "authorize" and self.command == "GET":
            return self.authorize()
        if last in ("token", "access_token") and self.command == "POST":
            return self.token()
        if path.endswith("/device/code") or last in ("device", "devicecode"):
            return self.device()
        if last == "par" and self.command == "POST":
            return self.pushed_request()
        if last == "register" and self.command == "POST":
            return self.register()
        if path.rstrip("/").rsplit("/", 2)[-2:-1] == ["register"] and self.command in ("GET", "DELETE"):
            return self.registration()
        if last == "revoke" and self.command == "POST":
            return self.revoke()
        if last in ("userinfo", "user"):
            return self.userinfo()
        return self.send(404, "<html><body>not here</body></html>", "text/html")

    do_GET = do_POST = do_DELETE = route


def browse(url):
    """Plays the person's browser: the fixture's authorize endpoint answers
    with a redirect at once, which goes to vault's loopback listener."""
    import urllib.error
    opener = no_redirect_opener()
    try:
        opener.open(url, timeout=10).read()
        return
    except urllib.error.HTTPError as e:
        location = e.headers.get("Location")
    if location:
        opener.open(location, timeout=10).read()


def main():
    global STATE
    if len(sys.argv) == 3 and sys.argv[1] == "browse":
        return browse(sys.argv[2])
    if len(sys.argv) == 4 and sys.argv[1] == "browse-after":
        time.sleep(float(sys.argv[2]))
        return browse(sys.argv[3])
    if len(sys.argv) != 2 or sys.argv[1] not in PERSONAS:
        raise SystemExit("usage: provider_fixture.py rfc|github|google|microsoft | browse URL")
    STATE = State(sys.argv[1])
    serve_http_until_stdin_closes(Handler)


if __name__ == "__main__":
    # Start with no blocked signals, whatever the launching thread had
    # blocked, so a plain SIGTERM stops us.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
