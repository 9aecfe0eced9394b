#!/usr/bin/env python3
"""django-oauth-toolkit on 127.0.0.1: a real OAuth 2.0 server for the
client credentials grant with a client secret (RFC 6749 section 4.4).

  django_oauth.py DIR [EXPIRES_IN]

Keeps its SQLite database in DIR, prints JSON settings and serves until
stdin closes:
  {"port", "token_endpoint", "revocation_endpoint", "resource",
   "client_id", "client_secret", "other_client_id", "other_client_secret"}
  POST /o/token/         the token endpoint (client_secret_basic or _post)
  POST /o/revoke_token/  RFC 7009 revocation (client authentication)
  GET  /api/hello        200 for a live access token with scope "read", else 401/403
  GET  /__log            the token requests seen: grant_type, scope and the
                         client authentication used (never a secret)
Access tokens live EXPIRES_IN seconds (default 3600). Install with
`apt-get install python3-django-oauth-toolkit`.
"""
import json
import os
import secrets
import sys
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from common import free_port

LOG = []
LOCK = threading.Lock()


def configure(d, expires_in):
    from django.conf import settings
    settings.configure(
        DEBUG=False, SECRET_KEY=secrets.token_urlsafe(32), ALLOWED_HOSTS=["127.0.0.1"], ROOT_URLCONF=__name__,
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": d + "/db.sqlite3"}},
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "oauth2_provider"],
        MIDDLEWARE=[], USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        OAUTH2_PROVIDER={"ACCESS_TOKEN_EXPIRE_SECONDS": expires_in, "SCOPES": {"read": "read", "write": "write"},
                         "DEFAULT_SCOPES": ["read"]},
        LOGGING_CONFIG=None)
    import django
    django.setup()


urlpatterns = []


def routes():
    from django.http import JsonResponse
    from django.urls import path
    from oauth2_provider.views import ProtectedResourceView, RevokeTokenView, TokenView

    class Hello(ProtectedResourceView):
        def get(self, request):
            return JsonResponse({"client": request.resource_owner and request.resource_owner.username or None,
                                 "ok": True})

    def log(request):
        with LOCK:
            return JsonResponse(LOG, safe=False)

    urlpatterns.extend([
        path("o/token/", TokenView.as_view()), path("o/revoke_token/", RevokeTokenView.as_view()),
        path("api/hello", Hello.as_view()), path("__log", log),
    ])


class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def main():
    d = os.path.abspath(sys.argv[1])
    os.makedirs(d, mode=0o700, exist_ok=True)
    configure(d, int(sys.argv[2]) if len(sys.argv) > 2 else 3600)
    from django.core.management import call_command
    call_command("migrate", verbosity=0, interactive=False)
    from django.contrib.auth.models import User
    from oauth2_provider.models import Application
    owner = User.objects.create(username="ci-owner")
    clients = {}
    for name in ("vault-machine", "other-machine"):
        secret = secrets.token_urlsafe(24)
        Application.objects.create(client_id=name, client_secret=secret, user=owner, name=name,
                                   client_type=Application.CLIENT_CONFIDENTIAL,
                                   authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS)
        clients[name] = secret
    routes()
    from django.core.wsgi import get_wsgi_application
    from urllib.parse import parse_qsl
    django_app = get_wsgi_application()

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/o/token/":
            n = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(n)
            form = dict(parse_qsl(body.decode()))
            auth = "basic" if environ.get("HTTP_AUTHORIZATION", "").startswith("Basic ") else \
                "post" if "client_secret" in form else "none"
            with LOCK:
                LOG.append({"grant_type": form.get("grant_type"), "scope": form.get("scope"), "client_auth": auth})
            import io
            environ["wsgi.input"] = io.BytesIO(body)
        return django_app(environ, start_response)

    port = free_port()
    httpd = make_server("127.0.0.1", port, app, server_class=Server, handler_class=Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % port
    print(json.dumps({"port": port, "token_endpoint": base + "/o/token/",
                      "revocation_endpoint": base + "/o/revoke_token/", "resource": base + "/api/hello",
                      "client_id": "vault-machine", "client_secret": clients["vault-machine"],
                      "other_client_id": "other-machine", "other_client_secret": clients["other-machine"]}),
          flush=True)
    sys.stdin.read()
    httpd.shutdown()


if __name__ == "__main__":
    main()
