#!/usr/bin/env python3
"""A hostile IMAP server on 127.0.0.1 (no TLS) that repeats the client's
SASL response back before refusing the login.

  echo_imap.py serve

Prints its port; stops when stdin closes. It offers AUTH=XOAUTH2 and
AUTH=OAUTHBEARER; to AUTHENTICATE it answers "+ ", reads the response, then
sends four untagged lines, three of them repeating the response (as sent in
base64, decoded, and a base64 piece of it at another alignment) and one
ECHO_FREE_LINE, and refuses the login with "NO [AUTHENTICATIONFAILED]".
A client that shows the server's words must not show the first three.
"""
import base64
import socketserver
import sys
import threading

ECHO_FREE_LINE = "* OK nothing repeated here"


class Session(socketserver.StreamRequestHandler):
    def send(self, line):
        self.wfile.write(line.encode("latin-1") + b"\r\n")

    def handle(self):
        self.send("* OK echo server ready")
        for raw in self.rfile:
            words = raw.decode("latin-1").strip().split(" ")
            tag, verb = words[0], (words[1].upper() if len(words) > 1 else "")
            if verb == "CAPABILITY":
                self.send("* CAPABILITY IMAP4rev1 AUTH=XOAUTH2 AUTH=OAUTHBEARER")
                self.send(tag + " OK done")
            elif verb == "AUTHENTICATE":
                self.send("+ ")
                response = self.rfile.readline().strip()
                decoded = base64.b64decode(response).decode("latin-1").replace("\x01", " ")
                # Another alignment: the base64 of the response without its first byte.
                shifted = base64.b64encode(base64.b64decode(response)[1:]).decode()
                self.send("* OK you sent " + response.decode())
                self.send("* OK which says " + decoded)
                self.send("* OK a piece: " + shifted[8:120])
                self.send(ECHO_FREE_LINE)
                self.send(tag + " NO [AUTHENTICATIONFAILED] refused")
            elif verb == "LOGOUT":
                self.send("* BYE")
                self.send(tag + " OK bye")
                return
            else:
                self.send(tag + " BAD unknown")


def main():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Session)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
