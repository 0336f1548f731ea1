#!/usr/bin/env python3
"""server_limits_test.py PROGRAM echo|http|fiber-echo BACKEND CHECK [--seccomp-exec HELPER]

Runs uring-echo, uring-http or uring-fiber-echo (PROGRAM, KIND; the fiber echo for emfile and unavailable
only) on a free port with --backend BACKEND and checks one of the
shared server skeleton's limits (samples/server.hpp), as a client sees them:

  drain        a client that never reads, with a large reply pending, does not hold the process after
               SIGTERM: it exits 0 within --drain-timeout plus a margin, and says it closed the connection.
  fin          (echo) 200 connections each send a message after a first round trip and SIGTERM comes before
               they read: every one gets its message back, then an orderly end of stream (no reset).
  emfile       with RLIMIT_NOFILE lowered on the running server and clients holding every fd, the accept
               failures are logged at most about once a second, and once the clients leave a new one is served.
  unavailable  (BACKEND is ignored) io_uring_setup blocked by seccomp (HELPER, ENOSYS and EPERM), or refused
               for want of locked memory (setpriv without CAP_IPC_LOCK, prlimit --memlock=0): --backend
               native exits non-zero at once with the reason and never says "listening"; --backend auto
               serves on the emulated backend and says why on stderr; --backend emulated serves quietly.

Every wait is bounded; the servers are killed (by pid) on every exit path.
"""
import argparse
import fcntl
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time

from sample_server import FAILURES, Server, check, connect, report

def recv_exactly(s, n, limit):
    """Up to n bytes; fewer when the stream ends, resets or `limit` seconds pass. Returns (bytes, why)."""
    got = bytearray()
    deadline = time.monotonic() + limit
    while len(got) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(got), "timeout"
        s.settimeout(left)
        try:
            chunk = s.recv(min(65536, n - len(got)))
        except socket.timeout:
            return bytes(got), "timeout"
        except ConnectionResetError:
            return bytes(got), "reset"
        if not chunk:
            return bytes(got), "end"
        got += chunk
    return bytes(got), "ok"


def served(kind, port):
    """True when a new client gets its answer (echo: its bytes back; http: GET / -> hello)."""
    try:
        with connect(port) as s:
            if kind != "http":
                s.sendall(b"still serving")
                data, _ = recv_exactly(s, 13, 10.0)
                return data == b"still serving"
            s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            data, _ = recv_exactly(s, 1 << 16, 10.0)
            return data.startswith(b"HTTP/1.1 200") and data.endswith(b"hello\n")
    except OSError as e:
        print("client: %s" % e)
        return False


def start(args, kind, backend, extra, root, nofile=None):
    argv = [args.program, "--port", "0", "--backend", backend] + args.server_arg + extra
    if kind == "http":
        argv += ["--root", root]
    server = Server(argv, nofile)
    if not check(server.port is not None, "no banner: %r; stderr: %s" % (server.banner, server.stderr_text())):
        server.kill()
        sys.exit(1)
    return server


def unread_bytes(s):
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def check_drain(args, root):
    drain = 1.0
    margin = 10.0  # generous: a loaded 2-core machine; without the deadline it takes 20 s or forever
    extra = ["--drain-timeout", str(drain)]
    if args.kind == "echo":
        extra += ["--idle-timeout", "0"]
    server = start(args, args.kind, args.backend, extra, root)
    try:
        hog = connect(server.port)
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        if args.kind == "echo":
            # Send until nothing more goes (the server's echo is stuck on our full receive window).
            hog.setblocking(False)
            block = b"h" * 65536
            sent = 0
            while sent < (256 << 20):
                _, writable, _ = select.select([], [hog], [], 1.0)
                if not writable:
                    break
                try:
                    sent += hog.send(block)
                except BlockingIOError:
                    pass
            check(sent < (256 << 20), "the echo never pushed back (sent %d bytes)" % sent)
        else:
            hog.sendall(b"GET /file/big HTTP/1.1\r\nHost: t\r\n\r\n")
            # The reply (32 MiB) cannot fit in the socket buffers: wait until it has started to arrive.
            deadline = time.monotonic() + 10
            while unread_bytes(hog) == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            check(unread_bytes(hog) > 0, "the reply never started")
        began = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        status = server.wait(drain + margin)
        took = time.monotonic() - began
        print("exit %s after %.2f s (drain timeout %.1f s)" % (status, took, drain))
        check(status == 0, "exit status %s within %.1f s of SIGTERM" % (status, drain + margin))
        check(took >= drain * 0.8, "exited after %.2f s, before the drain timeout" % took)
        server.finish()
        check("still open after" in server.stderr_text(), "no drain deadline line: " + server.stderr_text())
        hog.close()
    finally:
        server.kill()


def check_fin(args, root):
    count = 200
    server = start(args, "echo", args.backend, [], root)
    clients = []
    try:
        for i in range(count):
            s = connect(server.port)
            first = b"first %d;" % i
            s.sendall(first)
            data, why = recv_exactly(s, len(first), 10.0)
            if not check(data == first, "connection %d: first round trip: %r (%s)" % (i, data, why)):
                return
            clients.append(s)
        # Sent while the server is stopped, so received by its kernel before the drain but not yet read by
        # the server; SIGTERM is pending when it continues.
        server.proc.send_signal(signal.SIGSTOP)
        messages = []
        for i, s in enumerate(clients):
            m = (b"second %d:" % i) + b"x" * (i * 997 % 100000)
            s.sendall(m)
            messages.append(m)
        server.proc.send_signal(signal.SIGTERM)
        server.proc.send_signal(signal.SIGCONT)
        endings = {}
        for i, s in enumerate(clients):
            data, why = recv_exactly(s, len(messages[i]) + 1, 15.0)
            if data != messages[i]:
                check(False, "connection %d: got %d of %d bytes back (%s)" % (i, len(data), len(messages[i]), why))
            endings[why] = endings.get(why, 0) + 1
        print("endings after the echo: %s" % endings)
        check(endings.get("end", 0) == count, "not every connection ended with a FIN: %s" % endings)
        check(server.wait(15) == 0, "exit status after SIGTERM")
    finally:
        for s in clients:
            s.close()
        server.kill()


