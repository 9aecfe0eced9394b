#!/usr/bin/env python3
"""Relays a Unix socket and remembers every byte that crossed it.

    socket_recorder.py LISTEN_PATH TARGET_PATH

Listens on LISTEN_PATH and relays each connection to TARGET_PATH, keeping
what passed in both directions in memory only (it may hold tokens: it is
never written anywhere). Prints "ready", then answers commands on stdin,
one a line:

    count HEX     how many times the bytes HEX appear in what crossed
    bytes         how many bytes crossed in all
    drop          close every open connection now

and exits when stdin closes.
"""
import os
import socket
import sys
import threading

lock = threading.Lock()
transcript = bytearray()
open_connections = []


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            with lock:
                transcript.extend(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listener, target):
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(target)
        except OSError:
            client.close()
            continue
        with lock:
            open_connections.extend([client, upstream])
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


def main():
    listen_path, target = sys.argv[1], sys.argv[2]
    if os.path.exists(listen_path):
        os.unlink(listen_path)
    old = os.umask(0o177)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(listen_path)
    os.umask(old)
    listener.listen(16)
    threading.Thread(target=serve, args=(listener, target), daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        with lock:
            if words[0] == "count":
                needle = bytes.fromhex(words[1])
                print(transcript.count(needle) if needle else 0, flush=True)
            elif words[0] == "bytes":
                print(len(transcript), flush=True)
            elif words[0] == "drop":
                for s in open_connections:
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                open_connections.clear()
                print("dropped", flush=True)
    os.unlink(listen_path)


if __name__ == "__main__":
    main()
