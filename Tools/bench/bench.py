#!/usr/bin/env python3
"""Whole-process timings of vault beside its peers, in one run.

Each command runs --runs times after a warm-up; the median wall time is
reported with its ratio to vault's. Everything lives in a temporary
directory that is removed at the end; no network is used.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def median_ms(cmd, env, runs, stdin=None):
    subprocess.run(cmd, env=env, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def peak_rss_mib(cmd, env, scratch):
    """The largest resident set of one run of cmd, in MiB, as GNU time reports
    it (a child forked from Python would inherit Python's own high-water mark)."""
    out = scratch + "/rss"
    subprocess.run(["/usr/bin/time", "-o", out, "-f", "%M"] + cmd, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    with open(out) as f:
        return int(f.read().split()[-1]) / 1024


def fill(vault, env, count, workers=4):
    """Imports count grants g0..g{count-1}, with a few processes at once."""
    def one(i):
        token = {"access_token": "ya29.bench-%06d" % i, "refresh_token": "1//bench-%06d" % i,
                 "expires_in": 3600, "scope": "openid email", "provider": "google",
                 "account": "user%d@example.com" % i}
        subprocess.run([vault, "import", "g%d" % i], env=env, input=json.dumps(token).encode(), check=True,
                       stderr=subprocess.DEVNULL)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(count)))


