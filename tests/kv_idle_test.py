#!/usr/bin/env python3
"""kv_idle_test.py <uring-kv> <native|emulated> <shards> [connections] [--report]: the memory an idle client
costs uring-kv, as the growth of its VmRSS (/proc/PID/status) per connection.

Opens `connections` (default 5000) connections, sends PING and reads +PONG on each (so every connection has
parsed a command, replied and gone back to waiting for input), and reads the server's VmRSS before the first
connection and once all are idle; then checks that every connection still answers. The test fails if an
idle connection of uring-kv costs more than IDLE_BOUND bytes: about twice what it costs (1.2-1.5 KB over
5000 connections, the executors' receive pools included, whose pages the connections touch in turn), below
what a connection keeping its parser or a read or reply buffer of its own while idle would cost.
--report measures redis-server 7.0 the same way and prints both figures (bench/README.md).
Servers are started and killed as in kv_compat_test.py (which this imports).
"""
import resource
import socket
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import kv_compat_test as compat

IDLE_BOUND = 3 * 1024


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("FAIL: no VmRSS for pid %d" % pid)


def ping_all(socks):
    """PING on every connection, then read every +PONG."""
    for s in socks:
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
    for s in socks:
        got = b""
        while len(got) < 7:
            d = s.recv(7 - len(got))
            if not d:
                raise SystemExit("FAIL: a connection closed before its +PONG")
            got += d
        if got != b"+PONG\r\n":
            raise SystemExit("FAIL: PING answered %r" % got)


def per_connection(proc, port, n):
    """Bytes of VmRSS growth per idle connection of the server `proc` on `port`."""
    # Warm the server's allocator with one connection first, so one-time costs are not counted.
    warm = socket.create_connection(("127.0.0.1", port), timeout=15)
    ping_all([warm])
    before = rss_kib(proc.pid)
    socks = []
    try:
        for _ in range(n):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=15))
        ping_all(socks)
        after = rss_kib(proc.pid)
        ping_all(socks)  # every connection still works
    finally:
        for s in socks:
            s.close()
        warm.close()
    return (after - before) * 1024 / n, before, after


def measure(label, n, proc, port):
    """Prints and returns the bytes per idle connection of the server `proc` on `port`; kills it."""
    try:
        per, before, after = per_connection(proc, port, n)
    finally:
        proc.kill()
        proc.wait()
    print("%s: %d idle connections: RSS %d KiB -> %d KiB: %.0f bytes per connection"
          % (label, n, before, after, per), flush=True)
    return per


def main():
    binary, backend, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rest = sys.argv[4:]
    report = "--report" in rest
    rest = [a for a in rest if a != "--report"]
    n = int(rest[0]) if rest else 5000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < n + 256:
        raise SystemExit("FAIL: the open-file limit %d is below %d connections" % (hard, n))
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, n + 256), hard))

    kv_bytes = measure("uring-kv (%s, %d threads)" % (backend, shards), n,
                       *compat.start_kv(binary, backend, shards, ["--max-connections", str(n + 16)]))
    if report:
        with tempfile.TemporaryDirectory(prefix="kv_idle_") as tmp:
            measure("redis-server", n, *compat.start_redis(tmp, ["--maxclients", str(n + 16)]))
    if compat.sanitized(binary):
        print("the bound of %d bytes is not applied: the binary is built with a sanitizer" % IDLE_BOUND)
    elif kv_bytes > IDLE_BOUND:
        raise SystemExit("FAIL: an idle connection costs uring-kv %.0f bytes, above %d" % (kv_bytes, IDLE_BOUND))
    print("PASS")


if __name__ == "__main__":
    main()
