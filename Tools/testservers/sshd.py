#!/usr/bin/env python3
"""A private OpenSSH server on 127.0.0.1 for the agent-forwarding tests.

    sshd.py serve DIR

Makes a host key and a user key in DIR, authorizes the user key for the
current user, and runs `sshd -D` on a free loopback port with its own
config: public-key login only, Unix-socket forwarding allowed, and
StreamLocalBindUnlink so `ssh -R REMOTE_SOCKET:LOCAL_SOCKET` replaces a
socket a dropped session left. Prints one JSON line (port, user, the
client's key, known_hosts and a ready-made ssh config file), then serves
until stdin closes, and stops sshd by its PID.
"""
import getpass
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import free_port, wait_for_port  # noqa: E402


def keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True,
                   stdin=subprocess.DEVNULL)


def main():
    d = os.path.abspath(sys.argv[2])
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o700)
    keygen(d + "/host_key")
    keygen(d + "/user_key")
    with open(d + "/user_key.pub") as src, open(d + "/authorized_keys", "w") as dst:
        dst.write(src.read())
    os.chmod(d + "/authorized_keys", 0o600)
    port = free_port()
    with open(d + "/host_key.pub") as f:
        host_key = " ".join(f.read().split()[:2])
    with open(d + "/known_hosts", "w") as f:
        f.write("[127.0.0.1]:%d %s\n" % (port, host_key))
    with open(d + "/sshd_config", "w") as f:
        f.write("""Port {port}
ListenAddress 127.0.0.1
HostKey {d}/host_key
PidFile {d}/sshd.pid
AuthorizedKeysFile {d}/authorized_keys
StrictModes no
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowStreamLocalForwarding yes
StreamLocalBindUnlink yes
StreamLocalBindMask 0177
X11Forwarding no
PrintMotd no
LogLevel VERBOSE
""".format(port=port, d=d))
    user = getpass.getuser()
    with open(d + "/ssh_config", "w") as f:
        f.write("""Host test-server
    HostName 127.0.0.1
    Port {port}
    User {user}
    IdentityFile {d}/user_key
    IdentitiesOnly yes
    UserKnownHostsFile {d}/known_hosts
    StrictHostKeyChecking yes
    BatchMode yes
    ExitOnForwardFailure yes
    LogLevel ERROR
""".format(port=port, user=user, d=d))
    # sshd insists on its privilege separation directory.
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = open(d + "/sshd.log", "wb")
    server = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", d + "/sshd_config"],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    if not wait_for_port(port, alive=lambda: server.poll() is None, seconds=10):
        sys.stderr.write("sshd did not start; see %s/sshd.log\n" % d)
        sys.exit(1)
    print(json.dumps({"port": port, "user": user, "config": d + "/ssh_config", "host": "test-server"}),
          flush=True)
    try:
        sys.stdin.read()
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
