#!/usr/bin/env python3
"""kv_compat_test.py <uring-kv> <native|emulated> <shards> [resp2|resp3]: uring-kv side by side with redis-server
7.0. In resp3 mode every connection first sends HELLO 3 to both, and the rest is compared in RESP3.

Starts redis-server (a free loopback port, no persistence, its own temp dir) and uring-kv, sends both the same
command sequences over raw RESP sockets, one connection each per sequence, and requires byte-identical
replies. Sequences (tests/kv_compat_cases.py): hand-written lists for every command uring-kv supports,
error cases included (arity, non-integers, syntax errors, unbalanced quotes in inline commands), then a
seeded random sequence of string, key and expiry commands over a small key space (KV_COMPAT_SEED picks
another seed). Then again pipelined, 64 commands a write: every sequence that is only commands, and a longer
random one.

Normalisation, only where the reply is inherently different (NORMALISED below):
  INFO                          both bulk (RESP3: verbatim) strings (contents differ: versions, counters)
  HELLO                         the same fields and values but version and id (versions and ids differ)
  COMMAND, COMMAND INFO, DOCS   (all commands) uring-kv's entries are redis-server's for the commands uring-kv
                                implements, each byte-identical; COUNT both integers; LIST (filtered or not)
                                redis-server's names that uring-kv implements (IMPLEMENTED). Entries are
                                compared with a container's subcommands sorted by name (redis-server lists
                                them in its hash table's order, which varies by process).
After the sequences, every command uring-kv lists has its COMMAND INFO and DOCS compared byte for byte, and
COMMAND COUNT must equal COMMAND's entries.
  TIME                          both two integers as bulk strings, the seconds within 10 of each other
  CLIENT ID                     both integers (ids are per server)
  TTL PTTL EXPIRETIME PEXPIRETIME  equal, or both positive and within 10 s of each other (the two servers
                                read their clocks at different moments)
  KEYS                          the same elements in any order (hash order differs)
  RANDOMKEY                     both null, or both a key that KEYS * lists
  SCAN                          iterated to the end on both, the same set of keys (cursors are opaque)
Every wait is a poll with a deadline; both servers are killed by pid on every exit path.
"""
import contextlib
import ctypes
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from kv_compat_cases import cases, random_sequence

failures = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    failures.append(msg)


def sanitized(binary):
    """Whether `binary` was built with ASan or TSan. Their allocators keep freed memory in quarantine and
    pad every block, so its RSS says nothing of the program's own: RSS bounds are not applied to it."""
    with open(binary, "rb") as f:
        image = f.read()
    return b"__asan_init" in image or b"__tsan_init" in image


