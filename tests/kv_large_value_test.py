#!/usr/bin/env python3
"""kv_large_value_test.py <uring-kv> <native|emulated> <shards>: a large value costs uring-kv its size once.

A SET of a 64 MiB value, sent in pieces as a client sends it, must raise the server's peak resident memory
(VmHWM, /proc/PID/status) by less than BOUND times the value: the value's bytes are read into one string of
its own and stored without a copy (a parser that gathered it in its buffer and a store that copied it would
cost twice the value and more). GET sends it back from the store without a copy either, under the same bound.
MSET with two large values (on two shards when there are two), GETSET, APPEND to a new key, and a SET queued
in MULTI/EXEC (which copies) store exactly the bytes sent. Started as in kv_compat_test.py (imported). A
sanitized build's peaks are printed but not bounded (its shadow memory and quarantine are not the program's).
"""
import socket
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import kv_compat_test as compat

MIB = 1024 * 1024
BOUND = 1.35


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise SystemExit("FAIL: no %s for pid %d" % (field, pid))


def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)


def command(*args):
    return b"*%d\r\n" % len(args) + b"".join(bulk(a) for a in args)


class Client:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = bytearray()

    def send(self, data, piece=256 * 1024):
        for at in range(0, len(data), piece):  # as a client writes it: in pieces, not one call
            self.s.sendall(data[at:at + piece])

    def _need(self, n):
        while len(self.buf) < n:
            d = self.s.recv(4 * MIB)
            if not d:
                raise SystemExit("FAIL: the server closed the connection")
            self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self._need(len(self.buf) + 1)
        at = self.buf.index(b"\r\n")
        text = bytes(self.buf[:at])
        del self.buf[:at + 2]
        return text

    def bulk_reply(self):
        head = self.line()
        if not head.startswith(b"$"):
            raise SystemExit("FAIL: expected a bulk string, got %r" % head[:80])
        n = int(head[1:])
        if n < 0:
            return None
        self._need(n + 2)
        value = bytes(self.buf[:n])
        del self.buf[:n + 2]
        return value

    def expect(self, want):
        got = self.line()
        if got != want:
            raise SystemExit("FAIL: expected %r, got %r" % (want, got[:80]))


def check_peak(proc, base_kib, size, what, bounded):
    """Prints the peak's growth; fails past BOUND when `bounded` (not for a sanitized build: its RSS is not
    the program's own, see kv_compat_test.sanitized)."""
    grew = (status_kib(proc.pid, "VmHWM") - base_kib) * 1024
    print("%s: peak resident memory grew %.1f MiB for %.1f MiB of value (%.2fx)"
          % (what, grew / MIB, size / MIB, grew / size), flush=True)
    if bounded and grew > BOUND * size:
        raise SystemExit("FAIL: %s raised the peak by %.2fx the value, above %.2fx" % (what, grew / size, BOUND))


def main():
    binary, backend, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
    bounded = not compat.sanitized(binary)
    proc, port = compat.start_kv(binary, backend, shards)
    try:
        c = Client(port)
        c.send(command(b"SET", b"warm", b"x" * 100_000))  # the allocator and the pools warmed first
        c.expect(b"+OK")
        base = status_kib(proc.pid, "VmRSS")

        value = bytes(range(256)) * (64 * MIB // 256)
        c.send(command(b"SET", b"big", value))
        c.expect(b"+OK")
        check_peak(proc, base, len(value), "SET of 64 MiB", bounded)

        c.send(command(b"GET", b"big"))
        if c.bulk_reply() != value:
            raise SystemExit("FAIL: GET returned other bytes than SET stored")
        check_peak(proc, base, len(value), "SET and GET of 64 MiB", bounded)
        c.send(command(b"DEL", b"big"))
        c.expect(b":1")

        # Two values in one MSET ({a} and {b}: any keys; with two shards these two land on different ones
        # when the shards differ, and on one otherwise: either way each must be stored whole).
        a, b = b"a" * (8 * MIB), b"b" * (8 * MIB) + b"!"
        c.send(command(b"MSET", b"ka", a, b"kb", b))
        c.expect(b"+OK")
        c.send(command(b"GETSET", b"kc", a) + command(b"APPEND", b"kd", b) + command(b"MGET", b"ka", b"kb", b"kc", b"kd"))
        if c.bulk_reply() is not None:
            raise SystemExit("FAIL: GETSET of a new key must answer the null bulk string")
        c.expect(b":%d" % len(b))
        c.expect(b"*4")
        for name, want in ((b"ka", a), (b"kb", b), (b"kc", a), (b"kd", b)):
            if c.bulk_reply() != want:
                raise SystemExit("FAIL: %r does not hold the bytes sent" % name)
        c.send(command(b"MULTI") + command(b"SET", b"ke", b) + command(b"EXEC") + command(b"GET", b"ke"))
        c.expect(b"+OK")
        c.expect(b"+QUEUED")
        c.expect(b"*1")
        c.expect(b"+OK")
        if c.bulk_reply() != b:
            raise SystemExit("FAIL: a large SET run by EXEC does not hold the bytes sent")
        print("PASS")
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