def check_emfile(args, root):
    limit = 40
    server = start(args, args.kind, args.backend, [], root, nofile=limit)
    clients = []
    try:
        pid = server.proc.pid
        baseline = server.fds()
        check(baseline < limit - 4, "%d fds open at start, limit %d" % (baseline, limit))
        for _ in range(limit + 20):  # the ones past the limit wait in the listener's backlog
            clients.append(connect(server.port))
        check(server.wait_for_stderr("Too many open files", 15), "accept never failed: " + server.stderr_text())
        window = 4.0
        start_at = time.monotonic()
        time.sleep(window)  # the window measured, not a synchronisation
        in_window = [l for t, l in server.stderr_lines() if start_at <= t < start_at + window]
        print("%d stderr lines in %.0f s while out of fds; the last: %r" % (len(in_window), window,
                                                                          in_window[-1] if in_window else None))
        check(len(in_window) <= window + 2, "%d lines in %.0f s: not rate-limited" % (len(in_window), window))
        check("repeats suppressed" in server.stderr_text(), "no count of suppressed repeats: %r" % in_window)
        for s in clients:
            s.close()
        clients = []
        check(served(args.kind, server.port), "a new client is not served once fds are back")
        deadline = time.monotonic() + 15
        while server.fds() > baseline and time.monotonic() < deadline:
            time.sleep(0.05)
        check(server.fds() == baseline, "fds: %d, baseline %d" % (server.fds(), baseline))
        server.proc.send_signal(signal.SIGTERM)
        check(server.wait(15) == 0, "exit status after SIGTERM")
    finally:
        for s in clients:
            s.close()
        server.kill()


def check_unavailable(args, root):
    if not args.seccomp_exec:
        sys.exit("unavailable: --seccomp-exec HELPER is required")
    extra = ["--root", root] if args.kind == "http" else []
    ways = [("ENOSYS", [args.seccomp_exec, "ENOSYS"]), ("EPERM", [args.seccomp_exec, "EPERM"])]
    release = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    charged = release < (5, 12) or release >= (6, 13)  # kernels that charge rings to RLIMIT_MEMLOCK
    if charged and shutil.which("setpriv") and shutil.which("prlimit"):
        # No CAP_IPC_LOCK and no locked memory: the ring's memory is refused (kernels before 5.12, 6.13+).
        ways.append(("ENOMEM", ["setpriv", "--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock", "prlimit",
                                "--memlock=0:0", "--"]))
    else:
        print("the locked-memory case is skipped (kernel %s, or setpriv/prlimit missing)" % os.uname().release)
    for err, wrapper in ways:
        # Demanded natively: refused at start, with the reason, and no "listening".
        argv = wrapper + [args.program, "--port", "0", "--backend", "native"] + extra
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=20, text=True)
            print("native under %s: exit %d, stderr %r" % (err, proc.returncode, proc.stderr.strip()))
            check(proc.returncode not in (0, 126, 127), "%s native: exit %d" % (err, proc.returncode))
            check("listening" not in proc.stdout, "%s native: said %r" % (err, proc.stdout))
            check("io_uring_setup: " + err in proc.stderr, "%s native: no reason: %r" % (err, proc.stderr))
        except subprocess.TimeoutExpired as e:
            check(False, "%s native: still running after 20 s; stdout %r" % (err, e.stdout))
        # auto: the emulated backend, and why; emulated: the same, nothing to explain.
        for backend, says in (("auto", "backend: emulated, because io_uring_setup: " + err), ("emulated", None)):
            server = Server(wrapper + [args.program, "--port", "0", "--backend", backend] + extra)
            try:
                check("emulated backend" in server.banner, "%s %s: banner %r" % (err, backend, server.banner))
                if server.port is not None:
                    check(served(args.kind, server.port), "%s %s: not served" % (err, backend))
                server.proc.send_signal(signal.SIGTERM)
                check(server.wait(15) == 0, "%s %s: exit status after SIGTERM" % (err, backend))
                server.finish()
                text = server.stderr_text()
                print("%s %s: stderr %r" % (err, backend, text))
                if says:
                    check(says in text, "%s %s: does not say why: %r" % (err, backend, text))
                else:
                    check("because" not in text, "%s %s: explains a choice not made: %r" % (err, backend, text))
            finally:
                server.kill()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("program")
    p.add_argument("kind", choices=["echo", "http", "fiber-echo"])
    p.add_argument("backend", choices=["native", "emulated"])
    p.add_argument("check", choices=["drain", "fin", "emfile", "unavailable"])
    p.add_argument("--seccomp-exec")
    p.add_argument("--server-arg", action="append", default=[], help="passed on to the server (repeatable)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as root:
        with open(os.path.join(root, "big"), "wb") as f:
            f.write(b"b" * (32 << 20))
        {"drain": check_drain, "fin": check_fin, "emfile": check_emfile, "unavailable": check_unavailable}[args.check](
            args, root)
    report()


if __name__ == "__main__":
    main()
