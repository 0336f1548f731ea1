#!/usr/bin/env python3
"""echo_hostile_test.py URING-ECHO BACKEND [--recv leased|copy] [--seed N]

Hostile clients against uring-echo (--idle-timeout 2), seeded and bounded (well under a minute):
random and mutated bytes (every echo checked byte for byte), half-open connections (the peer shuts down its
side), connections reset in the middle of an echo, idle connections, slowloris clients trickling a byte at
a time, and a hog that sends without reading. Throughout, a fresh client must be served; afterwards the
server must still echo, its peak RSS must have stayed under RSS_BOUND and its fd count (/proc/PID/fd) must
return to the baseline taken before the attack. The seed is printed (URING_FUZZ_SEED sets it).
"""
import argparse
import os
import random
import select
import signal
import socket
import struct
import sys
import time

from sample_server import FAILURES, Server, check, connect

RSS_BOUND = 64 << 20  # bytes: a 16 KiB buffer per connection (or a leased pool) and little else
IDLE = 2.0  # --idle-timeout: slowloris, idle and hog connections are all closed by it
def start(program, backend, recv):
    argv = [program, "--port", "0", "--backend", backend, "--idle-timeout", str(IDLE), "--drain-timeout", "2"]
    server = Server(argv + (["--recv", recv] if recv else []))
    if server.port is None:
        server.kill()
        sys.exit("no banner: %r; stderr: %s" % (server.banner, server.stderr_text()))
    print(server.banner)
    return server


def echo_round(port, data, limit=10.0):
    """Sends `data` on a new connection while reading; True when exactly `data` came back."""
    with connect(port) as s:
        s.setblocking(False)
        sent, got = 0, bytearray()
        deadline = time.monotonic() + limit
        while len(got) < len(data) and time.monotonic() < deadline:
            want_write = [s] if sent < len(data) else []
            r, w, _ = select.select([s], want_write, [], 0.5)
            if w:
                try:
                    sent += s.send(data[sent:sent + 65536])
                except BlockingIOError:
                    pass
            if r:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        return bytes(got) == data


def reset(s):
    """Closes with a reset (SO_LINGER 0), as a crashed or hostile peer does."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def mutate(rng, base):
    data = bytearray(base)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(4)
        if op == 0 and data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[rng.randrange(len(data) + 1):] = b""
        elif op == 2:
            at = rng.randrange(len(data) + 1)
            data[at:at] = bytes([rng.choice((0, 0xFF, 0x0A, 0x0D))]) * rng.randint(1, 4096)
        else:
            data += data[: rng.randint(0, 8192)]
    return bytes(data) or b"\0"


def still_serves(server, what):
    check(echo_round(server.port, b"are you there? " + what.encode()), "not served during/after " + what)
    server.rss()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("program")
    p.add_argument("backend", choices=["native", "emulated"])
    p.add_argument("--recv", choices=["leased", "copy"])
    p.add_argument("--seed", type=int, default=int(os.environ.get("URING_FUZZ_SEED", "0")) or None)
    args = p.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    print("seed %d" % seed, flush=True)
    rng = random.Random(seed)
    began = time.monotonic()
    server = start(args.program, args.backend, args.recv)
    held = []
    try:
        baseline_fds = server.fds()  # before any connection: the listener, the ring, the signalfd...
        check(echo_round(server.port, b"warm up"), "first echo")
        print("baseline: %d fds, %d KiB RSS" % (baseline_fds, server.rss() >> 10))

        # Random bytes, then mutations of a message, each echoed exactly.
        for i in range(40):
            data = rng.randbytes(rng.choice((1, 2, 100, 4096, 16384, 16385, 65536, rng.randint(1, 300000))))
            check(echo_round(server.port, data), "random message %d (%d bytes)" % (i, len(data)))
        base = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n*3\r\n$3\r\nSET\r\n" * 20
        for i in range(40):
            data = mutate(rng, base)
            check(echo_round(server.port, data), "mutated message %d (%d bytes)" % (i, len(data)))
        still_serves(server, "random and mutated bytes")

        # Half-open: the peer sends, shuts down its side, and must still get everything back, then the end.
        for i in range(30):
            data = rng.randbytes(rng.randint(1, 100000))
            with connect(server.port) as s:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
                got = bytearray()
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                check(bytes(got) == data, "half-open %d: %d of %d bytes, then the end" % (i, len(got), len(data)))
        # Resets in the middle of an echo, and connections that open and vanish.
        for i in range(60):
            s = connect(server.port)
            if i % 2:
                s.setblocking(False)
                try:
                    s.send(rng.randbytes(rng.randint(1, 200000)))  # what fits now, never a wait
                except BlockingIOError:
                    pass
            reset(s)
        still_serves(server, "half-open and reset connections")

        # Idle and slowloris connections, plus a hog that never reads; all held at once.
        for _ in range(100):
            held.append(("idle", connect(server.port)))
        for _ in range(50):
            held.append(("slow", connect(server.port)))
        hog = connect(server.port)
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.setblocking(False)
        hog_sent = 0
        trickle_until = time.monotonic() + 3 * IDLE
        while time.monotonic() < trickle_until:
            for kind, s in held:
                if kind == "slow":
                    try:
                        s.send(bytes([rng.randrange(256)]))  # one byte each round: never idle for long
                    except OSError:
                        pass
            try:
                hog_sent += hog.send(rng.randbytes(65536))
            except (BlockingIOError, OSError):
                pass
            server.rss()
            time.sleep(0.25)  # the trickle's pace, not a synchronisation
        still_serves(server, "idle, slowloris and hog connections")
        print("hog sent %d bytes without reading; peak RSS so far %d KiB" % (hog_sent, server.peak_rss >> 10))
        # The idle ones and the hog were closed by the idle limit meanwhile; the slow ones were not.
        idle_closed = 0
        for kind, s in held:
            if kind == "idle":
                s.settimeout(0.1)
                try:
                    idle_closed += s.recv(1) == b""
                except OSError:
                    idle_closed += 1  # reset: also closed
        check(idle_closed == 100, "%d of 100 idle connections closed by --idle-timeout" % idle_closed)
        for _, s in held:
            s.close()
        held = []
        hog.close()

        # Afterwards: still echoing, RSS bounded, every connection's fd given back.
        still_serves(server, "the attack")
        deadline = time.monotonic() + 4 * IDLE + 10
        while server.fds() != baseline_fds and time.monotonic() < deadline:
            time.sleep(0.1)
        print("after: %d fds (baseline %d), peak RSS %d KiB (bound %d KiB)" % (
            server.fds(), baseline_fds, server.peak_rss >> 10, RSS_BOUND >> 10))
        check(server.fds() == baseline_fds, "fds %d, baseline %d" % (server.fds(), baseline_fds))
        check(server.peak_rss < RSS_BOUND, "peak RSS %d KiB over the bound" % (server.peak_rss >> 10))
        server.proc.send_signal(signal.SIGTERM)
        status = server.wait(15)
        check(status == 0, "exit status %s after SIGTERM" % status)
        server.finish()
        err = server.stderr_text()
        check("a connection ended" not in err, "unexpected connection errors: " + err[-500:])
    finally:
        for _, s in held:
            s.close()
        server.kill()
    print("took %.1f s" % (time.monotonic() - began))
    if FAILURES:
        print("%d check(s) failed (seed %d)" % (len(FAILURES), seed))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
