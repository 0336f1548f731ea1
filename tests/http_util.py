"""Helpers for the uring-http tests in python3: start the server, talk raw HTTP, watch its memory and fds.

Every wait is bounded (a deadline, polled), every server started is killed by its pid on exit.
"""
import os
import select
import signal
import socket
import subprocess
import sys
import time


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


class Server:
    """uring-http on a free port: `with Server(binary, backend, root, extra_args) as srv:`."""

    def __init__(self, binary, backend, root, args=(), wrapper=()):
        self.proc = subprocess.Popen([*wrapper, binary, "--port", "0", "--backend", backend, "--root", root, *args],
                                     stdout=subprocess.PIPE, stderr=sys.stderr)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        if not ready:
            self.kill()
            fail("no banner within 10 s")
        banner = self.proc.stdout.readline().decode()
        if "listening on 127.0.0.1:" not in banner or backend + " backend" not in banner:
            self.kill()
            fail("banner: " + banner)
        self.port = int(banner.split("127.0.0.1:")[1].split()[0])
        self.pid = self.proc.pid

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        """SIGTERM: the server must drain and exit 0 within 30 s (under a sanitizer, its leak check runs)."""
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("no exit within 30 s of SIGTERM")
        if code != 0:
            fail("exit status %d after SIGTERM" % code)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()

    def status(self, field):
        """A field of /proc/PID/status in bytes (VmRSS, VmHWM)."""
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        fail("no %s in /proc/%d/status" % (field, self.pid))

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def wait_fds(self, baseline, deadline_s=30):
        """Polls until the server holds no more fds than `baseline`; fails after the deadline."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.fds() <= baseline:
                return
            time.sleep(0.05)
        fail("fds stayed at %d, baseline %d" % (self.fds(), baseline))

    def connect(self, timeout=10):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return s


class Reader:
    """Reads HTTP/1.1 responses (Content-Length framed) from a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _more(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def response(self, head_only=False):
        """(status, headers dict lowercased, body) of the next response; None at end of stream first."""
        while b"\r\n\r\n" not in self.buf:
            if not self._more():
                if self.buf:
                    fail("stream ended inside a head: %r" % bytes(self.buf[:200]))
                return None
            if b"\r\n\r\n" not in self.buf and len(self.buf) > 64 * 1024:
                fail("head too long: %r" % bytes(self.buf[:200]))
        end = self.buf.index(b"\r\n\r\n")
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[:end + 4]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or parts[0] != "HTTP/1.1" or not parts[1].isdigit():
            fail("bad status line: %r" % lines[0])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head_only else int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            if not self._more():
                fail("stream ended inside a body: %d of %d bytes" % (len(self.buf), length))
        body = bytes(self.buf[:length])
        del self.buf[:length]
        return int(parts[1]), headers, body

    def skip_body(self, length, expect=None):
        """Reads `length` body bytes without keeping them (compared with `expect` if given)."""
        view = memoryview(expect) if expect is not None else None
        done = 0
        take = min(len(self.buf), length)
        if view is not None and self.buf[:take] != view[:take]:
            fail("body differs in its first %d bytes" % take)
        del self.buf[:take]
        done = take
        chunk = bytearray(1 << 20)
        while done < length:
            n = self.sock.recv_into(chunk, min(len(chunk), length - done))
            if n == 0:
                fail("stream ended inside a body: %d of %d bytes" % (done, length))
            if view is not None and chunk[:n] != view[done:done + n]:
                fail("body differs at %d" % done)
            done += n


def exchange(port, data, timeout=10, shut=True):
    """Sends `data` on a new connection (then shuts down the write side unless shut=False) and returns
    every byte the server sends until it closes (or `timeout` passes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = bytearray()
    try:
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer early and close
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    return bytes(out)


def status_of(reply):
    """The status code of the first response in `reply`, or None."""
    if not reply.startswith(b"HTTP/1.1 "):
        return None
    return int(reply[9:12])