def die_with_parent():
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(cond, deadline_s=20, step=0.05):
    until = time.monotonic() + deadline_s
    while time.monotonic() < until:
        if cond():
            return True
        time.sleep(step)
    return cond()


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    """A raw RESP connection; reply() reads exactly one reply and returns (raw bytes, parsed value)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.buf = b""
        self.closed = False

    def send(self, data):
        self.s.sendall(data)

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            self.closed = True
            raise EOFError
        self.buf += d

    def _line(self, at):
        while True:
            i = self.buf.find(b"\r\n", at)
            if i >= 0:
                return i
            self._fill()

    def _parse(self, at):
        end = self._line(at)
        kind, body = self.buf[at:at + 1], self.buf[at + 1:end]
        at = end + 2
        if kind in (b"+", b"-"):
            return (kind.decode(), body), at
        if kind in (b":", b"("):
            return int(body), at
        if kind == b"_":  # RESP3's null
            return None, at
        if kind == b",":
            return float(body), at
        if kind == b"#":
            return body == b"t", at
        if kind in (b"$", b"="):  # a verbatim string ("=") is read as its text, after "txt:"
            n = int(body)
            if n < 0:
                return None, at
            while len(self.buf) < at + n + 2:
                self._fill()
            return self.buf[at + (4 if kind == b"=" else 0):at + n], at + n + 2
        if kind == b"%":  # a map: a list of [key, value] pairs
            items = []
            for _ in range(int(body)):
                k, at = self._parse(at)
                v, at = self._parse(at)
                items.append([k, v])
            return ("map", items), at
        if kind == b"~":  # a set: its elements in order, as Redis writes a command's flags
            items = []
            for _ in range(int(body)):
                v, at = self._parse(at)
                items.append(v)
            return ("set", items), at
        if kind == b"*":
            n = int(body)
            if n < 0:
                return None, at
            items = []
            for _ in range(n):
                v, at = self._parse(at)
                items.append(v)
            return items, at
        raise ValueError("not RESP: %r" % self.buf[at - 1:at + 60])

    def reply(self):
        value, at = self._parse(0)
        raw, self.buf = self.buf[:at], self.buf[at:]
        return raw, value

    def at_eof(self):
        """True once the server has closed the connection (within a deadline)."""
        self.s.settimeout(10)
        try:
            while not self.closed:
                self._fill()
        except (EOFError, ConnectionResetError):
            return True
        except socket.timeout:
            return False
        return True

    def close(self):
        self.s.close()


def start_redis(tmp, extra=()):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", tmp, "--daemonize", "no", "--logfile", ""]
                            + list(extra),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp,
                            preexec_fn=die_with_parent)

    def up():
        try:
            c = Conn(port)
            c.send(b"PING\r\n")
            ok = c.reply()[0] in (b"+PONG\r\n", b"-NOAUTH Authentication required.\r\n")
            c.close()
            return ok
        except OSError:
            return proc.poll() is not None
    if not poll(up) or proc.poll() is not None:
        proc.kill()
        raise SystemExit("FAIL: redis-server did not start on port %d" % port)
    return proc, port


def start_kv(binary, backend, shards, extra=()):
    proc = subprocess.Popen([binary, "--port", "0", "--backend", backend, "--threads", str(shards)] + list(extra),
                            stdout=subprocess.PIPE, preexec_fn=die_with_parent)
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    line = proc.stdout.readline().decode() if ready else ""
    m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(\d+ threads, (\w+) backend\)", line)
    if not m or m.group(2) != backend:
        proc.kill()
        raise SystemExit("FAIL: uring-kv banner: %r" % line)
    return proc, int(m.group(1))


def name_of(step):
    if isinstance(step, bytes):  # an inline command
        words = step.split()
        return (words[0].decode(errors="replace").upper() if words else ""), words[1:]
    args = [a if isinstance(a, bytes) else str(a).encode() for a in step]
    return args[0].decode(errors="replace").upper(), args[1:]


def within(a, b, tolerance):
    return isinstance(a, int) and isinstance(b, int) and a > 0 and b > 0 and abs(a - b) <= tolerance


TOLERANCE = {"TTL": 10, "PTTL": 10000, "EXPIRETIME": 10, "PEXPIRETIME": 10000}
NORMALISED = {"INFO", "COMMAND", "TIME", "KEYS", "RANDOMKEY", "SCAN"} | set(TOLERANCE)


IMPLEMENTED = set()  # uring-kv's COMMAND LIST: full names, subcommands as container|sub


def pairs(v):
    """A map's [key, value] pairs (RESP3), or a flat RESP2 array's."""
    if isinstance(v, tuple) and v[0] == "map":
        return v[1]
    return [v[i:i + 2] for i in range(0, len(v), 2)] if isinstance(v, list) else None


def by_name(pairs_or_entries):
    return sorted(pairs_or_entries, key=repr)


def canon(v, key=None):
    """A COMMAND reply with each container's subcommands in name order: an INFO entry's last element, a
    DOCS entry's "subcommands" (a map in RESP3, a flat array of names and docs in RESP2)."""
    if isinstance(v, tuple):
        kind, items = v
        if kind == "map":
            items = [[canon(k), canon(x, k)] for k, x in items]
            return (kind, by_name(items) if key == b"subcommands" else items)
        return (kind, [canon(x) for x in items])
    if not isinstance(v, list):
        return v
    items = [canon(x) for x in v]
    for i in range(len(items) - 1):
        if items[i] == b"subcommands" and isinstance(items[i + 1], list):
            flat = items[i + 1]
            items[i + 1] = sum(by_name([flat[j:j + 2] for j in range(0, len(flat), 2)]), [])
    if len(items) == 10 and isinstance(items[0], bytes) and isinstance(items[1], int):
        last = items[9]
        items[9] = (last[0], by_name(last[1])) if isinstance(last, tuple) else by_name(last)
    return items


def same_command(rest, wv, gv):
    """COMMAND: uring-kv's part of redis-server's where every command is listed, else the same reply."""
    sub = rest[0].upper() if rest else b""
    wv, gv = canon(wv), canon(gv)
    top = {n for n in IMPLEMENTED if b"|" not in n}
    if sub == b"" or (sub == b"INFO" and len(rest) == 1):
        return (isinstance(gv, list) and all(e in wv for e in gv)
                and sorted(e[0] for e in gv) == sorted(top))
    if sub == b"DOCS" and len(rest) == 1:
        want, got = pairs(wv), pairs(gv)
        return (got is not None and all(p in want for p in got) and sorted(p[0] for p in got) == sorted(top))
    if sub == b"LIST":
        return (isinstance(wv, list) and isinstance(gv, list)
                and sorted(gv) == sorted(n for n in wv if n in IMPLEMENTED))
    if sub == b"COUNT" and len(rest) == 1:
        return isinstance(wv, int) and isinstance(gv, int)
    return wv == gv


