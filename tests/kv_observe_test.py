#!/usr/bin/env python3
"""Seeing inside uring-kv: INFO uring gives each shard's executor figures, which only grow, and its
batching percentiles; SIGUSR1 prints each executor's operations in flight on stderr and the server keeps
serving; SIGTERM then stops it with
exit status 0.

Usage: kv_observe_test.py URING_KV BACKEND SHARDS
"""

import re
import select
import signal
import subprocess
import sys
import time

from kv_compat_test import Conn, die_with_parent, encode

failures = []


def read_until(stream, pattern, count, limit):
    """stderr text read until `pattern` matched `count` times, or the limit passed."""
    text = ""
    deadline = time.monotonic() + limit
    while len(re.findall(pattern, text)) < count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([stream], [], [], left)[0]:
            break
        chunk = stream.read1(4096).decode(errors="replace")
        if not chunk:
            break
        text += chunk
    return text


def info_uring(c):
    """INFO uring's fields as {name: int}, or {name: str} for a field that is not a number."""
    c.send(encode(["INFO", "uring"]))
    _, text = c.reply()
    text = text.decode() if isinstance(text, bytes) else str(text)
    if not text.startswith("# Uring\r\n"):
        failures.append("INFO uring: %r" % text)
    fields = (l.split(":", 1) for l in text.split("\r\n")[1:] if ":" in l)
    return {k: int(v) if v.isdigit() else v for k, v in fields}


def main():
    binary, backend, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
    proc = subprocess.Popen([binary, "--port", "0", "--backend", backend, "--threads", str(shards)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=die_with_parent)
    try:
        ready = select.select([proc.stdout], [], [], 15)[0]
        line = proc.stdout.readline().decode() if ready else ""
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            raise SystemExit("FAIL: uring-kv banner: %r" % line)
        c = Conn(int(m.group(1)))
        c.send(encode(["PING"]))
        if c.reply()[0] != b"+PONG\r\n":
            failures.append("PING before SIGUSR1")
        first = info_uring(c)
        second = info_uring(c)
        for i in range(shards):
            for name in ("enters", "waits", "sqes", "cqes", "cancels", "operations_in_flight"):
                if "executor%d_%s" % (i, name) not in first:
                    failures.append("INFO uring lacks executor%d_%s: %r" % (i, name, first))
            # One native shard asks for SINGLE_ISSUER|DEFER_TASKRUN (kernel 6.1+, as here); several keep
            # the default flags and send by mailbox, and the emulated backend has no ring.
            flags = first.get("executor%d_ring_flags" % i, "")
            one_native = backend == "native" and shards == 1
            if ("DEFER_TASKRUN" in flags.split("|")) != one_native or (backend == "emulated") != (flags == "none"):
                failures.append("executor%d_ring_flags %r on %s with %d shards" % (i, flags, backend, shards))
            messaging = first.get("executor%d_messaging" % i, "")
            if messaging != ("msg_ring" if one_native else "mailbox"):
                failures.append("executor%d_messaging %r on %s with %d shards" % (i, messaging, backend, shards))
            for h in ("sqes_per_submit", "cqes_per_reap"):
                p50, p99, top = (second.get("executor%d_%s_%s" % (i, h, q), -1) for q in ("p50", "p99", "max"))
                if not 1 <= p50 <= p99 <= top:
                    failures.append("executor%d_%s: p50 %d, p99 %d, max %d" % (i, h, p50, p99, top))
        # The figures are live: the executor serving this connection completed its receive of the second
        # INFO since the first. (Another executor may take its part of INFO from its mailbox while awake,
        # with no completion, so each one's count need not grow.)
        cqes = [sum(r.get("executor%d_cqes" % i, 0) for i in range(shards)) for r in (first, second)]
        if not cqes[1] > cqes[0]:
            failures.append("no executor's cqes grew: %r then %r" % (first, second))
        proc.send_signal(signal.SIGUSR1)
        dump = read_until(proc.stderr, r"executor \d+: \d+ operations in flight\n", shards, 30)
        for i in range(shards):
            if not re.search(r"uring-kv: executor %d: \d+ operations in flight\n" % i, dump):
                failures.append("no snapshot of executor %d in %r" % (i, dump))
        # Each executor at least accepts: a multishot accept (natively) or a readiness wait (emulated).
        if not re.search(r"uring-kv:   (accept\w*|poll) fd=\d+ age=\d+ms", dump):
            failures.append("no accept listed in %r" % dump)
        c.send(encode(["PING"]))
        if c.reply()[0] != b"+PONG\r\n":
            failures.append("PING after SIGUSR1")
        proc.send_signal(signal.SIGTERM)
        if proc.wait(timeout=30) != 0:
            failures.append("exit status %d after SIGTERM" % proc.returncode)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for f in failures:
        print("FAIL: " + f)
    if failures:
        sys.exit(1)
    print("uring-kv INFO uring and signals (%s, %d shards): ok" % (backend, shards))


if __name__ == "__main__":
    main()
