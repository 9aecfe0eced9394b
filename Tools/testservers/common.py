"""Helpers shared by the test servers in this folder."""
import os
import signal
import socket
import time


def free_port():
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, alive=lambda: True, seconds=5):
    """Waits until something accepts connections on 127.0.0.1:port."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            if not alive():
                return False
            time.sleep(0.05)
    return False


def stop_pid(pid, group=False):
    """SIGTERM, a moment's grace, then SIGKILL: the process (or its group) is gone."""
    kill = os.killpg if group else os.kill
    try:
        kill(pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.05)
        kill(pid, signal.SIGKILL)
    except OSError:
        pass
