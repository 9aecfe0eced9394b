#!/usr/bin/env python3
"""Logs in to IMAP or SMTP submission with a SASL response read from stdin.

  mail_client.py imap|smtp PORT XOAUTH2|OAUTHBEARER

stdin holds the base64 initial response, as `vault xoauth2 --base64` prints
it. IMAP: AUTHENTICATE, then LIST. SMTP: AUTH MECH, then the response after
the 334 (an XOAUTH2 response is longer than SMTP's line limit allows on the
AUTH line). Prints OK or FAILED with the server's words; exit 0 or 1.
"""
import base64
import imaplib
import smtplib
import sys


def main():
    proto, port, mech = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    response = sys.stdin.read().strip()
    if proto == "imap":
        imap = imaplib.IMAP4("127.0.0.1", port)
        try:
            imap.authenticate(mech, lambda _: base64.b64decode(response))
            typ, boxes = imap.list()
            print("OK", typ, b" ".join(boxes).decode())
            return 0
        except imaplib.IMAP4.error as e:
            print("FAILED", e)
            return 1
    smtp = smtplib.SMTP("127.0.0.1", port, timeout=10)
    smtp.ehlo()
    code, _ = smtp.docmd("AUTH", mech)
    if code != 334:
        print("FAILED", code)
        return 1
    code, message = smtp.docmd(response)
    if code == 235:
        print("OK", code, message.decode())
        return 0
    if code == 334:  # the server's error challenge; end the exchange
        code, message = smtp.docmd("\x01" if mech == "OAUTHBEARER" else "")
    print("FAILED", code, message.decode())
    return 1


if __name__ == "__main__":
    sys.exit(main())
