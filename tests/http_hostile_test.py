#!/usr/bin/env python3
"""http_hostile_test.py <uring-http> <backend> [auto|walk|noopenat2 WITHOUT_OPENAT2]: uring-http against
hostile input.

Starts the server (--resolve auto or walk; noopenat2: auto, run by the without_openat2 launcher so that
openat2 fails with ENOSYS and the walk takes over) on a tree holding symlinks out of and within the root,
dotfiles, a FIFO and a directory, and checks:
 - every way out of --root is 404 or 400: directory and file symlinks to outside, "..", "%2e%2e", "//",
   NUL bytes, symlinks that stay inside (no symlink is followed), dotfiles and dot-directories;
 - absurdly long paths: 414 over 1024 bytes, 404 for a name over NAME_MAX, 431 over the head limit;
 - HTTP/0.9 "GET /" is 400 at once (well before --header-timeout), absolute-form targets are served by path;
 - then a seeded, bounded storm of random and mutated requests (12 at a time), each on its own connection,
   every reply either nothing or a well-formed HTTP/1.1 response, never with bytes from outside the root;
 - meanwhile 20 connections stall mid-request without closing;
 - afterwards the server still answers GET /, exits 0 on SIGTERM, ends the stalled connections by its header timeout, its peak
   RSS (VmHWM) stayed under 100 MB and its fd count came back to what it was before the storm.
"""
import os
import random
import socket
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_util import Server, exchange, fail, status_of  # noqa: E402

SEED = 20240917
CASES = 1500
RSS_BOUND = 100 * 1024 * 1024
SECRET = b"OUTSIDE-THE-ROOT-SECRET"


def make_tree(top):
    root = os.path.join(top, "root")
    os.makedirs(os.path.join(root, "sub"))
    os.makedirs(os.path.join(root, ".git"))
    with open(os.path.join(top, "secret"), "wb") as f:
        f.write(SECRET + b"\n")
    with open(os.path.join(root, "x"), "wb") as f:
        f.write(b"file body\n")
    with open(os.path.join(root, "sub", "inner"), "wb") as f:
        f.write(b"inner\n")
    for dot in (".env", ".git/config", "sub/.hidden"):
        with open(os.path.join(root, dot), "wb") as f:
            f.write(SECRET + b"\n")
    os.symlink("/etc", os.path.join(root, "etclink"))
    os.symlink(top, os.path.join(root, "toplink"))
    os.symlink("../secret", os.path.join(root, "outlink"))
    os.symlink("sub/inner", os.path.join(root, "inlink"))
    os.symlink("sub", os.path.join(root, "sublink"))
    os.symlink(os.path.join(root, "x"), os.path.join(root, "abslink"))
    os.mkfifo(os.path.join(root, "fifo"))
    return root


def get(port, target, extra=b""):
    return exchange(port, b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + extra + b"\r\n")


def check_paths(port):
    ok = {b"/file/x": b"file body\n", b"/file/sub/inner": b"inner\n", b"/file/s%75b/inner": b"inner\n"}
    for target, body in ok.items():
        reply = get(port, target)
        if status_of(reply) != 200 or not reply.endswith(b"\r\n\r\n" + body):
            fail("%r: %r" % (target, reply[:200]))
    refused = [
        # Symlinks out of the root, to a directory or a file, absolute or relative.
        b"/file/etclink/passwd", b"/file/etclink/hostname", b"/file/etclink", b"/file/toplink/secret",
        b"/file/outlink",
        # Symlinks that stay inside: not followed either.
        b"/file/inlink", b"/file/sublink/inner", b"/file/abslink",
        # Dotfiles and dot-directories.
        b"/file/.env", b"/file/.git/config", b"/file/sub/.hidden", b"/file/%2eenv", b"/file/.git",
        # Traversal, whatever its spelling.
        b"/file/../secret", b"/file/%2e%2e/secret", b"/file/%2E%2E/secret", b"/file/..%2fsecret",
        b"/file/sub/../../secret", b"/file//etc/passwd", b"/file/%2fetc/passwd", b"/file/%252e%252e/secret",
        b"/file/..\\secret", b"/file/./x", b"/file/sub/./inner",
        # NUL and control bytes, encoded.
        b"/file/x%00", b"/file/x%00.txt", b"/file/%0a",
        # Not regular files: a directory, a FIFO (must not block), the root itself.
        b"/file/sub", b"/file/fifo", b"/file/", b"/file",
        # Long names: a component over NAME_MAX, a deep path.
        b"/file/" + b"a" * 300, b"/file/" + b"a/" * 400 + b"x",
    ]
    for target in refused:
        for method in (b"GET", b"HEAD"):
            reply = exchange(port, method + b" " + target + b" HTTP/1.1\r\nConnection: close\r\n\r\n")
            code = status_of(reply)
            if code not in (400, 404) or SECRET in reply or b"root:" in reply:
                fail("%s %r answered %r" % (method.decode(), target, reply[:200]))
    # Raw NUL in the target: the parser refuses it.
    code = status_of(exchange(port, b"GET /file/x\0y HTTP/1.1\r\n\r\n"))
    if code != 400:
        fail("NUL in target: %r" % code)
    # Over 1024 bytes decoded: 414; over the 8 KiB head: 431.
    code = status_of(get(port, b"/file/" + b"b" * 2000))
    if code != 414:
        fail("2000-byte name: %r" % code)
    # The limit is on the decoded name: 1200 bytes encoding 400 is not 414 (but no such file: 404).
    code = status_of(get(port, b"/file/" + b"%41" * 400))
    if code != 404:
        fail("1200-byte encoded name: %r" % code)
    code = status_of(get(port, b"/file/" + b"c" * 9000))
    if code != 431:
        fail("9000-byte target: %r" % code)


