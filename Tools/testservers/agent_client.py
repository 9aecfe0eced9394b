#!/usr/bin/env python3
"""A raw client of the vault agent's socket, for tests of what the agent refuses.

  agent_client.py SOCKET hello         send a well-formed hello (vault id of zeros)
  agent_client.py SOCKET oversized     announce a 16 MiB message, then send a little
  agent_client.py SOCKET garbage       a short message with an unknown version
  agent_client.py SOCKET lock|sync|conflicts|open|name-hash|token
                                       that operation, well-formed (open: no
                                       records; name-hash and token: grant "work")

Prints one line: "answer STATUS" when the agent answered (STATUS is the
status byte, followed by the error code for an error), "closed" when it
closed the connection without an answer, or "refused ERRNO-NAME" when
connecting failed.
"""
import errno
import socket
import struct
import sys


def string(text):
    raw = text.encode()
    return struct.pack(">I", len(raw)) + raw


OPERATIONS = {
    "lock": bytes([3]),
    "sync": bytes([9]),
    "conflicts": bytes([10]),
    "open": bytes([7]) + struct.pack(">I", 0),
    "name-hash": bytes([5]) + string("work"),
    "token": bytes([4]) + string("work") + struct.pack(">I", 60) + bytes([0]),
}


def main():
    path, what = sys.argv[1], sys.argv[2]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(path)
    except OSError as e:
        print("refused", errno.errorcode.get(e.errno, str(e.errno)))
        return
    try:
        if what == "hello":
            body = bytes([3, 1]) + bytes(16)  # protocol version 3, hello
            s.sendall(struct.pack(">I", len(body)) + body)
        elif what == "oversized":
            s.sendall(struct.pack(">I", 16 << 20) + bytes(4096))
        elif what in OPERATIONS:
            body = bytes([3]) + OPERATIONS[what]
            s.sendall(struct.pack(">I", len(body)) + body)
        elif what == "garbage":
            body = bytes([99, 1])
            s.sendall(struct.pack(">I", len(body)) + body)
        else:
            raise SystemExit("unknown request " + what)
        header = s.recv(4)
        if len(header) < 4:
            print("closed")
            return
        (length,) = struct.unpack(">I", header)
        body = b""
        while len(body) < length:
            chunk = s.recv(length - len(body))
            if not chunk:
                break
            body += chunk
        if len(body) > 6 and body[1] == 1:
            (n,) = struct.unpack(">I", body[2:6])
            print("answer", 1, body[6:6 + n].decode(errors="replace"))
        else:
            print("answer", body[1] if len(body) > 1 else "short")
    except (ConnectionResetError, BrokenPipeError):
        print("closed")


if __name__ == "__main__":
    main()