def same(step, want, got, keys_of_redis):
    """Whether uring-kv's reply `got` matches redis-server's `want` (raw bytes, value) for `step`."""
    name, rest = name_of(step)
    (wraw, wv), (graw, gv) = want, got
    if wraw == graw:
        return True
    if name == "INFO":  # the same kind of string (bulk, or verbatim in RESP3)
        return isinstance(wv, bytes) and isinstance(gv, bytes) and wraw[:1] == graw[:1]
    if name in ("HELLO", "EXEC"):
        return b"version" in wraw and mask_hello(wraw) == mask_hello(graw)
    if name == "COMMAND":
        return same_command(rest, wv, gv)
    if name == "CLIENT" and rest and rest[0].upper() == b"ID":
        return isinstance(wv, int) and isinstance(gv, int)
    if name == "TIME":
        return (isinstance(gv, list) and len(gv) == 2 and all(isinstance(x, bytes) and x.isdigit() for x in gv)
                and abs(int(gv[0]) - int(wv[0])) <= 10)
    if name in TOLERANCE:
        return within(wv, gv, TOLERANCE[name])
    if name == "KEYS":
        return isinstance(wv, list) and isinstance(gv, list) and sorted(wv, key=repr) == sorted(gv, key=repr)
    if name == "RANDOMKEY":
        return (wv is None and gv is None) or (isinstance(gv, bytes) and wv is not None and gv in keys_of_redis)
    return False


def mask_hello(raw):
    """HELLO's reply (alone or within EXEC's) with the values that differ by nature (version, id) masked."""
    raw = re.sub(rb"\$7\r\nversion\r\n\$\d+\r\n[^\r]*\r\n", b"$7\r\nversion\r\n<version>", raw)
    return re.sub(rb"\$2\r\nid\r\n:\d+\r\n", b"$2\r\nid\r\n:<id>", raw)


def scan_all(conn, extra):
    keys, cursor = [], b"0"
    for _ in range(10000):
        conn.send(encode(["SCAN", cursor] + extra))
        raw, v = conn.reply()
        if not isinstance(v, list):
            return raw
        cursor = v[0]
        keys += v[1]
        if cursor == b"0":
            return sorted(keys)
    return "SCAN never ended"


PROLOGUE = []  # steps each connection sends first, both replies compared (["HELLO", "3"] in RESP3 mode)


def open_pair(redis_port, kv_port, label):
    r, k = Conn(redis_port), Conn(kv_port)
    for step in PROLOGUE:
        for c in (r, k):
            c.send(encode(step))
        if not same(step, r.reply(), k.reply(), []):
            fail("%s: prologue %r differs" % (label, step))
    return r, k


def run(label, seq, redis_port, kv_port):
    """Sends `seq` to both servers on fresh connections; a step is an argument list (multibulk), bytes (an
    inline command), ("closed",) (both must have closed the connection), ("scan", [options]) or
    ("other", step) (the step sent on a second connection to each server)."""
    r, k = open_pair(redis_port, kv_port, label)
    first = (r, k)
    second = []  # a second connection to each server, opened by the first ("other", ...) step
    ok = True
    try:
        for i, step in enumerate(seq):
            r, k = first
            if isinstance(step, tuple) and step[0] == "other":
                if not second:
                    second.extend(open_pair(redis_port, kv_port, label))
                r, k = second
                step = step[1]
            if isinstance(step, tuple) and step[0] == "closed":
                if not (r.at_eof() and k.at_eof()):
                    fail("%s[%d]: the connection was not closed by both (redis %s, uring-kv %s)"
                         % (label, i, r.closed, k.closed))
                    ok = False
                break
            if isinstance(step, tuple) and step[0] == "scan":
                want, got = scan_all(r, step[1]), scan_all(k, step[1])
                if want != got:
                    fail("%s[%d] SCAN %r: redis %r, uring-kv %r" % (label, i, step[1], want, got))
                    ok = False
                continue
            data = step if isinstance(step, bytes) else encode(step)
            r.send(data)
            k.send(data)
            want = r.reply()
            try:
                got = k.reply()
            except (EOFError, ConnectionResetError):
                fail("%s[%d] %r: uring-kv closed the connection; redis replied %r" % (label, i, step, want[0]))
                return False
            keys = []
            if name_of(step)[0] == "RANDOMKEY":
                r.send(encode(["KEYS", "*"]))
                keys = r.reply()[1]
            if not same(step, want, got, keys):
                fail("%s[%d] %r:\n    redis    %r\n    uring-kv %r" % (label, i, step, want[0], got[0]))
                ok = False
    finally:
        for c in list(first) + second:
            c.close()
    return ok


