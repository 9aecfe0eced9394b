#!/usr/bin/env python3
"""A private Dovecot (IMAP and SMTP submission) on 127.0.0.1 that accepts
only XOAUTH2 and OAUTHBEARER, checking each token at the OpenID Connect
provider's introspection endpoint.

  dovecot.py serve DIR GLEWLWYD_SETTINGS_JSON

Prints {"imap": PORT, "submission": PORT}; Dovecot runs in the foreground
as this script's child and is stopped by its PID when stdin closes. Install with `apt-get install dovecot-imapd dovecot-submissiond`.
"""
import json
import os
import pwd
import signal
import subprocess
import sys

from common import free_port, wait_for_port



def main():
    d = os.path.abspath(sys.argv[2])
    g = json.load(open(sys.argv[3]))
    for sub in ("run", "state", "mail"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    # Mail is kept by Dovecot's own unprivileged account.
    owner = pwd.getpwnam("dovecot")
    os.chown(d + "/mail", owner.pw_uid, owner.pw_gid)
    os.chmod(d, 0o755)
    imap, submission, relay = free_port(), free_port(), free_port()
    introspection = "http://%s:%s@127.0.0.1:%d/api/oidc/introspect" % (
        g["confidential_client"], g["client_secret"], g["port"] if "port" in g else int(g["base"].rsplit(":", 1)[1]))
    with open(d + "/oauth2.conf.ext", "w") as f:
        f.write("introspection_mode = post\nintrospection_url = %s\nusername_attribute = username\n"
                "active_attribute = active\nactive_value = true\n" % introspection)
    os.chmod(d + "/oauth2.conf.ext", 0o600)
    with open(d + "/dovecot.conf", "w") as f:
        f.write("""
base_dir = {d}/run
state_dir = {d}/state
log_path = {d}/dovecot.log
protocols = imap submission
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = xoauth2 oauthbearer
auth_failure_delay = 0
mail_location = maildir:{d}/mail/%u
first_valid_uid = {uid}
passdb {{
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = {d}/oauth2.conf.ext
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={d}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service submission-login {{
  inet_listener submission {{
    address = 127.0.0.1
    port = {submission}
  }}
}}
submission_relay_host = 127.0.0.1
submission_relay_port = {relay}
service anvil {{
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
""".format(d=d, imap=imap, submission=submission, relay=relay, uid=owner.pw_uid, gid=owner.pw_gid))
    conf = d + "/dovecot.conf"
    # In the foreground, as our child: stopped by the PID we started.
    master = subprocess.Popen(["dovecot", "-F", "-c", conf], stdin=subprocess.DEVNULL, start_new_session=True)
    wait_for_port(imap, alive=lambda: master.poll() is None)
    print(json.dumps({"imap": imap, "submission": submission}), flush=True)
    try:
        sys.stdin.read()
    finally:
        master.terminate()
        try:
            master.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(master.pid, signal.SIGKILL)


if __name__ == "__main__":
    # Start (and start children) with no blocked signals, whatever the
    # launching thread had blocked, so a plain SIGTERM stops them.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
