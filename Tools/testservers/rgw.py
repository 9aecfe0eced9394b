#!/usr/bin/env python3
"""An S3-compatible store on 127.0.0.1: Ceph's RADOS Gateway, for tests.

  rgw.py DIR

Starts a single-node Ceph cluster entirely inside DIR (created fresh, with a
new fsid): one ceph-mon, one ceph-osd on the RAM-only memstore backend and
one radosgw, on free loopback ports, with a private ceph.conf and keyring
under DIR and no manager daemon. Creates an S3 user whose keys radosgw-admin
generates, writes them to DIR/credentials (mode 0600, in the AWS shared
credentials file format, profile "default"), then prints
{"endpoint": "http://127.0.0.1:PORT", "region": "default", "credentials": PATH}
and serves until stdin closes; then stops the daemons by their PIDs. If a
daemon fails to start, prints the end of its log to stderr and exits 1
without printing anything on stdout.
Install with `apt-get install radosgw ceph-mon ceph-osd ceph-common`.
"""
import base64
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import urllib.request
import uuid

from common import free_port, wait_for_port

# The zonegroup radosgw creates on first start ("default") has the api_name
# "default", the region SigV4 signatures should name (RGW 16 accepts any).
REGION = "default"


class StartFailed(Exception):
    """A daemon or command did not start; the message names its log."""


def cephx_key():
    """A new cephx secret as a keyring holds it: type 1 (AES), the time of
    creation, 16 random bytes."""
    now = time.time()
    raw = struct.pack("<hIIh", 1, int(now), int(now % 1 * 1e9), 16) + os.urandom(16)
    return base64.b64encode(raw).decode()


def write_keyring(path):
    """The keyring of every entity (mon., client.admin, osd.0, the gateway)
    with their capabilities; the monitor imports it at mkfs."""
    entities = [
        ("mon.", {"mon": "allow *"}),
        ("client.admin", {"mon": "allow *", "osd": "allow *", "mgr": "allow *"}),
        ("osd.0", {"mon": "allow profile osd", "osd": "allow *", "mgr": "allow profile osd"}),
        ("client.rgw", {"mon": "allow rw", "osd": "allow rwx"}),
    ]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        for name, caps in entities:
            f.write("[%s]\n\tkey = %s\n" % (name, cephx_key()))
            for service, cap in caps.items():
                f.write('\tcaps %s = "%s"\n' % (service, cap))


def write_conf(d, fsid, mon_port, rgw_port):
    """ceph.conf: every path under d, loopback only, one replica, and a
    monitor that proposes quickly so the cluster is ready in seconds."""
    conf = """[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{mon_port}
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind msgr2 = true
keyring = {d}/keyring
run dir = {d}/run
crash dir = {d}/crash
log file = {d}/logs/$name.log
pid file = {d}/run/$name.pid
mon cluster log file = {d}/logs/cluster.log
log to stderr = false
err to stderr = true
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false

[mon]
mon data = {d}/mon
paxos propose interval = 0.05
paxos min wait = 0.01
mon osd reporter subtree level = osd

[osd]
osd data = {d}/osd
osd objectstore = memstore
memstore device bytes = 1073741824
osd crush update on start = true
osd beacon report interval = 5

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:{rgw_port}
rgw data = {d}/rgw
rgw thread pool size = 16
rgw enable usage log = false
rgw enable ops log = false
rgw dns name = 127.0.0.1
""".format(d=d, fsid=fsid, mon_port=mon_port, rgw_port=rgw_port)
    with open(d + "/ceph.conf", "w") as f:
        f.write(conf)


def log_tail(path, lines=30):
    """The last lines of a log, or a note that there is none."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log at %s)\n" % path


def run(d, args, log):
    """Runs a Ceph command with d's configuration; its output, or
    StartFailed with the end of its output and of log."""
    p = subprocess.run(args[:1] + ["-c", d + "/ceph.conf"] + args[1:], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise StartFailed("%s exited %d\n%s%s%s" % (" ".join(args[:3]), p.returncode, p.stdout[-2000:],
                                                    p.stderr[-2000:], log_tail(log)))
    return p.stdout


def die_with_parent():
    """In a child before exec: SIGKILL when this script dies, even by
    SIGKILL (prctl PR_SET_PDEATHSIG)."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def start(d, args, log, procs):
    """Starts a daemon in the foreground as a child that ends with us, and
    adds it with its log to procs."""
    with open(d + "/logs/" + os.path.basename(args[0]) + ".out", "ab") as out:
        proc = subprocess.Popen(args[:1] + ["-f", "-c", d + "/ceph.conf"] + args[1:], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=out, preexec_fn=die_with_parent)
    procs.append((proc, log))


