#!/usr/bin/env python3
"""idle_servers.py — memory per idle connection of the sample servers, as the server's RSS growth / connections.

For each server (uring-echo, uring-http, uring-kv) and backend (native, emulated): starts it with one thread
on a free loopback port, with its idle limits off (and --max-connections above N), reads its VmRSS, opens N
connections and does one exchange on each (echo: a byte; http: GET / with keep-alive; kv: PING), so every
connection has read, answered and is idle again with its receive armed, then reads VmRSS again. A second
exchange on every connection checks that all still work. Prints one line per run: RSS before and after,
bytes per connection from the start (fixed costs included: pools, first-touched pages) and the marginal
bytes per connection over the last 90% of them (the RSS read again after the first 10%).

  bench/idle_servers.py [--connections 10000] [--samples build/release/samples]
                        [--servers echo,http,kv] [--backends native,emulated] [--recv leased|copy]
"""
import argparse
import resource
import socket
import subprocess
import sys
import threading

REQUESTS = {
    "echo": (b"x", lambda got: len(got) >= 1),
    "http": (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", lambda got: got.endswith(b"hello\n")),
    "kv": (b"PING\r\n", lambda got: got == b"+PONG\r\n"),
}

# Each server's flags that keep N idle connections open and accepted.
def flags(server, n):
    if server == "echo":
        return ["--idle-timeout", "0"]
    if server == "http":
        return ["--header-timeout", "36000", "--max-connections", str(n + 100)]
    return ["--max-connections", str(n + 100)]


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def exchange(sock, server):
    request, done = REQUESTS[server]
    sock.sendall(request)
    got = b""
    while not done(got):
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError(f"{server}: connection closed after {got!r}")
        got += chunk


def start(binary, server, backend, n, env=None, extra=(), cpu=None):
    """The server on one thread, ready for n idle connections: (its process, its port). The caller ends it.
    `extra`: more flags; `cpu`: the CPU to pin it to (taskset, which execs it: the pid is the server's)."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    proc = subprocess.Popen(
        pin + [binary, "--port", "0", "--threads", "1", "--backend", backend] + flags(server, n) + list(extra),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=raise_nofile, env=env)
    first = proc.stdout.readline().decode()
    if "listening on" not in first:
        proc.terminate()
        proc.wait(timeout=30)
        raise RuntimeError(f"{binary}: {first.strip()}")
    # The rest of its output is drained so that the server never blocks on a full pipe.
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    return proc, int(first.split("listening on ")[1].split()[0].rsplit(":", 1)[1])


def run(binary, server, backend, n, extra=()):
    proc, port = start(binary, server, backend, n, extra=extra)
    try:
        before = rss_kib(proc.pid)
        socks = []
        tenth = max(1, n // 10)
        at_tenth = before
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            exchange(s, server)
            socks.append(s)
            if i + 1 == tenth:
                at_tenth = rss_kib(proc.pid)
        after = rss_kib(proc.pid)
        for s in socks:
            exchange(s, server)
        for s in socks:
            s.close()
        per_conn = (after - before) * 1024 / n
        marginal = (after - at_tenth) * 1024 / (n - tenth) if n > tenth else float("nan")
        print(f"{server:5} {backend:9} {n} idle connections: RSS {before} KiB -> {after} KiB: "
              f"{per_conn:.0f} bytes per connection, {marginal:.0f} marginal", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connections", type=int, default=10000)
    p.add_argument("--samples", default="build/release/samples")
    p.add_argument("--servers", default="echo,http,kv")
    p.add_argument("--backends", default="native,emulated")
    p.add_argument("--recv", choices=["leased", "copy"], help="each server's --recv (default: its own)")
    a = p.parse_args()
    if raise_nofile() < a.connections + 64:
        sys.exit(f"idle_servers.py: RLIMIT_NOFILE's hard limit is below {a.connections + 64}")
    for server in a.servers.split(","):
        for backend in a.backends.split(","):
            run(f"{a.samples}/uring-{server}", server, backend, a.connections,
                ["--recv", a.recv] if a.recv else [])


if __name__ == "__main__":
    main()