def sync_one_change(vault, env, url, password_file, runs):
    """Sets the store, uploads everything, then times syncs that each carry
    one changed grant. Returns (median ms, requests, bytes sent) of those."""
    subprocess.run([vault, "remote", "set", url, "--user", "vault", "--password-file", password_file], env=env,
                   check=True, stderr=subprocess.DEVNULL)
    subprocess.run([vault, "sync"], env=env, check=True, stderr=subprocess.DEVNULL)
    samples = []
    last = {}
    for i in range(runs):
        token = {"access_token": "ya29.changed-%d" % i, "refresh_token": "1//changed", "expires_in": 3600,
                 "provider": "google", "account": "user0@example.com"}
        subprocess.run([vault, "import", "g0", "--replace"], env=env, input=json.dumps(token).encode(), check=True,
                       stderr=subprocess.DEVNULL)
        start = time.perf_counter()
        out = subprocess.run([vault, "sync", "--json"], env=env, check=True, capture_output=True).stdout
        samples.append((time.perf_counter() - start) * 1000)
        last = json.loads(out)
    return statistics.median(samples), last["requests"], last["bytes_sent"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", required=True)
    ap.add_argument("--grants", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--big", type=int, default=10000, help="grants in the second vault for vault list (0: skip)")
    ap.add_argument("--no-sync", action="store_true", help="skip the sync measurements (they start Apache)")
    args = ap.parse_args()
    vault = os.path.abspath(args.vault)
    home = tempfile.mkdtemp(prefix="vault-bench-")
    try:
        env = {"HOME": home, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "VAULT_HOME": home + "/vault",
               "GNUPGHOME": home + "/gnupg", "PASSWORD_STORE_DIR": home + "/pass", "GH_CONFIG_DIR": home + "/gh"}
        subprocess.run([vault, "init", "--keyfile", home + "/key"], env=env, check=True, stderr=subprocess.DEVNULL)
        env["VAULT_KEYFILE"] = home + "/key"
        start = time.perf_counter()
        fill(vault, env, args.grants)
        import_ms = (time.perf_counter() - start) * 1000 / args.grants

        rows = []
        rows.append(("vault list (%d grants)" % args.grants, median_ms([vault, "list"], env, args.runs)))
        rows.append(("vault show g%d" % (args.grants // 2), median_ms([vault, "show", "g%d" % (args.grants // 2)], env, args.runs)))
        rows.append(("vault token g%d (fresh, key file)" % (args.grants // 2), median_ms([vault, "token", "g%d" % (args.grants // 2)], env, args.runs)))
        rows.append(("vault --version (process start)", median_ms([vault, "--version"], env, args.runs)))
        # Through the agent: started once with the key file, then asked
        # without any key source.
        runtime = home + "/run"
        os.makedirs(runtime, mode=0o700)
        agent_env = dict(env, XDG_RUNTIME_DIR=runtime)
        subprocess.run([vault, "agent"], env=agent_env, check=True, stderr=subprocess.DEVNULL)
        del agent_env["VAULT_KEYFILE"]
        middle = "g%d" % (args.grants // 2)
        agent_row = "vault token %s (fresh, agent)" % middle
        rows.append((agent_row, median_ms([vault, "token", middle], agent_env, args.runs)))
        rss_agent = peak_rss_mib([vault, "token", middle], agent_env, home)
        rss_keyfile = peak_rss_mib([vault, "token", middle], env, home)
        subprocess.run([vault, "lock"], env=agent_env, check=True, stderr=subprocess.DEVNULL)
        if args.big:
            big_env = dict(env, VAULT_HOME=home + "/big")
            subprocess.run([vault, "init", "--keyfile", home + "/big.key"], env=big_env, check=True,
                           stderr=subprocess.DEVNULL)
            big_env["VAULT_KEYFILE"] = home + "/big.key"
            fill(vault, big_env, args.big)
            rows.append(("vault list (%d grants)" % args.big, median_ms([vault, "list"], big_env, max(5, args.runs // 2))))
            rows.append(("vault token g%d (%d grants, key file)" % (args.big // 2, args.big),
                         median_ms([vault, "token", "g%d" % (args.big // 2)], big_env, args.runs)))
            rss_big = peak_rss_mib([vault, "token", "g%d" % (args.big // 2)], big_env, home)

        sync_rows = []
        if not args.no_sync:
            here = os.path.dirname(os.path.abspath(__file__))
            with open(home + "/store-password", "w") as f:
                f.write("bench\n")
            dav = subprocess.Popen([sys.executable, here + "/../testservers/webdav.py", home + "/dav",
                                    home + "/store-password"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            try:
                url = json.loads(dav.stdout.readline())["url"]
                small_env = dict(env, VAULT_HOME=home + "/small")
                subprocess.run([vault, "init", "--keyfile", home + "/small.key"], env=small_env, check=True,
                               stderr=subprocess.DEVNULL)
                small_env["VAULT_KEYFILE"] = home + "/small.key"
                fill(vault, small_env, 100)
                vaults = [(100, small_env, url + "s100/"), (args.grants, env, url + "s%d/" % args.grants)]
                if args.big:
                    vaults.append((args.big, big_env, url + "s%d/" % args.big))
                for count, venv, store in vaults:
                    os.makedirs(home + "/dav/www/store/" + store.rstrip("/").split("/")[-1])
                    subprocess.run(["chown", "-R", "www-data:www-data", home + "/dav/www/store"], check=True)
                    ms, requests, sent = sync_one_change(vault, venv, store, home + "/store-password",
                                                         max(5, args.runs // 4))
                    sync_rows.append((count, ms, requests, sent))
            finally:
                dav.stdin.close()
                dav.wait()

        peers = []
        # age: decrypt one small secret with an identity file.
        if shutil.which("age"):
            subprocess.run(["age-keygen", "-o", home + "/age.key"], env=env, check=True, stderr=subprocess.DEVNULL)
            recipient = subprocess.run(["age-keygen", "-y", home + "/age.key"], env=env, check=True,
                                       capture_output=True).stdout.decode().strip()
            subprocess.run(["age", "-r", recipient, "-o", home + "/secret.age"], env=env, input=b"ya29.secret",
                           check=True)
            peers.append(("age -d (one secret)", median_ms(["age", "-d", "-i", home + "/age.key", home + "/secret.age"], env, args.runs)))
        # pass: gpg with an unprotected key and a warm agent.
        if shutil.which("pass") and shutil.which("gpg"):
            os.makedirs(env["GNUPGHOME"], mode=0o700)
            subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "bench@example.com",
                            "default", "default", "never"], env=env, check=True, capture_output=True)
            subprocess.run(["pass", "init", "bench@example.com"], env=env, check=True, capture_output=True)
            for i in range(args.grants):
                subprocess.run(["pass", "insert", "-m", "g%d" % i], env=env, input=b"ya29.bench\n", check=True,
                               capture_output=True)
            peers.append(("pass show (one secret)", median_ms(["pass", "show", "g%d" % (args.grants // 2)], env, args.runs)))
            peers.append(("pass ls (%d entries)" % args.grants, median_ms(["pass", "ls"], env, args.runs)))
            subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, capture_output=True)
        # gh: a stored token, no network.
        if shutil.which("gh"):
            os.makedirs(env["GH_CONFIG_DIR"], mode=0o700)
            with open(env["GH_CONFIG_DIR"] + "/hosts.yml", "w") as f:
                f.write("github.com:\n    oauth_token: gho_bench\n    user: bench\n    git_protocol: https\n")
            peers.append(("gh auth token", median_ms(["gh", "auth", "token"], env, args.runs)))

        base = dict(rows)
        print("vault import: %.1f ms of wall time per grant, four importers at once" % import_ms)
        print("%-44s %10s" % ("command", "median ms"))
        for name, ms in rows + peers:
            print("%-44s %10.2f" % (name, ms))
        show = base["vault show g%d" % (args.grants // 2)]
        token = base["vault token g%d (fresh, key file)" % (args.grants // 2)]
        listing = base["vault list (%d grants)" % args.grants]
        print("%-44s %10.1f" % ("peak RSS of vault token, agent (MiB)", rss_agent))
        print("%-44s %10.1f" % ("peak RSS of vault token, key file (MiB)", rss_keyfile))
        if args.big:
            print("%-44s %10.1f" % ("peak RSS of vault token, %d grants (MiB)" % args.big, rss_big))
        for count, ms, requests, sent in sync_rows:
            print("vault sync of one changed grant, %5d grants: %8.1f ms, %d requests, %d bytes uploaded"
                  % (count, ms, requests, sent))
        print()
        agent_token = base[agent_row]
        for peer, ms in peers:
            print("%-44s vault token via agent / this = %.2f" % (peer, agent_token / ms))
        for name, ms in peers:
            print("%-44s vault token (key file) / this = %.2f, vault show / this = %.2f, vault list / this = %.2f"
                  % (name, token / ms, show / ms, listing / ms))
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env={"GNUPGHOME": home + "/gnupg", "PATH": "/usr/bin:/bin"},
                       capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