def check_forms(port, header_timeout):
    # HTTP/0.9: no version, no headers. 400 at once, then close.
    start = time.monotonic()
    reply = exchange(port, b"GET /\r\n", shut=False, timeout=header_timeout + 5)
    took = time.monotonic() - start
    if status_of(reply) != 400 or took > header_timeout / 2:
        fail("HTTP/0.9 request: %r after %.1f s" % (reply[:80], took))
    # Absolute-form: its path is served; the authority does not matter.
    for target, code, body in ((b"http://example.com/file/x", 200, b"file body\n"),
                               (b"HTTP://h:1/file/x?q=1", 200, b"file body\n"), (b"https://h", 200, b"hello\n"),
                               (b"http://h/file/.env", 404, None), (b"http://h/file/etclink/passwd", 404, None),
                               (b"http://h/file/../secret", 404, None), (b"ftp://h/file/x", 404, None)):
        reply = get(port, target)
        if status_of(reply) != code or (body is not None and not reply.endswith(b"\r\n\r\n" + body)):
            fail("absolute-form %r: %r" % (target, reply[:200]))


VALID = [
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /file/x HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
    b"HEAD /file/sub/inner HTTP/1.0\r\n\r\n",
    b"GET http://h/file/x HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
    b"GET /file/etclink/passwd HTTP/1.1\r\nX-A: b\r\n\r\n",
]
PIECES = [b"GET", b"HEAD", b"POST", b" ", b"/", b"/file/", b"..", b"%2e", b"%00", b"%", b"etclink", b"outlink",
          b"/passwd", b".env", b"HTTP/1.1", b"HTTP/1.0", b"HTTP/0.9", b"HTTP/2.0", b"\r\n", b"\n", b"\r", b"\0",
          b":", b"Host: x", b"Content-Length: ", b"999999999999", b"-1", b"Transfer-Encoding: chunked",
          b"Connection: close", b"\t", b"\xff", b"http://", b"?", b"#", b"\r\n\r\n"]


def hostile(rng):
    kind = rng.randrange(4)
    if kind == 0:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600)))
    if kind == 1:  # pieces of HTTP in random order
        return b"".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 40)))
    data = bytearray(rng.choice(VALID) * rng.randrange(1, 4))
    for _ in range(rng.randrange(1, 8)):  # mutations: flip, insert, delete, duplicate
        op = rng.randrange(4)
        at = rng.randrange(len(data)) if data else 0
        if op == 0 and data:
            data[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[at:at] = rng.choice(PIECES)
        elif op == 2 and data:
            del data[at:at + rng.randrange(1, 8)]
        elif data:
            data[at:at] = data[at:at + rng.randrange(1, 64)] * rng.randrange(1, 50)
    return bytes(data)


def one(port, data):
    reply = exchange(port, data, timeout=15)
    if reply and not reply.startswith(b"HTTP/1.1 "):
        fail("reply to %r is not HTTP: %r" % (data[:80], reply[:80]))
    if SECRET in reply or b"root:x:0:0" in reply:
        fail("reply to %r leaks a file outside the root" % data[:80])
    return len(reply)


def main():
    binary, backend = sys.argv[1], sys.argv[2]
    resolve = sys.argv[3] if len(sys.argv) > 3 else "auto"
    header_timeout = 4
    with tempfile.TemporaryDirectory() as top:
        root = make_tree(top)
        args = ["--header-timeout", str(header_timeout)] + (["--resolve", resolve] if resolve == "walk" else [])
        wrapper = [sys.argv[4]] if resolve == "noopenat2" else []
        with Server(binary, backend, root, args, wrapper) as srv:
            if status_of(get(srv.port, b"/")) != 200:
                fail("GET / before anything")
            baseline = srv.fds()
            started = time.monotonic()
            check_paths(srv.port)
            check_forms(srv.port, header_timeout)
            srv.wait_fds(baseline)
            rng = random.Random(SEED)
            cases = [hostile(rng) for _ in range(CASES)]
            # A few that stop mid-request without closing: the header timeout ends them.
            stalled = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(20)]
            for i, s in enumerate(stalled):
                s.sendall(cases[i][: len(cases[i]) // 2] or b"G")
            with ThreadPoolExecutor(max_workers=12) as pool:
                replied = sum(1 for n in pool.map(lambda d: one(srv.port, d), cases) if n > 0)
            reply = get(srv.port, b"/")
            if status_of(reply) != 200 or not reply.endswith(b"hello\n"):
                fail("GET / after the storm: %r" % reply[:200])
            # The stalled ones are still open on this side: the server ends them (408) by itself.
            srv.wait_fds(baseline)
            for s in stalled:
                s.close()
            peak = srv.status("VmHWM")
            if peak > RSS_BOUND:
                fail("peak RSS %d bytes, bound %d" % (peak, RSS_BOUND))
            srv.stop()
            print("uring-http (%s, resolve %s): %d hostile requests (%d answered), peak RSS %.1f MB, "
                  "fds back to %d, %.1f s" % (backend, resolve, len(cases), replied, peak / 1e6, baseline,
                                               time.monotonic() - started))


if __name__ == "__main__":
    main()