def check_alive(procs):
    """StartFailed with the end of its log if a daemon has exited."""
    for proc, log in procs:
        if proc.poll() is not None:
            raise StartFailed("%s exited %d\n%s" % (proc.args[0], proc.returncode, log_tail(log)))


def wait_listening(procs, port, seconds=30):
    """Waits until the last daemon started listens on port."""
    if not wait_for_port(port, alive=lambda: all(p.poll() is None for p, _ in procs), seconds=seconds):
        check_alive(procs)
        raise StartFailed("%s does not listen after %ds\n%s" % (procs[-1][0].args[0], seconds,
                                                                log_tail(procs[-1][1])))


def start_mon(d, fsid, port, procs):
    """A monitor "a" made from a monmap of itself alone."""
    subprocess.run(["monmaptool", "--create", "--fsid", fsid, "--addv", "a", "[v2:127.0.0.1:%d]" % port,
                    d + "/monmap"], check=True, stdout=subprocess.DEVNULL)
    log = d + "/logs/mon.a.log"
    run(d, ["ceph-mon", "--mkfs", "-i", "a", "--monmap", d + "/monmap", "--keyring", d + "/keyring"], log)
    start(d, ["ceph-mon", "-i", "a"], log, procs)
    wait_listening(procs, port)


def start_osd(d, procs):
    """osd.0 on memstore: registered with the monitor, made, and started."""
    osd_uuid = str(uuid.uuid4())
    log = d + "/logs/osd.0.log"
    run(d, ["ceph", "osd", "new", osd_uuid, "0"], log)
    run(d, ["ceph-osd", "-i", "0", "--mkfs", "--osd-uuid", osd_uuid], log)
    start(d, ["ceph-osd", "-i", "0"], log, procs)


def wait_s3(procs, port, seconds=60):
    """Waits until radosgw (the last daemon) answers an anonymous
    ListBuckets over HTTP, which it does once its pools are ready."""
    wait_listening(procs, port, seconds)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with opener.open("http://127.0.0.1:%d/" % port, timeout=2):
                return
        except OSError:
            check_alive(procs)
            time.sleep(0.05)
    raise StartFailed("radosgw does not answer after %ds\n%s" % (seconds, log_tail(procs[-1][1])))


def stop_child(proc):
    """SIGTERM, a moment's grace, then SIGKILL, as common.stop_pid does, but
    reaping the child as soon as it exits (stop_pid would wait out the grace
    on the zombie)."""
    try:
        proc.terminate()
        proc.wait(timeout=2.5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def write_credentials(d):
    """Creates the S3 user "vault" (radosgw-admin makes its keys) and writes
    them to d/credentials, mode 0600; returns that path."""
    out = run(d, ["radosgw-admin", "user", "create", "--uid", "vault", "--display-name", "vault"],
              d + "/logs/client.admin.log")
    key = json.loads(out)["keys"][0]
    path = d + "/credentials"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                % (key["access_key"], key["secret_key"]))
    return path


def start_cluster(d, procs):
    """mon, osd and radosgw in d; returns the gateway's port."""
    fsid = str(uuid.uuid4())
    mon_port, rgw_port = free_port(), free_port()
    write_keyring(d + "/keyring")
    write_conf(d, fsid, mon_port, rgw_port)
    start_mon(d, fsid, mon_port, procs)
    start_osd(d, procs)
    start(d, ["radosgw", "-n", "client.rgw"], d + "/logs/client.rgw.log", procs)
    wait_s3(procs, rgw_port)
    return rgw_port


def main():
    d = os.path.abspath(sys.argv[1])
    if os.path.exists(d):
        shutil.rmtree(d)
    for sub in ("mon", "osd", "rgw", "run", "logs", "crash"):
        os.makedirs(d + "/" + sub)
    procs = []
    try:
        try:
            port = start_cluster(d, procs)
            credentials = write_credentials(d)
        except (StartFailed, OSError, subprocess.SubprocessError, ValueError, LookupError) as e:
            sys.stderr.write("rgw.py: %s\n" % e)
            sys.exit(1)
        print(json.dumps({"endpoint": "http://127.0.0.1:%d" % port, "region": REGION,
                          "credentials": credentials}), flush=True)
        sys.stdin.read()
    finally:
        # The gateway first, the monitor last, each by its PID.
        for proc, _ in reversed(procs):
            stop_child(proc)


if __name__ == "__main__":
    # Start (and start children) with no blocked signals, whatever the
    # launching thread had blocked, so a plain SIGTERM stops them.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    main()
