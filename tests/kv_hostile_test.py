#!/usr/bin/env python3
"""kv_hostile_test.py <uring-kv> <native|emulated> <case>: uring-kv against hostile clients, on loopback.

Cases (each starts its own server, with the flags it tests):
  http     an HTTP POST whose body is a command (curl), a request line, "Host:": the connection closes and
           nothing after runs; a flood of them is reported on stderr once
  bare_lf  "*1\\n$4\\nPING\\n" and other line endings that cannot become CRLF: a protocol error and a close
  mget     MGET of one 1 MiB value 1024 times by a client that does not read: the server's peak RSS stays
           under 64 MiB, a reading client gets the whole reply; APPEND and SETRANGE on a value a slow
           client is still being sent leave its reply as it was; --max-output-buffer closes a client whose
           copied reply passes it
  pool     more clients than the receive pool has buffers leave a large reply unread and keep sending:
           a polite client's every round trip is answered within 2 s
  stall    --output-timeout: a client that leaves a reply unread is closed; one reading steadily is not
  idle     --idle-timeout: an idle client, or one dribbling a command, is closed; an active one is not;
           without the flag none is
  maxconn  --max-connections: the client above it is answered "-ERR max number of clients reached" and
           closed; at the open-file limit the default cap refuses the same way instead of leaving clients
           unserved, and --idle-timeout frees the fds that idle clients hold
  fuzz     the cases above, then random and mutated RESP (seeded, bounded in count and time); afterwards
           the server answers PING and GET, its peak RSS stayed under 64 MiB and its fd count is back to
           where it started

Every wait is a poll for a condition with a deadline; servers are killed by pid on every exit path (and
die with this script through PR_SET_PDEATHSIG).
"""
import ctypes
import os
import random
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import kv_compat_test as compat

BINARY, BACKEND, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
RSS_BOUND_KB = 64 * 1024  # the peak RSS a case may reach, whatever its clients do
# A sanitizer's allocator pads every block and keeps freed ones in quarantine: no RSS bound holds for it.
RSS_BOUNDED = not compat.sanitized(BINARY)
failures = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    failures.append(msg)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


