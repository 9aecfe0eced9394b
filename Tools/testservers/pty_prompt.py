#!/usr/bin/env python3
"""Drives vault's passphrase prompt on a pseudo-terminal, like a person
pressing Ctrl-Z and typing `fg`.

  pty_prompt.py REPORT PASSPHRASE VAULT ARGS...

A job-control shell on a new pty runs VAULT ARGS in its own process group
in the foreground; when the prompt has turned echo off, it stops the job
(SIGTSTP), looks at the terminal, continues it in the foreground (SIGCONT)
and waits for echo to go off again; then the passphrase is typed. REPORT
gets JSON: echo_while_stopped, echo_off_after_continue, passphrase_shown
(whether the typed passphrase came back from the terminal) and status.
"""
import json
import os
import pty
import select
import signal
import sys
import termios
import time


def echo_on(fd):
    return bool(termios.tcgetattr(fd)[3] & termios.ECHO)


def wait_for(condition, tries=2000):
    for _ in range(tries):
        if condition():
            return True
        time.sleep(0.01)
    return False


def shell(report, vault_args):
    """The session leader on the pty: a tiny job-control shell."""
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    job = os.fork()
    if job == 0:
        os.setpgid(0, 0)
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)
        os.execv(vault_args[0], vault_args)
    os.setpgid(job, job)
    os.tcsetpgrp(0, job)
    result = {}
    wait_for(lambda: not echo_on(0))
    os.killpg(job, signal.SIGTSTP)
    _, status = os.waitpid(job, os.WUNTRACED)
    result["stopped"] = os.WIFSTOPPED(status)
    os.tcsetpgrp(0, os.getpgrp())
    result["echo_while_stopped"] = echo_on(0)
    os.tcsetpgrp(0, job)
    os.killpg(job, signal.SIGCONT)
    result["echo_off_after_continue"] = wait_for(lambda: not echo_on(0), tries=500)
    with open(report + ".ready", "w"):
        pass
    _, status = os.waitpid(job, 0)
    result["status"] = os.waitstatus_to_exitcode(status)
    with open(report + ".shell", "w") as f:
        json.dump(result, f)
    os._exit(0)


def main():
    report, passphrase, vault_args = sys.argv[1], sys.argv[2], sys.argv[3:]
    pid, master = pty.fork()
    if pid == 0:
        try:
            shell(report, vault_args)
        finally:
            os._exit(1)
    output = b""
    typed = False
    while True:
        if not typed and os.path.exists(report + ".ready"):
            os.write(master, passphrase.encode() + b"\n")
            typed = True
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif os.waitpid(pid, os.WNOHANG)[0] == pid:
            break
    with open(report + ".shell") as f:
        result = json.load(f)
    result["passphrase_shown"] = passphrase.encode() in output
    with open(report, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