def pipelinable(seq):
    """Whether `seq` is only commands (argument lists or inline bytes) whose replies need no second look."""
    return all(isinstance(s, (list, bytes)) and name_of(s)[0] != "RANDOMKEY" for s in seq)


def run_pipelined(label, seq, redis_port, kv_port, chunk=64):
    """Sends `seq` to both servers `chunk` commands at a time, each chunk in one write, then compares the
    replies in order: what a pipelining client sees (on several shards, consecutive commands bound for
    another shard go there together)."""
    r, k = open_pair(redis_port, kv_port, label)
    ok = True
    try:
        for at in range(0, len(seq), chunk):
            part = seq[at:at + chunk]
            data = b"".join(s if isinstance(s, bytes) else encode(s) for s in part)
            r.send(data)
            k.send(data)
            for i, step in enumerate(part):
                want = r.reply()
                try:
                    got = k.reply()
                except (EOFError, ConnectionResetError):
                    fail("%s[%d] %r: uring-kv closed the connection; redis replied %r" % (label, at + i, step, want[0]))
                    return False
                if not same(step, want, got, []):
                    fail("%s[%d] %r:\n    redis    %r\n    uring-kv %r" % (label, at + i, step, want[0], got[0]))
                    ok = False
    finally:
        r.close()
        k.close()
    return ok


@contextlib.contextmanager
def both_servers(binary, backend, shards, redis_args=(), kv_args=()):
    """Starts redis-server and uring-kv; yields (redis port, uring-kv port); kills both by pid at the end."""
    tmp = tempfile.mkdtemp(prefix="kv_compat_")
    procs = []
    try:
        redis, redis_port = start_redis(tmp, redis_args)
        procs.append(redis)
        kv, kv_port = start_kv(binary, backend, shards, kv_args)
        procs.append(kv)
        yield redis_port, kv_port
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    binary, backend, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "resp2"
    if mode == "resp3":
        PROLOGUE.append(["HELLO", "3"])
    with both_servers(binary, backend, shards) as (redis_port, kv_port):
        k = Conn(kv_port)
        for step in PROLOGUE:
            k.send(encode(step))
            k.reply()
        k.send(encode(["COMMAND", "LIST"]))
        IMPLEMENTED.update(k.reply()[1])
        k.close()
        total = 0
        for label, seq in cases():
            for port in (redis_port, kv_port):
                c = Conn(port)
                c.send(encode(["FLUSHALL"]))
                c.reply()
                c.close()
            run(label, seq, redis_port, kv_port)
            total += len(seq)
        seed = int(os.environ.get("KV_COMPAT_SEED", "4242"))
        seq = [["FLUSHALL"]] + random_sequence(random.Random(seed), 600)
        if not run("random(seed %d)" % seed, seq, redis_port, kv_port):
            print("replay with KV_COMPAT_SEED=%d" % seed)
        total += len(seq)
        # The same, pipelined: every case that is only commands, then another random sequence.
        for label, case in cases():
            if pipelinable(case):
                run_pipelined("pipelined " + label, [["FLUSHALL"]] + case, redis_port, kv_port)
                total += len(case) + 1
        seq = [["FLUSHALL"]] + random_sequence(random.Random(seed + 1), 2000)
        if not run_pipelined("pipelined random(seed %d)" % (seed + 1), seq, redis_port, kv_port):
            print("replay with KV_COMPAT_SEED=%d" % seed)
        total += len(seq)
        names = sorted(IMPLEMENTED)
        seq = [["COMMAND", "INFO", n] for n in names] + [["COMMAND", "DOCS", n] for n in names]
        run("command entries", seq, redis_port, kv_port)
        total += len(seq) + 2
        k = Conn(kv_port)
        k.send(encode(["COMMAND"]) + encode(["COMMAND", "COUNT"]))
        entries, count = k.reply()[1], k.reply()[1]
        k.close()
        if len(entries) != count or count != len([n for n in names if b"|" not in n]) or count < 60:
            fail("COMMAND COUNT %r, COMMAND's entries %d, top-level names listed %d"
                 % (count, len(entries), len([n for n in names if b"|" not in n])))
        print("compared %d replies with redis-server (%s, %d shards, %s)" % (total, backend, shards, mode))
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("uring-kv compat (%s, %d shards, %s): ok" % (backend, shards, mode))


if __name__ == "__main__":
    main()