def die_with_parent():
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Server:
    def __init__(self, *flags, threads=1, nofile=None):
        self.err = tempfile.TemporaryFile()

        def pre():
            die_with_parent()
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [BINARY, "--port", "0", "--backend", BACKEND, "--threads", str(threads), *flags],
            stdout=subprocess.PIPE, stderr=self.err, preexec_fn=pre)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        line = self.proc.stdout.readline().decode() if ready else ""
        m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(\d+ threads, (\w+) backend\)", line)
        if not m:
            self.kill()
            raise SystemExit("FAIL: no banner from uring-kv %s: %r" % (" ".join(flags), line))
        if m.group(2) != BACKEND:
            self.kill()
            raise SystemExit("FAIL: wrong backend: " + line)
        self.port = int(m.group(1))
        self.pid = self.proc.pid

    def status(self, field):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def stop(self):
        """SIGTERM: the server exits 0 within the deadline."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            check(self.proc.wait(timeout=20) == 0, "exit status after SIGTERM")
        except subprocess.TimeoutExpired:
            fail("no exit within 20 s of SIGTERM")
            self.kill()


def command(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_until_closed(s, deadline_s=10, limit=1 << 30):
    """Everything the server sends until it closes; None if it is still open at the deadline."""
    s.settimeout(0.2)
    got = b""
    until = time.monotonic() + deadline_s
    while time.monotonic() < until and len(got) < limit:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return got
        if not d:
            return got
        got += d
    return None


def read_exactly(s, n, deadline_s=10):
    s.settimeout(deadline_s)
    got = b""
    while len(got) < n:
        d = s.recv(n - len(got))
        if not d:
            break
        got += d
    return got


def roundtrip(srv, *args):
    with srv.connect() as s:
        s.sendall(command(*args))
        s.settimeout(10)
        return s.recv(1 << 20)


def poll(cond, deadline_s=15, step=0.05):
    until = time.monotonic() + deadline_s
    while time.monotonic() < until:
        if cond():
            return True
        time.sleep(step)
    return cond()


def expect_closed(srv, request, reply, what):
    with srv.connect() as s:
        s.sendall(request)
        got = read_until_closed(s)
        check(got is not None, what + ": the connection was left open")
        check(got == reply, "%s: replied %r, expected %r" % (what, got, reply))


def case_http(srv):
    subprocess.run(["curl", "-s", "-m", "5", "--data-binary", "SET pwned yes\r\n",
                    "http://127.0.0.1:%d/" % srv.port], stdout=subprocess.DEVNULL)
    check(roundtrip(srv, "GET", "pwned") == b"$-1\r\n", "the body of an HTTP POST ran")
    expect_closed(srv, b"GET / HTTP/1.1\r\nHost: x\r\n\r\nSET pwned yes\r\n", b"", "an HTTP GET")
    expect_closed(srv, b"Host: x\r\nSET pwned yes\r\n", b"", "Host:")
    expect_closed(srv, command("POST", "x") + command("SET", "pwned", "yes"), b"", "a multibulk POST")
    check(roundtrip(srv, "GET", "pwned") == b"$-1\r\n", "a command after an HTTP line ran")
    for _ in range(50):
        expect_closed(srv, b"POST / HTTP/1.1\r\n", b"", "a flood of POSTs")
    check(roundtrip(srv, "PING") == b"+PONG\r\n", "PING after the HTTP requests")


def case_bare_lf(srv):
    expect_closed(srv, b"*1\n$4\nPING\n", b"-ERR Protocol error: invalid multibulk length\r\n", "*1 LF")
    expect_closed(srv, b"*1\r\n$4\nPING\n", b"-ERR Protocol error: invalid bulk length\r\n", "$4 LF")
    expect_closed(srv, b"*1\r\n$4\r\nPING\n", b"-ERR Protocol error: expected CRLF after bulk string\r\n",
                  "PING LF")
    expect_closed(srv, b"PING\r\n*1\n", b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n",
                  "a reply, then the error")


BIG = 1024 * 1024


def mget_big(n):
    return command("MGET", *(["big"] * n))


def expected_mget_size(n, size=BIG):
    return len(b"*%d\r\n" % n) + n * (len(b"$%d\r\n" % size) + size + 2)


def read_mget(s, n, value):
    """Reads an MGET reply of n copies of `value`, checking every byte as it comes; True if whole and right."""
    head = b"$%d\r\n" % len(value) + value + b"\r\n"
    want = b"*%d\r\n" % n
    s.settimeout(30)
    ok = read_exactly(s, len(want)) == want
    for _ in range(n):
        ok = ok and read_exactly(s, len(head), 30) == head
        if not ok:
            break
    return ok


def case_mget(srv):
    value = bytes(random.Random(1).getrandbits(8) for _ in range(BIG))
    check(roundtrip(srv, "SET", "big", value) == b"+OK\r\n", "SET big")
    idle = srv.connect()
    idle.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    idle.sendall(mget_big(1024))  # and never read
    # The server holds the reply for the one that does not read while another reads its own, whole.
    with srv.connect() as s:
        s.sendall(mget_big(1024))
        check(read_mget(s, 1024, value), "a reading client's 1 GiB MGET reply is not whole and right")
        s.sendall(command("GET", "big"))
        check(read_exactly(s, len(value) + 12) == b"$1048576\r\n" + value + b"\r\n", "GET big")
    hwm = srv.status("VmHWM")
    check(hwm < RSS_BOUND_KB or not RSS_BOUNDED,
          "peak RSS %d kB with an unread 1 GiB MGET reply (bound %d kB)" % (hwm, RSS_BOUND_KB))
    print("mget: peak RSS %d kB, now %d kB" % (hwm, srv.status("VmRSS")))
    idle.close()
    check(roundtrip(srv, "PING") == b"+PONG\r\n", "PING afterwards")
    case_change_while_sent(srv, value)


def keyed_commands(srv):
    info = roundtrip(srv, "INFO")
    m = re.search(rb"\r\nkeyed_commands:(\d+)\r\n", info)
    return int(m.group(1)) if m else -1


def case_change_while_sent(srv, value):
    """APPEND and SETRANGE change a value in place only when no reply holds it: a client still being sent
    the value gets it as it was when its MGET ran."""
    before = keyed_commands(srv)
    slow = srv.connect()
    slow.sendall(mget_big(64))  # 64 MiB: more than the socket buffers take, so the reply holds the value
    check(poll(lambda: keyed_commands(srv) > before), "the slow client's MGET never ran")
    check(roundtrip(srv, "APPEND", "big", "x") == b":%d\r\n" % (BIG + 1), "APPEND big")
    check(roundtrip(srv, "SETRANGE", "big", "0", "ZZ") == b":%d\r\n" % (BIG + 1), "SETRANGE big")
    check(read_mget(slow, 64, value), "a value changed while a reply was sending it")
    slow.close()
    check(roundtrip(srv, "GETRANGE", "big", "0", "2") == b"$3\r\nZZ" + value[2:3] + b"\r\n", "GETRANGE big")


def case_mget_cap(srv):
    """--max-output-buffer 4096: a value under 16 KiB is copied into the reply, and 8 KiB passes the cap."""
    check(roundtrip(srv, "SET", "v", "x" * 8192) == b"+OK\r\n", "SET v")
    expect_closed(srv, command("GET", "v"), b"", "a copied reply past --max-output-buffer")
    check(roundtrip(srv, "MGET", "v", "v") == b"", "an MGET past --max-output-buffer")
    check(roundtrip(srv, "SET", "w", "x" * 1000) == b"+OK\r\n", "SET w")
    reply = roundtrip(srv, "MGET", *(["w"] * 64))
    check(reply.startswith(b"*64\r\n"), "an MGET that never holds 4 KiB copied is answered")
    check(roundtrip(srv, "GET", "big") == b"$-1\r\n", "the server goes on")


def case_stall(srv):
    base = srv.fds()
    check(roundtrip(srv, "SET", "big", b"v" * BIG) == b"+OK\r\n", "SET big")
    check(poll(lambda: srv.fds() == base), "a closed client's fd stays open")
    idle = srv.connect()
    idle.sendall(mget_big(64))  # 64 MiB that is never read
    check(poll(lambda: srv.fds() > base), "the unread client's connection never showed")
    check(poll(lambda: srv.fds() == base, 20), "a client that reads nothing is still connected after the "
                                                 "output timeout (fds %d, baseline %d)" % (srv.fds(), base))
    idle.close()
    # A client taking its reply steadily, each piece well within the timeout, gets all of it.
    with srv.connect() as s:
        s.sendall(mget_big(16))
        want = expected_mget_size(16)
        got = 0
        s.settimeout(10)
        while got < want:
            d = s.recv(256 * 1024)
            if not d:
                break
            got += len(d)
            time.sleep(0.02)
        check(got == want, "a slow but steady reader was cut off at %d of %d bytes" % (got, want))
    check("unread past --output-timeout" in srv.stderr(), "the stalled client was not reported")


def case_pool(srv, hogs=320):
    """More clients than the receive pool has buffers (256 per thread) each leave a large reply unread and
    keep sending: each holds what it sent last, which may be a pool buffer. A polite client is still
    answered at once, every time, and every hog is served once it reads."""
    check(roundtrip(srv, "SET", "big", b"v" * (64 * 1024)) == b"+OK\r\n", "SET big")
    burst = command("GET", "big") * 64 + b"PING\r\n" * 8192  # 4 MiB of replies, then more input
    socks = []
    try:
        for _ in range(hogs):
            h = srv.connect()
            h.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            h.setblocking(False)
            try:
                h.send(burst)
            except BlockingIOError:
                pass
            socks.append(h)
        with srv.connect() as polite:
            for i in range(20):
                start = time.monotonic()
                polite.sendall(command("SET", "k%d" % i, "v") + command("GET", "k%d" % i))
                got = read_exactly(polite, len(b"+OK\r\n$1\r\nv\r\n"), deadline_s=10)
                took = time.monotonic() - start
                check(got == b"+OK\r\n$1\r\nv\r\n", "the polite client's round trip %d gave %r" % (i, got))
                check(took < 2, "the polite client waited %.1f s for round trip %d among %d hogs" % (took, i, hogs))
                if got != b"+OK\r\n$1\r\nv\r\n":
                    break
        check(srv.status("VmHWM") < RSS_BOUND_KB or not RSS_BOUNDED, "peak RSS %d KiB" % srv.status("VmHWM"))
    finally:
        for h in socks:
            h.close()
    # A client that pipelines as the hogs do but reads: every write to it pauses receiving (each reply is
    # larger than a socket surely takes), and every reply still comes, in order, nothing lost.
    with srv.connect() as c:
        request = command("GET", "big") * 64 + command("INCR", "n") * 2000
        sender = threading.Thread(target=c.sendall, args=(request,))
        sender.start()
        reply = b"$65536\r\n" + b"v" * 65536 + b"\r\n"
        want = reply * 64 + b"".join(b":%d\r\n" % i for i in range(1, 2001))
        got = read_exactly(c, len(want), deadline_s=30)
        sender.join()
        check(got == want, "a slow reader's replies: %d of %d bytes, first difference at %s" % (
            len(got), len(want), next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), "-")))


def case_idle(srv_idle, srv_default):
    with srv_idle.connect() as quiet, srv_idle.connect() as dribble, srv_idle.connect() as busy:
        busy.settimeout(10)
        dribbled = 0
        for i in range(50):  # 5 s: the idle ones are closed after 2 s, the busy one answers every command
            busy.sendall(b"PING\r\n")
            check(busy.recv(100) == b"+PONG\r\n", "an active client was closed by --idle-timeout")
            if dribbled < 10:
                try:
                    dribble.sendall(b"*1\r\n$4\r\nPING"[dribbled:dribbled + 1])
                    dribbled += 1
                except OSError:
                    dribbled = 99
            time.sleep(0.1)
        check(read_until_closed(quiet, 10) == b"", "an idle client is open after --idle-timeout 2")
        check(read_until_closed(dribble, 10) == b"", "a client dribbling a command is open after --idle-timeout 2")
    with srv_default.connect() as quiet:
        quiet.settimeout(2.5)
        try:
            d = quiet.recv(100)
            fail("without --idle-timeout an idle client got %r" % d)
        except socket.timeout:
            pass
        quiet.sendall(b"PING\r\n")
        quiet.settimeout(10)
        check(quiet.recv(100) == b"+PONG\r\n", "without --idle-timeout an idle client was closed")


REFUSED = b"-ERR max number of clients reached\r\n"


def open_clients(srv, n):
    """n connections, each answered PONG or refused; returns (served sockets, refused count, silent count).
    Stops at the first client left unanswered (silent) for 10 s."""
    served, refused, silent = [], 0, 0
    for _ in range(n):
        s = srv.connect()
        s.sendall(b"PING\r\n")
        s.settimeout(10)
        try:
            d = s.recv(100)
        except (socket.timeout, ConnectionResetError):
            d = None
        if d == b"+PONG\r\n":
            served.append(s)
            continue
        if d == REFUSED and read_until_closed(s, 10) is not None:
            refused += 1
        else:
            silent += 1
            s.close()
            break
        s.close()
    return served, refused, silent


def case_maxconn(srv_cap, srv_fds, srv_fds_idle):
    served, refused, silent = open_clients(srv_cap, 6)
    check((len(served), refused, silent) == (4, 2, 0),
          "--max-connections 4: %d served, %d refused, %d silent" % (len(served), refused, silent))
    served.pop().close()
    check(poll(lambda: open_clients(srv_cap, 1)[0] != []), "a slot freed by a closing client is not reused")
    for s in served:
        s.close()
    check("max number of clients reached" in srv_cap.stderr(), "refusals not reported")
    # Open-file limit 64: the default cap is 64 - 32 = 32 clients; the rest, past the fd limit too, are told
    # rather than left in the backlog.
    served, refused, silent = open_clients(srv_fds, 80)
    check(len(served) == 32 and refused == 48 and silent == 0,
          "at the fd limit: %d served, %d refused, %d silent" % (len(served), refused, silent))
    for s in served:
        s.close()
    # With --idle-timeout, the fds idle clients hold come back and new clients are served.
    served, refused, silent = open_clients(srv_fds_idle, 32)
    check(len(served) == 32, "with --idle-timeout: %d of 32 served" % len(served))
    check(poll(lambda: open_clients(srv_fds_idle, 1)[0] != [], 20), "idle clients were never closed")
    for s in served:
        s.close()


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if not data:
            data += bytes([rng.randrange(256)])
        i = rng.randrange(len(data))
        if op == 0:
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            data.insert(i, rng.choice(b"\r\n*$-0123456789: "))
        elif op == 2:
            del data[i]
        elif op == 3:
            data = data[:i]
        elif op == 4:
            data[i:i] = rng.choice([b"\n", b"\r", b"*1\n", b"$-1\r\n", b"*99999999\r\n", b"$1048577\r\n",
                                    b"POST / HTTP/1.1\r\n", b"*0\r\n", b"\x00\xff"])
        else:
            data = data + data[:rng.randrange(len(data) + 1)]
    return bytes(data)


def random_request(rng):
    names = ["GET", "SET", "MGET", "MSET", "DEL", "EXISTS", "INCR", "INCRBY", "EXPIRE", "TTL", "PING", "ECHO",
             "INFO", "DBSIZE", "CONFIG", "COMMAND", "SELECT", "CLIENT", "QUIT", "post", "Host:", "x" * 40,
             "GETEX", "GETDEL", "GETSET", "SETNX", "SETEX", "MSETNX", "APPEND", "SETRANGE", "GETRANGE",
             "INCRBYFLOAT", "RENAME", "RENAMENX", "COPY", "TYPE", "PERSIST", "EXPIREAT", "PEXPIRETIME", "KEYS",
             "SCAN", "RANDOMKEY", "TIME", "FLUSHDB"]
    parts = []
    for _ in range(rng.randint(1, 4)):
        args = [rng.choice(names)] + ["k%d" % rng.randrange(20) if rng.random() < 0.6 else
                                      rng.choice(["0", "-1", "100000", "EX", "PX", "GET", "NX", "DB", "15", "*",
                                                  "COUNT", "MATCH", "[a-", "\"q u\"", "'"])
                                      if rng.random() < 0.5 else
                                      bytes(rng.getrandbits(8) for _ in range(rng.randrange(64)))
                                      for _ in range(rng.randrange(5))]
        if rng.random() < 0.3:
            parts.append(b" ".join(a if isinstance(a, bytes) else a.encode() for a in args) + b"\r\n")
        else:
            parts.append(command(*args))
    req = b"".join(parts)
    if rng.random() < 0.7:
        req = mutate(rng, req)
    if rng.random() < 0.1:
        req = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 2048)))
    return req


def case_fuzz(srv):
    base = srv.fds()
    case_http(srv)
    case_bare_lf(srv)
    check(roundtrip(srv, "SET", "big", b"b" * BIG) == b"+OK\r\n", "SET big")
    idle = srv.connect()
    idle.sendall(mget_big(1024))
    seed = int(os.environ.get("KV_FUZZ_SEED", "7919"))
    rng = random.Random(seed)
    until = time.monotonic() + 25
    sent = 0
    for i in range(4000):
        if time.monotonic() > until:
            break
        with srv.connect() as s:
            req = random_request(rng)
            try:
                s.sendall(req)
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # closed already (a refusal before everything was sent)
            sent += 1
            # The server answers what it can and closes at the end of the stream (or before): never hangs.
            if read_until_closed(s, 10, 64 << 20) is None:
                fail("seed %d, request %d left open: %r" % (seed, i, req[:200]))
                break
    print("fuzz: %d requests (seed %d)" % (sent, seed))
    idle.close()
    check(roundtrip(srv, "PING") == b"+PONG\r\n", "PING after the fuzzing")
    check(roundtrip(srv, "SET", "after", "ok") == b"+OK\r\n" and roundtrip(srv, "GET", "after") == b"$2\r\nok\r\n",
          "SET/GET after the fuzzing")
    hwm = srv.status("VmHWM")
    check(hwm < RSS_BOUND_KB or not RSS_BOUNDED, "peak RSS %d kB (bound %d kB)" % (hwm, RSS_BOUND_KB))
    check(poll(lambda: srv.fds() == base, 20), "fds %d after the fuzzing, %d before" % (srv.fds(), base))
    print("fuzz: peak RSS %d kB, fds %d (baseline %d)" % (hwm, srv.fds(), base))


def main():
    servers = []

    def start(*flags, **kw):
        srv = Server(*flags, **kw)
        servers.append(srv)
        return srv

    try:
        if CASE == "http":
            srv = start()
            case_http(srv)
            log = srv.stderr()
            check(log.count("cross-protocol") == 1, "HTTP closes reported %d times, not once: %s"
                  % (log.count("cross-protocol"), log))
        elif CASE == "bare_lf":
            case_bare_lf(start())
        elif CASE == "mget":
            case_mget(start(threads=2))
            srv = start("--max-output-buffer", "4096")
            case_mget_cap(srv)
            check("passed --max-output-buffer" in srv.stderr(), "the closed client was not reported")
        elif CASE == "pool":
            case_pool(start())
        elif CASE == "stall":
            case_stall(start("--output-timeout", "1"))
        elif CASE == "idle":
            case_idle(start("--idle-timeout", "2"), start())
        elif CASE == "maxconn":
            case_maxconn(start("--max-connections", "4"), start(nofile=64),
                         start("--idle-timeout", "1", nofile=64))
        elif CASE == "fuzz":
            case_fuzz(start(threads=2))
        else:
            raise SystemExit("unknown case " + CASE)
        for srv in servers:
            srv.stop()
    finally:
        for srv in servers:
            srv.kill()
            if failures or os.environ.get("KV_SHOW_STDERR"):
                print("uring-kv stderr:\n" + srv.stderr())
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("uring-kv hostile %s (%s): ok" % (CASE, BACKEND))


main()
