#!/usr/bin/env python3
"""A scripted browser for `vault add` tests, used as $BROWSER.

  browser.py MODE GLEWLWYD_DIR URL

Modes:
  approve      log in and consent at the provider, deliver its redirect
  approve-save the same, and keep the redirect in GLEWLWYD_DIR/last-redirect
  replay       deliver the code kept by approve-save with this request's state
  deny         deliver error=access_denied with this request's state
  wrong-state  approve at the provider, deliver the redirect with another state
  fake-code    deliver code=fake-code with this request's state (no provider)
  wrong-iss    approve at the provider, deliver the redirect with another iss
  nothing      do nothing (the person never comes back)
  oauth1-allow approve an OAuth 1.0a request at oauth1_server.py and deliver
               its redirect (GLEWLWYD_DIR is unused: pass -)
  oauth1-deny  deny it there, and deliver the redirect

URL may be vault's loopback launch address, which redirects to the
authorization URL.
"""
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def deliver(location):
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open(location, timeout=10).read()


def with_query(url, **params):
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def oauth1(decision, url):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)
    try:
        opener.open(url + "&decision=" + decision, timeout=10)
        return
    except urllib.error.HTTPError as e:
        location = e.headers.get("Location")
    if location:
        deliver(location)


def resolve(url):
    """Follows vault's loopback launch address to the authorization URL."""
    if not (url.startswith("http://127.0.0.1:") and "/start/" in url):
        return url
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)
    try:
        opener.open(url, timeout=10)
    except urllib.error.HTTPError as e:
        if e.code in (301, 302, 303, 307) and e.headers.get("Location"):
            return e.headers["Location"]
        raise
    raise SystemExit("the launch address did not redirect")


def main():
    mode, gdir, url = sys.argv[1], sys.argv[2], resolve(sys.argv[3])
    if mode.startswith("oauth1-"):
        return oauth1("allow" if mode == "oauth1-allow" else "deny", url)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    # A pushed request (RFC 9126) carries only client_id and request_uri.
    redirect, state = query.get("redirect_uri"), query.get("state")
    if mode == "nothing":
        return
    if mode in ("approve", "approve-save", "wrong-state", "wrong-iss"):
        location = subprocess.run([sys.executable, HERE + "/glewlwyd.py", "approve", gdir, url, "--print-only"],
                                  check=True, capture_output=True, text=True).stdout.strip()
        if mode == "approve-save":
            with open(gdir + "/last-redirect", "w") as f:
                f.write(location)
        if mode == "wrong-state":
            code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))["code"]
            location = with_query(redirect, code=code, state=state[::-1])
        if mode == "wrong-iss":
            answer = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
            answer["iss"] = "https://attacker.example"
            location = with_query(location, **answer)
        deliver(location)
    elif mode == "replay":
        old = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(open(gdir + "/last-redirect").read()).query))
        deliver(with_query(redirect, code=old["code"], state=state))
    elif mode == "deny":
        deliver(with_query(redirect, error="access_denied", error_description="The user denied access", state=state))
    elif mode == "fake-code":
        deliver(with_query(redirect, code="fake-code", state=state))
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
