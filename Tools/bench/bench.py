#!/usr/bin/env python3
"""Whole-process timings of vault beside its peers, in one run.

Sections (all by default; --only picks some, comma-separated):
  basic     vault list, show, token (key file and agent), --version at --grants
            grants, peak memory, and age, pass and gh beside them
  agent     vault token through the agent and with a key file, vault help
            token, age -d, vault --version and /bin/true, taking turns in
            each iteration; the medians of the per-iteration ratios against
            vault --version and age -d. With --tripwire R, exits 1 when
            token (agent) or help token passes R times vault --version:
            the check Tools/test runs so that a start-up regression never
            lands unseen
  big       vault list and token at --big grants
  sync      requests, bytes and time of a sync carrying one changed grant, at
            100, --grants and --big grants, against a private Apache WebDAV store
            and, where radosgw is installed, a private Ceph RGW (S3) store beside
            it: the time as a ratio to WebDAV's
  stall     a fresh vault token (and a vault import) while another grant's token
            endpoint accepts the connection and never answers, through the
            agent and with a key file; each stalled run is paired with a run on
            the idle vault, and the figures are ratios to the idle runs
  kubectl   kubectl get pods with vault kube-credential as its exec plugin
            (through the agent) against kubectl with the same token written
            in its kubeconfig, in turns, against a loopback API server
            (Tools/testservers/kube_api.py serve-any); skipped without kubectl
  parallel  --parallel expired grants, one vault token each, started at once
            against a token endpoint that answers after --delay seconds, as a
            ratio to one such refresh alone

Medians are of --runs runs after a warm-up; ratios are of figures measured in
the same run. Everything lives in a temporary directory that is removed at the
end; servers listen on 127.0.0.1 only and are stopped by PID. Secrets go to
vault through stdin and VAULT_KEYFILE, never on a command line.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SERVERS = os.path.join(HERE, "..", "testservers")
# In this order: agent shares basic's vault before sync gives it a store.
SECTIONS = ["basic", "agent", "big", "sync", "stall", "parallel", "kubectl"]
QUIET = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
# Failures seen while timing, by message, reported after each section.
ERRORS = {}
# The bench's own requests to its loopback servers ignore proxy settings.
LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def timed(cmd, env, stdin=None, timeout=None, keep_errors=True):
    """One run of cmd: (wall milliseconds, exit status; None when it was
    killed after timeout seconds). The first message of each kind of failure
    is kept for the report (vault's messages carry no secret)."""
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, env=env, input=stdin, timeout=timeout, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE if keep_errors else subprocess.DEVNULL)
        status = done.returncode
    except subprocess.TimeoutExpired:
        done, status = None, None
    ms = (time.perf_counter() - start) * 1000
    if status != 0 and keep_errors:
        message = done.stderr.decode("utf-8", "replace").strip() if done else "killed after %g s" % timeout
        ERRORS.setdefault("%s: %s" % (" ".join(os.path.basename(c) for c in cmd[:2]), message), status)
    return ms, status


def samples_ms(cmd, env, runs, stdin=None):
    """Wall times of runs runs of cmd after one warm-up; each must succeed."""
    subprocess.run(cmd, env=env, input=stdin, check=True, **QUIET)
    out = []
    for _ in range(runs):
        ms, status = timed(cmd, env, stdin, keep_errors=False)
        if status != 0:
            raise SystemExit("bench: %s exited %s" % (" ".join(cmd[1:]), status))
        out.append(ms)
    return out


def median_ms(cmd, env, runs, stdin=None):
    return statistics.median(samples_ms(cmd, env, runs, stdin))


def peak_rss_mib(cmd, env, scratch):
    """The largest resident set of one run of cmd, in MiB, as GNU time reports
    it (a child forked from Python would inherit Python's own high-water mark)."""
    out = scratch + "/rss"
    subprocess.run(["/usr/bin/time", "-o", out, "-f", "%M"] + cmd, env=env, check=True, **QUIET)
    with open(out) as f:
        return int(f.read().split()[-1]) / 1024


def load():
    return "load %.2f %.2f %.2f" % os.getloadavg()


