#!/usr/bin/env python3
"""A raw client of the vault agent's socket, for tests of what the agent refuses.

  agent_client.py SOCKET hello         send a well-formed hello (vault id of zeros)
  agent_client.py SOCKET oversized     announce a 16 MiB message, then send a little
  agent_client.py SOCKET garbage       a short message with an unknown version
  agent_client.py SOCKET lock|sync|conflicts|open|name-hash|token
                                       that operation, well-formed (open: no
                                       records; name-hash and token: grant "work")
  agent_client.py SOCKET flood N       N token requests (operation 11, as a forwarded
                                       `vault token` asks), as fast as answers come,
                                       for "work", "g1" ... "g4" in turn, each on the
                                       connection before it until the agent closes it

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


def read_body(s, header):
    """The message whose 4-byte length prefix was `header`, or what came of it."""
    (length,) = struct.unpack(">I", header)
    body = b""
    while len(body) < length:
        chunk = s.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    return body


def flood(path, count):
    """Prints "answers N closed C" and then each error code with its count."""
    names = ["work", "g1", "g2", "g3", "g4"]
    answers, closed, codes = 0, 0, {}
    s = None
    sent = 0
    while sent < count:
        if s is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(30)
            s.connect(path)
        # Operation 11, what a forwarded `vault token` asks, with claims.
        body = (bytes([3, 11]) + string(names[sent % len(names)]) + struct.pack(">I", 60)
                + string("server") + string("curl") + struct.pack(">II", 1000, 4242))
        sent += 1
        try:
            s.sendall(struct.pack(">I", len(body)) + body)
            header = s.recv(4)
        except (ConnectionResetError, BrokenPipeError):
            header = b""
        if len(header) < 4:
            closed += 1
            s.close()
            s = None
            continue
        answer = read_body(s, header)
        answers += 1
        code = "ok"
        if len(answer) > 6 and answer[1] == 1:
            (n,) = struct.unpack(">I", answer[2:6])
            code = answer[6:6 + n].decode(errors="replace")
        codes[code] = codes.get(code, 0) + 1
    print("answers", answers, "closed", closed)
    for code in sorted(codes):
        print(code, codes[code])


def main():
    path, what = sys.argv[1], sys.argv[2]
    if what == "flood":
        flood(path, int(sys.argv[3]))
        return
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
        body = read_body(s, header)
        if len(body) > 6 and body[1] == 1:
            (n,) = struct.unpack(">I", body[2:6])
            print("answer", 1, body[6:6 + n].decode(errors="replace"))
        else:
            print("answer", body[1] if len(body) > 1 else "short")
    except (ConnectionResetError, BrokenPipeError):
        print("closed")


if __name__ == "__main__":
    main()
