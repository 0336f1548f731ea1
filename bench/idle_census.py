#!/usr/bin/env python3
"""idle_census.py — what each idle connection of a sample server holds on the heap, block by block.

Starts the server as idle_servers.py does, with bench/live_allocs.cpp preloaded (it keeps every live heap
block with its size and the frames that allocated it, and writes them out on SIGUSR2), takes a census
after one warm connection and another after N more idle ones, and prints the difference per connection:
bytes, count x size of the blocks, and the allocating functions (addr2line: a coroutine started from
an inlined call is named for the function it was inlined into, as serve_leased's frame is echo_handler's).

  g++ -O2 -shared -fPIC -o build/live_allocs.so bench/live_allocs.cpp
  bench/idle_census.py --server echo [--backend native] [--connections 2000]
                       [--samples build/release/samples] [--shim build/live_allocs.so]
"""
import argparse
import collections
import os
import signal
import socket
import subprocess
import sys
import tempfile

import idle_servers


def symbol(frame, cache={}):
    if frame not in cache:
        module, offset = frame.rsplit("+", 1)
        out = subprocess.run(["addr2line", "-f", "-C", "-e", module, offset], capture_output=True, text=True)
        cache[frame] = out.stdout.split("\n")[0][:110] or frame
    return cache[frame]


def census(proc, path):
    """Live blocks by (size, the first three frames outside the allocator)."""
    if os.path.exists(path):
        os.remove(path)
    proc.send_signal(signal.SIGUSR2)
    while not os.path.exists(path):  # the shim renames the finished file into place
        if proc.poll() is not None:
            raise RuntimeError("the server ended")
        os.sched_yield()
    blocks = collections.Counter()
    with open(path) as f:
        for line in f:
            size, *frames = line.split()
            names = tuple(symbol(x) for x in frames if "live_allocs" not in x and "libstdc++" not in x)[:3]
            blocks[(int(size), names)] += 1
    return blocks


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", choices=sorted(idle_servers.REQUESTS), required=True)
    p.add_argument("--backend", default="native")
    p.add_argument("--connections", type=int, default=2000)
    p.add_argument("--samples", default="build/release/samples")
    p.add_argument("--shim", default="build/live_allocs.so")
    p.add_argument("--recv", choices=["leased", "copy"], help="the server's --recv (default: its own)")
    a = p.parse_args()
    n = a.connections
    if idle_servers.raise_nofile() < n + 64:
        sys.exit(f"idle_census.py: RLIMIT_NOFILE's hard limit is below {n + 64}")
    out = os.path.join(tempfile.mkdtemp(), "live_allocs.txt")
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(a.shim), LIVE_ALLOCS_OUT=out)
    proc, port = idle_servers.start(f"{a.samples}/uring-{a.server}", a.server, a.backend, n, env,
                                    ["--recv", a.recv] if a.recv else [])
    try:
        socks = [socket.create_connection(("127.0.0.1", port))]
        idle_servers.exchange(socks[0], a.server)
        before = census(proc, out)
        for _ in range(n):
            socks.append(socket.create_connection(("127.0.0.1", port)))
            idle_servers.exchange(socks[-1], a.server)
        after = census(proc, out)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    total = 0.0
    grown = {k: after[k] - before[k] for k in set(before) | set(after) if after[k] != before[k]}
    for (size, names), count in sorted(grown.items(), key=lambda kv: -kv[0][0] * kv[1]):
        per = size * count / n
        total += per
        if abs(per) >= 4:
            print(f"{per:8.1f} B/conn  {count:6d} x {size:6d} B  " + " <- ".join(names))
    print(f"{a.server} {a.backend}: {total:.0f} bytes requested per idle connection (malloc adds 8 to each, "
          f"rounded up to 16)")


if __name__ == "__main__":
    main()
