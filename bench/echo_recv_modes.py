#!/usr/bin/env python3
"""echo_recv_modes.py — uring-echo's CPU per echo with --recv copy and --recv leased, alternated.

Each round starts uring-echo (as idle_servers.py does: one thread, idle limits off; here pinned to CPU 0)
once per receive mode; 16 client threads (this script, pinned to CPU 1) each send 64 B and wait for the
echo, sequentially, N times. Prints each run's echoes/s and the server's CPU time (utime + stime of /proc/PID/stat) per echo, then the median
per mode and its ratio to copy's. The client is slow Python: compare CPU per echo, not echoes/s.

  bench/echo_recv_modes.py [--backend emulated] [--rounds 3] [--echoes 6000]
                           [--samples build/release/samples]
"""
import argparse
import os
import socket
import statistics
import threading
import time

import idle_servers  # starts a sample server and reads its port

THREADS = 16


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client(port, echoes):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    message = b"x" * 64
    for _ in range(echoes):
        s.sendall(message)
        got = 0
        while got < len(message):
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError("uring-echo closed the connection")
            got += len(chunk)
    s.close()


def run(binary, backend, mode, echoes):
    proc, port = idle_servers.start(binary, "echo", backend, THREADS, extra=["--recv", mode], cpu=0)
    try:
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        threads = [threading.Thread(target=client, args=(port, echoes)) for _ in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu1, elapsed = cpu_seconds(proc.pid), time.monotonic() - t0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    n = echoes * THREADS
    return n / elapsed, (cpu1 - cpu0) * 1e6 / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="emulated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--echoes", type=int, default=6000)
    ap.add_argument("--samples", default="build/release/samples")
    args = ap.parse_args()
    os.sched_setaffinity(0, {1})
    binary = os.path.join(args.samples, "uring-echo")
    cpu = {"copy": [], "leased": []}
    for r in range(1, args.rounds + 1):
        for mode in cpu:
            rate, us = run(binary, args.backend, mode, args.echoes)
            cpu[mode].append(us)
            print(f"round {r}  --recv {mode:6}  {rate:8.0f} echoes/s  server CPU {us:.2f} us/echo", flush=True)
    base = statistics.median(cpu["copy"])
    for mode, values in cpu.items():
        m = statistics.median(values)
        print(f"{args.backend} --recv {mode}: median {m:.2f} us/echo, {m / base:.2f}x")


if __name__ == "__main__":
    main()
