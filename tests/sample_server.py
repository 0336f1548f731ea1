"""sample_server.py: what the sample-server test scripts share (tests/server_limits_test.py,
tests/echo_hostile_test.py): a server run as a child with its stderr collected, the check() that records
failures, and the fd and RSS figures from /proc."""
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time

FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print("FAIL: " + what, flush=True)
    return ok


class Server:
    """The sample as a child process; stderr is collected line by line with arrival times."""

    def __init__(self, argv, nofile=None):
        # The fd limit is set before the program starts: a multishot accept armed earlier keeps the limit
        # it was armed under.
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit)
        self.lines = []  # (monotonic time, stderr line)
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        self.banner = self._first_line(15.0)
        self.port = None
        self.peak_rss = 0
        if "127.0.0.1:" in self.banner:
            self.port = int(self.banner.split("127.0.0.1:")[1].split()[0])

    def _read_stderr(self):
        for raw in self.proc.stderr:
            with self.lock:
                self.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    def _first_line(self, limit):
        ready, _, _ = select.select([self.proc.stdout], [], [], limit)
        return self.proc.stdout.readline().decode(errors="replace").rstrip("\n") if ready else ""

    def stderr_lines(self):
        with self.lock:
            return list(self.lines)

    def stderr_text(self):
        return "\n".join(line for _, line in self.stderr_lines())

    def wait_for_stderr(self, needle, limit):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if needle in self.stderr_text():
                return True
            time.sleep(0.05)
        return False

    def wait(self, limit):
        """The exit status, or None if it is still running after `limit` seconds."""
        try:
            return self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            return None

    def finish(self):
        """Waits for stderr's end once the process is gone (the reader thread then has every line)."""
        self.reader.join(timeout=5)

    def fds(self):
        """How many fds the server has open (/proc/PID/fd)."""
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def rss(self):
        """Its resident set size in bytes (/proc/PID/status VmRSS), also kept as peak_rss."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    self.peak_rss = max(self.peak_rss, int(line.split()[1]) * 1024)
                    return int(line.split()[1]) * 1024
        return 0

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def connect(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


def report():
    """Ends the script: status 1 naming the number of failed checks, else "ok"."""
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        sys.exit(1)
    print("ok")
