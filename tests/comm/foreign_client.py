#!/usr/bin/env python3
"""A stranger at a comm store, for tests/comm/test_auth_job.sh: written from the handshake's
description in src/comm/bootstrap/auth.h (not from its code), it connects to HOST PORT and
does one thing, then prints what the store answered:

  foreign_client.py HOST PORT none      hello in same-user mode (no job secret)
  foreign_client.py HOST PORT wrong     a full handshake with a secret that is not the job's
  foreign_client.py HOST PORT junk      a store request with no handshake at all
  foreign_client.py HOST PORT oversize  the job's secret (AK_JOB_SECRET), then a SET whose
                                        value length is over the store's 1 MiB cap

Output: "refused STATUS" (the store's refusal code), "closed" (dropped without a word), or
"accepted" (a handshake that passed). Exit 0 unless the socket itself failed.
"""
import hashlib
import hmac
import os
import socket
import struct
import sys

ROLE_STORE = 1


def proof(secret, label, mode, client_nonce, server_nonce):
    text = label.encode().ljust(32, b"\0") + bytes([ROLE_STORE, mode]) + client_nonce + server_nonce
    return hmac.new(secret, text, hashlib.sha256).digest()


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def closed(sock):
    """True when the peer closes (what a refused or dropped connection sees)."""
    sock.settimeout(5)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True


def handshake(sock, secret, mode):
    client_nonce = os.urandom(32)
    sock.sendall(struct.pack("<IBBBB", 0x31414B41, 1, mode, ROLE_STORE, 0) + client_nonce)
    challenge = recv_exact(sock, 72)
    if challenge is None:
        return "closed"
    magic, status = struct.unpack_from("<IB", challenge)
    if magic != 0x32414B41:
        return "not a handshake reply"
    if status:
        return f"refused {status}"
    server_nonce = challenge[8:40]
    # a stranger goes on even when the server's proof does not match its secret
    response = struct.pack("<I", 0x33414B41) + proof(secret, "accelkit auth v1 client", mode,
                                                      client_nonce, server_nonce)
    sock.sendall(response)
    result = recv_exact(sock, 8)
    if result is None:
        return "closed"
    status = result[4]
    return f"refused {status}" if status else "accepted"


def main():
    host, port, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sock = socket.create_connection((host, port), timeout=5)
    if what == "none":
        print(handshake(sock, b"accelkit same-user loopback", 1))
    elif what == "wrong":
        print(handshake(sock, b"not-the-job-secret-0123456789", 0))
    elif what == "junk":
        # a GET of w/x, then a second one's start: more than a hello's 40 bytes
        get = struct.pack("<IBBHIIqi", 0x31534B41, 2, 3, 0, 1, 0, 0, 1000) + b"w/x"
        sock.sendall(get + get[:16])
        print("closed" if closed(sock) else "answered")
    elif what == "oversize":
        outcome = handshake(sock, os.environ["AK_JOB_SECRET"].encode(), 0)
        if outcome != "accepted":
            print(f"handshake {outcome}")
            return 0
        sock.sendall(struct.pack("<IBBHIIqi", 0x31534B41, 1, 1, 0, 1, 0xFFFFFFF0, 0, 0) + b"k")
        print("closed" if closed(sock) else "answered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
