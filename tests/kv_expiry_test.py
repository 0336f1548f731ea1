#!/usr/bin/env python3
"""kv_expiry_test.py <uring-kv> <native|emulated> <shards>: active expiry reclaims keys nobody reads again.

Sets 4000 keys with PX 200 (in databases 0 and 3), 100 with EX 1000 and 100 without expiry, then only reads
INFO (which counts without erasing) until expired_keys reaches 4000 and uring_kv_stored_keys (keys held,
expired ones not yet reclaimed included) falls to 200: the reclaim is the shards' own sampling, not lazy
expiry on a read nor DBSIZE's sweep. Afterwards the 200 other keys are all there. Every wait is a poll
with a deadline; the server is killed by pid on every exit path.
"""
import ctypes
import re
import select
import signal
import socket
import subprocess
import sys
import time

BINARY, BACKEND, SHARDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
EXPIRING = 4000


def encode(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_replies(s, n):
    """Reads n replies (simple ones, integers or one bulk string) and returns the last."""
    buf, last = b"", None
    s.settimeout(30)
    for _ in range(n):
        while b"\r\n" not in buf:
            buf += s.recv(65536)
        line, buf = buf.split(b"\r\n", 1)
        if line.startswith(b"$") and int(line[1:]) >= 0:
            size = int(line[1:])
            while len(buf) < size + 2:
                buf += s.recv(65536)
            line, buf = buf[:size], buf[size + 2:]
        last = line
    return last


def info(s):
    s.sendall(encode("INFO"))
    text = read_replies(s, 1).decode()
    return {k: v for k, v in re.findall(r"^(\w+):(\S*)\r?$", text, re.M)}


def main():
    proc = subprocess.Popen([BINARY, "--port", "0", "--backend", BACKEND, "--threads", str(SHARDS)],
                            stdout=subprocess.PIPE,
                            preexec_fn=lambda: ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL))
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 15)
        line = proc.stdout.readline().decode() if ready else ""
        m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(\d+ threads, (\w+) backend\)", line)
        if not m or m.group(2) != BACKEND:
            raise SystemExit("FAIL: uring-kv banner: %r" % line)
        s = socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=30)
        batch = b""
        for i in range(EXPIRING):
            if i == EXPIRING // 2:
                batch += encode("SELECT", 3)
            batch += encode("SET", "e:%d" % i, "v", "PX", 200)
        batch += encode("SELECT", 0)
        batch += b"".join(encode("SET", "long:%d" % i, "v", "EX", 1000) for i in range(100))
        batch += b"".join(encode("SET", "kept:%d" % i, "v") for i in range(100))
        s.sendall(batch)
        read_replies(s, EXPIRING + 2 + 200)
        start = time.monotonic()
        until = start + 60
        now = info(s)
        while time.monotonic() < until:
            now = info(s)
            if int(now.get("expired_keys", -1)) == EXPIRING and int(now.get("uring_kv_stored_keys", -1)) == 200:
                break
            time.sleep(0.05)
        else:
            raise SystemExit("FAIL: after 60 s without reads, expired_keys %s (want %d), stored keys %s (want 200)"
                             % (now.get("expired_keys"), EXPIRING, now.get("uring_kv_stored_keys")))
        print("active expiry: %d keys reclaimed %.2f s after they were set, none read"
              % (EXPIRING, time.monotonic() - start))
        s.sendall(encode("EXISTS", *["long:%d" % i for i in range(100)]) +
                  encode("EXISTS", *["kept:%d" % i for i in range(100)]) + encode("DBSIZE"))
        s.settimeout(30)
        got = b""
        while got.count(b"\r\n") < 3:
            got += s.recv(4096)
        if got != b":100\r\n:100\r\n:200\r\n":
            raise SystemExit("FAIL: the keys without a passed deadline: %r" % got)
        print("uring-kv active expiry (%s, %d shards): ok" % (BACKEND, SHARDS))
    finally:
        proc.kill()
        proc.wait()


main()