def grant_json(index, expires_in=3600, endpoint=None, prefix="bench"):
    """A token response as `vault import` reads it; with endpoint, the grant
    refreshes there (a loopback token endpoint of the bench's own)."""
    doc = {"access_token": "ya29.%s-%06d" % (prefix, index), "refresh_token": "1//%s-%06d" % (prefix, index),
           "expires_at": int(time.time()) + expires_in, "scope": "openid email", "provider": "google",
           "account": "user%d@example.com" % index}
    if endpoint:
        doc["provider"] = "bench"
        doc["provider_config"] = {"token_endpoint": endpoint, "client_id": "bench-client"}
    return json.dumps(doc).encode()


class TokenServer:
    """Tools/testservers/slow_token_endpoint.py, started and stopped by this bench."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, os.path.join(SERVERS, "slow_token_endpoint.py")],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.base = "http://127.0.0.1:%d" % int(self.process.stdout.readline())

    def counts(self):
        with LOCAL.open(self.base + "/__counts", timeout=5) as r:
            return json.load(r)

    def reset_peak(self):
        LOCAL.open(urllib.request.Request(self.base + "/__reset", data=b""), timeout=5).read()

    def release(self):
        LOCAL.open(urllib.request.Request(self.base + "/__release", data=b""), timeout=5).read()

    def stop(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Agent:
    """`vault agent --foreground` for one vault, unlocked with its key file,
    owned by this bench (stopped by its PID). client_env reaches the vault
    only through it."""

    def __init__(self, vault, env, runtime):
        os.makedirs(runtime, mode=0o700, exist_ok=True)
        self.vault = vault
        self.env = dict(env, XDG_RUNTIME_DIR=runtime)
        self.env.pop("VAULT_AGENT", None)
        self.process = subprocess.Popen([vault, "agent", "--foreground"], env=self.env, stdin=subprocess.DEVNULL,
                                        **QUIET)
        self.client_env = dict(self.env)
        del self.client_env["VAULT_KEYFILE"]
        for _ in range(200):
            if subprocess.run([vault, "agent", "--status"], env=self.client_env, **QUIET).returncode == 0:
                self.settle()
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise SystemExit("bench: the agent did not start")

    def settle(self, quiet=0.5, limit=60):
        """Waits until the agent's start-up work (its first keep-alive pass
        reads every grant) is over: its CPU time stays the same for `quiet`
        seconds."""
        def cpu():
            fields = open("/proc/%d/stat" % self.process.pid).read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        deadline = time.monotonic() + limit
        last = -1
        while time.monotonic() < deadline:
            now = cpu()
            if now == last:
                return
            last = now
            time.sleep(quiet)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Bench:
    def __init__(self, args, home):
        self.args = args
        self.home = home
        self.vault = os.path.abspath(args.vault)
        self.env = {"HOME": home, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "VAULT_HOME": home + "/vault",
                    "GNUPGHOME": home + "/gnupg", "PASSWORD_STORE_DIR": home + "/pass", "GH_CONFIG_DIR": home + "/gh"}
        self.vaults = {}
        self.server = None
        self.results = {"vault": self.vault, "load_start": os.getloadavg()}

    def say(self, line=""):
        print(line, flush=True)

    # Vaults, made once and shared by the sections that need them.
    def new_vault(self, name):
        env = dict(self.env, VAULT_HOME="%s/%s" % (self.home, name))
        key = "%s/%s.key" % (self.home, name)
        subprocess.run([self.vault, "init", "--keyfile", key], env=env, check=True, **QUIET)
        env["VAULT_KEYFILE"] = key
        return env

    def filled(self, name, count):
        """A key file vault of count grants g0..g{count-1}, filled with a few
        importers at once; the wall time per grant is kept."""
        if name not in self.vaults:
            env = self.new_vault(name)
            start = time.perf_counter()
            self.fill(env, count)
            self.results["import_ms_per_grant_%s" % name] = (time.perf_counter() - start) * 1000 / max(1, count)
            self.vaults[name] = env
        return self.vaults[name]

    def fill(self, env, count, workers=4):
        def one(i):
            subprocess.run([self.vault, "import", "g%d" % i], env=env, input=grant_json(i), check=True,
                           stderr=subprocess.DEVNULL)
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(count)))

    def token_server(self):
        if self.server is None:
            self.server = TokenServer()
        return self.server

    def age_files(self):
        key, secret = self.home + "/age.key", self.home + "/secret.age"
        if not os.path.exists(secret):
            subprocess.run(["age-keygen", "-o", key], env=self.env, check=True, **QUIET)
            recipient = subprocess.run(["age-keygen", "-y", key], env=self.env, check=True,
                                       capture_output=True).stdout.decode().strip()
            subprocess.run(["age", "-r", recipient, "-o", secret], env=self.env, input=b"ya29.secret", check=True)
        return ["age", "-d", "-i", key, secret]

    # Sections.
    def basic(self):
        args, vault = self.args, self.vault
        env = self.filled("vault", args.grants)
        middle = "g%d" % (args.grants // 2)
        rows = [("vault list (%d grants)" % args.grants, median_ms([vault, "list"], env, args.runs)),
                ("vault show %s" % middle, median_ms([vault, "show", middle], env, args.runs)),
                ("vault token %s (fresh, key file)" % middle, median_ms([vault, "token", middle], env, args.runs)),
                ("vault --version (process start)", median_ms([vault, "--version"], env, args.runs))]
        agent = Agent(vault, env, self.home + "/run")
        try:
            rows.append(("vault token %s (fresh, agent)" % middle,
                         median_ms([vault, "token", middle], agent.client_env, args.runs)))
            rss_agent = peak_rss_mib([vault, "token", middle], agent.client_env, self.home)
        finally:
            agent.stop()
        rss_keyfile = peak_rss_mib([vault, "token", middle], env, self.home)
        peers = []
        if shutil.which("age"):
            peers.append(("age -d (one secret)", median_ms(self.age_files(), env, args.runs)))
        # pass: gpg with an unprotected key and a warm agent.
        if shutil.which("pass") and shutil.which("gpg"):
            os.makedirs(env["GNUPGHOME"], mode=0o700)
            subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "bench@example.com",
                            "default", "default", "never"], env=env, check=True, capture_output=True)
            subprocess.run(["pass", "init", "bench@example.com"], env=env, check=True, capture_output=True)
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda i: subprocess.run(["pass", "insert", "-m", "g%d" % i], env=env,
                                                       input=b"ya29.bench\n", check=True, capture_output=True),
                              range(args.grants)))
            peers.append(("pass show (one secret)", median_ms(["pass", "show", middle], env, args.runs)))
            peers.append(("pass ls (%d entries)" % args.grants, median_ms(["pass", "ls"], env, args.runs)))
            subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, capture_output=True)
        # gh: a stored token, no network.
        if shutil.which("gh"):
            os.makedirs(env["GH_CONFIG_DIR"], mode=0o700)
            with open(env["GH_CONFIG_DIR"] + "/hosts.yml", "w") as f:
                f.write("github.com:\n    oauth_token: gho_bench\n    user: bench\n    git_protocol: https\n")
            peers.append(("gh auth token", median_ms(["gh", "auth", "token"], env, args.runs)))

        self.say("== basic (%s)" % load())
        self.say("vault import: %.1f ms of wall time per grant, four importers at once"
                 % self.results["import_ms_per_grant_vault"])
        self.say("%-44s %10s" % ("command", "median ms"))
        for name, ms in rows + peers:
            self.say("%-44s %10.2f" % (name, ms))
        self.say("%-44s %10.1f" % ("peak RSS of vault token, agent (MiB)", rss_agent))
        self.say("%-44s %10.1f" % ("peak RSS of vault token, key file (MiB)", rss_keyfile))
        token, show, listing, agent_token = rows[2][1], rows[1][1], rows[0][1], rows[4][1]
        for peer, ms in peers:
            self.say("%-44s vault token via agent / this = %.2f" % (peer, agent_token / ms))
        for name, ms in peers:
            self.say("%-44s vault token (key file) / this = %.2f, vault show / this = %.2f, vault list / this = %.2f"
                     % (name, token / ms, show / ms, listing / ms))
        self.results["basic"] = {"rows": dict(rows + peers), "rss_agent_mib": rss_agent,
                                 "rss_keyfile_mib": rss_keyfile}

    def big(self):
        args, vault = self.args, self.vault
        env = self.filled("big", args.big)
        middle = "g%d" % (args.big // 2)
        listing = samples_ms([vault, "list"], env, max(5, args.runs // 2))
        token = median_ms([vault, "token", middle], env, args.runs)
        rss = peak_rss_mib([vault, "token", middle], env, self.home)
        # Through the agent, a token costs the same at any number of grants.
        agent = Agent(vault, env, self.home + "/run-big")
        try:
            agent_token = median_ms([vault, "token", middle], agent.client_env, args.runs)
        finally:
            agent.stop()
        self.say("== big (%s)" % load())
        self.say("vault import: %.1f ms of wall time per grant, four importers at once"
                 % self.results["import_ms_per_grant_big"])
        self.say("%-44s %10.2f   (goal < 150 ms: %s; fastest run %.2f ms)"
                 % ("vault list (%d grants)" % args.big, statistics.median(listing),
                    met(statistics.median(listing) < 150), min(listing)))
        self.say("%-44s %10.2f" % ("vault token %s (%d grants, key file)" % (middle, args.big), token))
        self.say("%-44s %10.2f" % ("vault token %s (%d grants, agent)" % (middle, args.big), agent_token))
        self.say("%-44s %10.1f" % ("peak RSS of vault token, %d grants (MiB)" % args.big, rss))
        self.results["big"] = {"grants": args.big, "list_ms": statistics.median(listing),
                               "list_fastest_ms": min(listing), "token_ms": token, "agent_token_ms": agent_token,
                               "rss_mib": rss}

    def sync(self):
        args, vault = self.args, self.vault
        with open(self.home + "/store-password", "w") as f:
            f.write("bench\n")
        dav = subprocess.Popen([sys.executable, os.path.join(SERVERS, "webdav.py"), self.home + "/dav",
                                self.home + "/store-password"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        rgw = None
        if os.path.exists("/usr/bin/radosgw"):
            rgw = subprocess.Popen([sys.executable, os.path.join(SERVERS, "rgw.py"), self.home + "/rgw"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        rows = []
        try:
            url = json.loads(dav.stdout.readline())["url"]
            s3 = json.loads(rgw.stdout.readline()) if rgw else None
            vaults = {100: self.filled("small", 100), args.grants: self.filled("vault", args.grants)}
            if args.big:
                vaults[args.big] = self.filled("big", args.big)
            runs = max(5, args.runs // 4)
            for count, env in sorted(vaults.items()):
                store = url + "s%d/" % count
                os.makedirs(self.home + "/dav/www/store/s%d" % count)
                subprocess.run(["chown", "-R", "www-data:www-data", self.home + "/dav/www/store"], check=True)
                login = ["--user", "vault", "--password-file", self.home + "/store-password"]
                rows.append(("webdav", count) + sync_one_change(vault, env, store, login, runs))
                if s3:
                    login = ["--endpoint", s3["endpoint"], "--region", s3["region"],
                             "--credentials-file", s3["credentials"]]
                    rows.append(("rgw", count) + sync_one_change(vault, env, "s3://bench/s%d" % count, login, runs))
        finally:
            for server in (dav, rgw):
                if server:
                    server.stdin.close()
                    server.wait()
        self.say("== sync (%s)" % load())
        webdav_ms = {c: ms for kind, c, ms, _, _ in rows if kind == "webdav"}
        for kind, count, ms, requests, sent in rows:
            goal = "   (goal <= 6 requests: %s)" % met(requests <= 6) if count == args.big else ""
            ratio = "" if kind == "webdav" else " (%.2fx WebDAV's time)" % (ms / webdav_ms[count])
            self.say("vault sync of one changed grant, %-6s %5d grants: %8.1f ms%s, %d requests, %d bytes uploaded%s"
                     % (kind, count, ms, ratio, requests, sent, goal))
        self.results["sync"] = [{"store": k, "grants": c, "ms": ms, "requests": r, "bytes_sent": s}
                                for k, c, ms, r, s in rows]

    def stall(self):
        """A fresh grant's token (and an import of another grant) while a
        refresh of grant 'slow' waits on a token endpoint that never answers,
        each stalled run paired with an idle one (the order alternating)."""
        args, vault = self.args, self.vault
        server = self.token_server()
        env = self.new_vault("stall")
        subprocess.run([vault, "import", "mail"], env=env, input=grant_json(1, 3600, server.base + "/delay/1/token"),
                       check=True, **QUIET)
        subprocess.run([vault, "import", "slow"], env=env, input=grant_json(2, -600, server.base + "/stall/token"),
                       check=True, **QUIET)
        probes = [("token", [vault, "token", "mail"], None),
                  ("import", [vault, "import", "other", "--replace"], grant_json(3))]
        subprocess.run(probes[1][1], env=env, input=probes[1][2], check=True, **QUIET)
        self.say("== stall (%s)" % load())
        self.say("each run of a command while a refresh of grant 'slow' waits on a token endpoint that accepts and")
        self.say("never answers is paired with a run on the idle vault; ratios are to the idle runs' median")
        out = {}
        for mode in ("agent", "key file"):
            agent = Agent(vault, env, self.home + "/run-stall") if mode == "agent" else None
            client = agent.client_env if agent else dict(env, VAULT_AGENT="off")
            stallers = []
            idle = {name: [] for name, _, _ in probes}
            stalled = {name: [] for name, _, _ in probes}
            failed = {name: 0 for name, _, _ in probes}
            try:
                for _, cmd, stdin in probes:
                    subprocess.run(cmd, env=client, input=stdin, check=True, **QUIET)
                # Each command's stalled runs may take up to the budget (then
                # at least two pairs), so that one that waits out the stall
                # leaves the others their runs.
                spent = {name: 0.0 for name, _, _ in probes}
                for i in range(args.runs):
                    for name, cmd, stdin in probes:
                        if i >= 2 and spent[name] > args.stall_budget * 1000:
                            continue
                        for stall in ((False, True) if i % 2 == 0 else (True, False)):
                            if stall:
                                self.keep_stalled(server, client, stallers)
                            else:
                                self.release_stall(server, stallers)
                            ms, status = timed(cmd, client, stdin, timeout=args.stall_cap)
                            if not stall and status != 0:
                                raise SystemExit("bench: %s exited %s on the idle vault"
                                                 % (" ".join(cmd[1:]), status))
                            (stalled if stall else idle)[name].append(ms)
                            failed[name] += stall and status != 0
                            spent[name] += ms if stall else 0
            finally:
                self.release_stall(server, stallers)
                for p in stallers:
                    if p.poll() is None:
                        p.kill()
                    p.wait()
                if agent:
                    agent.stop()
            for name, cmd, _ in probes:
                base = statistics.median(idle[name])
                got = stalled[name]
                label = "%s (%s)" % (" ".join(cmd[1:3]), mode)
                row = {"idle_median_ms": base, "idle_worst_ms": max(idle[name]),
                       "stalled_median_ms": statistics.median(got), "stalled_worst_ms": max(got),
                       "runs": len(got), "failed": failed[name],
                       "median_ratio": statistics.median(got) / base, "worst_ratio": max(got) / base,
                       "idle_worst_ratio": max(idle[name]) / base,
                       "median_pair_ratio": statistics.median(a / b for a, b in zip(got, idle[name])),
                       # Runs that waited rather than met a busy scheduler.
                       "stalled_over_10x": sum(x > 10 * base for x in got),
                       "idle_over_10x": sum(x > 10 * base for x in idle[name]),
                       "idle_ms": idle[name], "stalled_ms": got}
                out[label] = row
                goal = "   (goal worst <= 1.5x: %s)" % met(row["worst_ratio"] <= 1.5) if name == "token" else ""
                self.say("%-22s idle %6.2f ms; stalled: median %8.2f ms = %6.2fx (pairs %6.2fx), worst %8.2f ms ="
                         " %7.2fx; idle worst %.2fx; over 10x: %d stalled, %d idle; %d pairs, %d failed%s"
                         % (label, base, row["stalled_median_ms"], row["median_ratio"], row["median_pair_ratio"],
                            row["stalled_worst_ms"], row["worst_ratio"], row["idle_worst_ratio"],
                            row["stalled_over_10x"], row["idle_over_10x"], row["runs"], row["failed"], goal))
        self.results["stall"] = out

    def keep_stalled(self, server, client, stallers):
        """Makes sure a `vault token slow` is waiting on the stalled endpoint:
        starts one when none is (an earlier one may have timed out)."""
        if server.counts()["stalled"] > 0:
            return
        stallers.append(subprocess.Popen([self.vault, "token", "slow"], env=client, stdin=subprocess.DEVNULL,
                                         **QUIET))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if server.counts()["stalled"] > 0:
                return
            time.sleep(0.005)
        raise SystemExit("bench: vault token slow never reached the stalled token endpoint")

    def release_stall(self, server, stallers, seconds=60):
        """Ends every stalled request (the endpoint closes them) and waits for
        the processes that made them to exit."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            server.release()
            for p in stallers:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            if server.counts()["stalled"] == 0:
                return
            time.sleep(0.005)

    def parallel(self):
        """--parallel expired grants refreshed at once, against one refresh alone."""
        args, vault = self.args, self.vault
        server = self.token_server()
        env = self.new_vault("parallel")
        endpoint = server.base + "/delay/%g/token" % args.delay
        names = ["p%d" % i for i in range(args.parallel)]
        self.say("== parallel (%s)" % load())
        self.say("%d expired grants, one vault token each, started at once; the token endpoint answers after %g s"
                 % (args.parallel, args.delay))
        out = {}
        direct = dict(env, VAULT_AGENT="off")
        for mode in ("agent", "key file"):
            rounds = []
            for r in range(args.rounds):
                # Expired again (not timed), written to the file directly, and
                # then a new agent: one that has seen the grants refreshed
                # might answer from what it remembers.
                for n in names + ["solo"]:
                    subprocess.run([vault, "import", n, "--replace"], env=direct,
                                   input=grant_json(7, -600, endpoint), check=True, **QUIET)
                agent = Agent(vault, env, self.home + "/run-parallel") if mode == "agent" else None
                client = agent.client_env if agent else direct
                try:
                    before = server.counts()["requests"]
                    server.reset_peak()
                    if r % 2 == 0:
                        solo = timed([vault, "token", "solo"], client, timeout=120)
                        together = self.at_once(names, client)
                    else:
                        together = self.at_once(names, client)
                        solo = timed([vault, "token", "solo"], client, timeout=120)
                    counts = server.counts()
                finally:
                    if agent:
                        agent.stop()
                rounds.append({"solo_ms": solo[0], "solo_failed": solo[1] != 0, "together_ms": together[0],
                               "together_failed": together[1], "ratio": together[0] / solo[0],
                               "requests": counts["requests"] - before, "peak_in_flight": counts["peak_in_flight"]})
            ratio = statistics.median(x["ratio"] for x in rounds)
            row = {"rounds": rounds, "median_ratio": ratio,
                   "solo_median_ms": statistics.median(x["solo_ms"] for x in rounds),
                   "together_median_ms": statistics.median(x["together_ms"] for x in rounds),
                   "failed": sum(x["together_failed"] + x["solo_failed"] for x in rounds),
                   "peak_in_flight": max(x["peak_in_flight"] for x in rounds),
                   "requests_per_round": statistics.median(x["requests"] for x in rounds)}
            out[mode] = row
            self.say("%-10s one alone %8.0f ms; %d at once %8.0f ms = %5.2fx (median of %d rounds; goal <= 1.5x: %s);"
                     " at most %d at the endpoint at once, %g requests a round, %d failed"
                     % (mode, row["solo_median_ms"], args.parallel, row["together_median_ms"], ratio, len(rounds),
                        met(ratio <= 1.5), row["peak_in_flight"], row["requests_per_round"], row["failed"]))
        self.results["parallel"] = out

    def at_once(self, names, env, timeout=180):
        """Starts `vault token NAME` for every name at once: (wall ms until the
        last exits, how many failed)."""
        start = time.perf_counter()
        running = [subprocess.Popen([self.vault, "token", n], env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for n in names]
        failed = 0
        for p in running:
            try:
                _, err = p.communicate(timeout=max(1, timeout - (time.perf_counter() - start)))
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                err = b"killed after %d s" % timeout
            if p.returncode != 0:
                failed += 1
                ERRORS.setdefault("vault token: " + err.decode("utf-8", "replace").strip(), p.returncode)
        return (time.perf_counter() - start) * 1000, failed

    def agent(self):
        """vault token through the agent and with a key file, vault help
        token, age -d, vault --version and /bin/true, in turns within each
        iteration (the order rotating), as per-iteration ratios."""
        args, vault = self.args, self.vault
        env = self.filled("vault", args.grants)
        middle = "g%d" % (args.grants // 2)
        age = self.age_files()
        agent = Agent(vault, env, self.home + "/run-agent")
        try:
            commands = [("token", [vault, "token", middle], agent.client_env), ("age", age, env),
                        ("keyfile", [vault, "token", middle], env), ("help", [vault, "help", "token"], env),
                        ("version", [vault, "--version"], env), ("true", ["/bin/true"], env)]
            for _, cmd, cenv in commands:
                for _ in range(5):
                    subprocess.run(cmd, env=cenv, check=True, **QUIET)
            times = {name: [] for name, _, _ in commands}
            for i in range(args.pairs):
                k = i % len(commands)
                for name, cmd, cenv in commands[k:] + commands[:k]:
                    ms, status = timed(cmd, cenv, keep_errors=False)
                    if status != 0:
                        raise SystemExit("bench: %s exited %s" % (name, status))
                    times[name].append(ms)
        finally:
            agent.stop()
        ratio = lambda a, b: statistics.median(x / y for x, y in zip(times[a], times[b]))
        med = {name: statistics.median(v) for name, v in times.items()}
        row = {"iterations": args.pairs, "median_ms": med, "token_over_age": ratio("token", "age"),
               "version_over_age": ratio("version", "age"), "token_over_version": ratio("token", "version"),
               "keyfile_over_age": ratio("keyfile", "age"), "help_over_version": ratio("help", "version")}
        self.say("== agent (%s)" % load())
        self.say("%d iterations, each running the six commands once in turn (order rotating)" % args.pairs)
        self.say("median ms: vault token %s (agent) %.2f, (key file) %.2f, vault help token %.2f, age -d %.2f, "
                 "vault --version %.2f, /bin/true %.2f" % (middle, med["token"], med["keyfile"], med["help"], med["age"],
                                                           med["version"], med["true"]))
        self.say("median per-iteration ratios:")
        self.say("  token (agent) / --version  %.2f (goal <= 1.1: %s)" % (
            row["token_over_version"], met(row["token_over_version"] <= 1.1)))
        self.say("  token (agent) / age -d     %.2f (goal <= 1.0: %s)" % (
            row["token_over_age"], met(row["token_over_age"] <= 1.0)))
        self.say("  token (key file) / age -d  %.2f (goal <= 1.3: %s)" % (
            row["keyfile_over_age"], met(row["keyfile_over_age"] <= 1.3)))
        self.say("  help token / --version     %.2f" % row["help_over_version"])
        self.say("  --version / age -d         %.2f" % row["version_over_age"])
        self.results["agent"] = row
        if args.tripwire:
            over = [(what, row[key]) for what, key in (("vault token (agent)", "token_over_version"),
                                                       ("vault help token", "help_over_version"))
                    if row[key] > args.tripwire]
            for what, r in over:
                self.say("bench: TRIPWIRE: %s took %.2f times vault --version (bound %.2f): start-up got slower; "
                         "see CONTRIBUTING.md, \"Start-up speed\"" % (what, r, args.tripwire))
            if over:
                self.tripped = True

    def kubectl(self):
        """kubectl get pods with vault as its exec credential plugin, against
        kubectl with the token in its kubeconfig, in turns."""
        args, vault = self.args, self.vault
        if not shutil.which("kubectl"):
            self.say("== kubectl: skipped (kubectl is not installed)")
            return
        env = self.filled("vault", args.grants)
        middle = "g%d" % (args.grants // 2)
        d = self.home + "/kube"
        server = subprocess.Popen([sys.executable, os.path.join(SERVERS, "kube_api.py"), "serve-any", d],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        agent = Agent(vault, env, self.home + "/run-kube")
        try:
            info = json.loads(server.stdout.readline())
            token = subprocess.run([vault, "token", middle], env=agent.client_env, capture_output=True,
                                   check=True).stdout.decode().strip()
            def config(name, user):
                path = "%s/%s.kubeconfig" % (self.home, name)
                with open(path, "w") as f:
                    os.fchmod(f.fileno(), 0o600)
                    json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "bench",
                               "clusters": [{"name": "bench", "cluster": {
                                   "server": "https://127.0.0.1:%d" % info["port"],
                                   "certificate-authority": info["ca"]}}],
                               "users": [{"name": "bench", "user": user}],
                               "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}]}, f)
                return path
            plugin = config("plugin", {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                "command": vault, "args": ["kube-credential", middle]}})
            static = config("static", {"token": token})
            commands = [(name, ["kubectl", "--kubeconfig", path, "--cache-dir", self.home + "/kube-cache",
                                "get", "pods", "-o", "name"]) for name, path in (("vault", plugin), ("static", static))]
            for _, cmd in commands:
                for _ in range(3):
                    subprocess.run(cmd, env=agent.client_env, check=True, **QUIET)
            times = {name: [] for name, _ in commands}
            for i in range(args.runs):
                for name, cmd in (commands if i % 2 == 0 else commands[::-1]):
                    ms, status = timed(cmd, agent.client_env)
                    if status != 0:
                        raise SystemExit("bench: kubectl (%s) exited %s" % (name, status))
                    times[name].append(ms)
        finally:
            agent.stop()
            server.stdin.close()
            server.wait(timeout=10)
        ratio = statistics.median(a / b for a, b in zip(times["vault"], times["static"]))
        self.say("== kubectl (%s)" % load())
        self.say("%d pairs of kubectl get pods, in turns" % args.runs)
        self.say("median ms: with vault kube-credential (agent) %.1f, with the token in the kubeconfig %.1f" % (
            statistics.median(times["vault"]), statistics.median(times["static"])))
        self.say("median per-pair ratio, vault / static token: %.2f" % ratio)
        self.results["kubectl"] = {"pairs": args.runs, "vault_ms": statistics.median(times["vault"]),
                                   "static_ms": statistics.median(times["static"]), "ratio": ratio}

    def finish(self):
        if self.server:
            self.server.stop()
            self.server = None


def met(ok):
    return "met" if ok else "NOT met"


def sync_one_change(vault, env, url, login, runs):
    """Sets the store (with the login options), uploads everything, then
    times syncs that each carry one changed grant. Returns (median ms,
    requests, bytes sent) of those."""
    subprocess.run([vault, "remote", "set", url] + login, env=env, check=True, stderr=subprocess.DEVNULL)
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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vault", required=True, help="the vault binary to measure")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="comma-separated sections to run, of: %s (default: all)" % ", ".join(SECTIONS))
    ap.add_argument("--grants", type=int, default=1000, help="grants in the main vault (basic, sync, agent)")
    ap.add_argument("--runs", type=int, default=30, help="runs of each timed command; pairs in the stall section")
    ap.add_argument("--big", type=int, default=10000, help="grants in the big vault (0: skip big)")
    ap.add_argument("--no-sync", action="store_true", help="skip the sync measurements (they start Apache)")
    ap.add_argument("--stall-budget", type=float, default=60,
                    help="seconds of stalled runs of one command before it stops early (at least 2 pairs)")
    ap.add_argument("--stall-cap", type=float, default=90, help="seconds after which one stalled run is killed")
    ap.add_argument("--parallel", type=int, default=20, help="expired grants refreshed at once")
    ap.add_argument("--delay", type=float, default=1.0, help="seconds the token endpoint takes to answer")
    ap.add_argument("--tripwire", type=float, default=0,
                    help="with the agent section: exit 1 when vault token (agent) or help token passes this many "
                         "times vault --version")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the parallel refresh")
    ap.add_argument("--pairs", type=int, default=200, help="iterations of the agent section")
    ap.add_argument("--json", metavar="FILE", help="also write the figures to FILE as JSON")
    args = ap.parse_args()
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        ap.error("unknown section %s (sections: %s)" % (", ".join(unknown), ", ".join(SECTIONS)))
    if args.no_sync and "sync" in chosen:
        chosen.remove("sync")
    if not args.big and "big" in chosen:
        chosen.remove("big")
    home = tempfile.mkdtemp(prefix="vault-bench-")
    bench = Bench(args, home)
    started = time.monotonic()
    try:
        version = subprocess.run([bench.vault, "--version"], capture_output=True, check=True).stdout.decode().strip()
        # The commit of the checkout the binary was built in (a binary
        # copied out of one says "?"), not of this script's checkout.
        commit = subprocess.run(["git", "-C", os.path.dirname(os.path.realpath(bench.vault)), "rev-parse",
                                 "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "?"
        bench.say("%s; built at commit %s; %d cores; %s" % (version, commit, os.cpu_count() or 0, load()))
        for section in SECTIONS:
            if section in chosen:
                began = time.monotonic()
                getattr(bench, section)()
                bench.say("(%s took %.0f s; %s)" % (section, time.monotonic() - began, load()))
                for message, status in ERRORS.items():
                    bench.say("failure seen (exit %s): %s" % (status, message.replace("\n", " / ")))
                bench.results.setdefault("failures", {})[section] = dict(ERRORS)
                ERRORS.clear()
                bench.say()
        bench.say("done in %.0f s (%s)" % (time.monotonic() - started, load()))
        bench.results["load_end"] = os.getloadavg()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(bench.results, f, indent=1)
    finally:
        bench.finish()
        subprocess.run(["gpgconf", "--kill", "all"], env={"GNUPGHOME": home + "/gnupg", "PATH": "/usr/bin:/bin"},
                       capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
    if getattr(bench, "tripped", False):
        sys.exit(1)


if __name__ == "__main__":
    main()
