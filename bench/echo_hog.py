#!/usr/bin/env python3
"""echo_hog.py — echo latency of normal clients while one client floods uring-echo and never reads.

Starts the given uring-echo on a free loopback port, connects a hog that sends continuously without
reading (--hog-block bytes at a time, --hog-pause-ms apart: paced like a streaming client, so that the
server receives each block as it comes), waits until the hog's sends stall (the server's echo to it is
blocked and it holds all it will take), then runs --clients normal clients, each doing
--rounds sequential echoes of --size bytes. Every echo must come back within --timeout seconds (else it
counts as lost and that client stops). Prints one line: echoes done, p50 / p99 / max latency in ms, and
how many were over --target ms. Exit status 0 if every echo came back within --target ms, else 1.

  bench/echo_hog.py build/release/samples/uring-echo [--backend native] [--clients 100] [--rounds 20]
"""
import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("server", help="path of the uring-echo binary")
    p.add_argument("--backend", default="native", choices=["native", "emulated", "auto"])
    p.add_argument("--recv", default="leased", choices=["leased", "copy"])
    p.add_argument("--clients", type=int, default=100)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--timeout", type=float, default=2.0, help="seconds before an echo counts as lost")
    p.add_argument("--target", type=float, default=50.0, help="ms every echo must meet")
    p.add_argument("--hog-block", type=int, default=16384, help="bytes per send of the hog")
    p.add_argument("--hog-pause-ms", type=float, default=1.0, help="pause between the hog's sends")
    p.add_argument("--no-hog", action="store_true", help="the same run without the hog (a baseline)")
    return p.parse_args()


def start_server(args):
    proc = subprocess.Popen([args.server, "--port", "0", "--backend", args.backend, "--recv", args.recv],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()  # "uring-echo: listening on 127.0.0.1:PORT ..."
    try:
        port = int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])
    except (IndexError, ValueError):
        proc.kill()
        proc.wait(timeout=10)
        sys.exit(f"echo_hog: unexpected first line from the server: {line!r}")
    return proc, port


def hog(port, args, stop, sent):
    """Sends continuously and never reads, until `stop` is set."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.2)
    block = b"h" * args.hog_block
    try:
        while not stop.is_set():
            try:
                sent[0] += s.send(block)
                time.sleep(args.hog_pause_ms / 1000.0)
            except socket.timeout:
                pass  # the server holds all it will take: keep trying, as a flooding peer would
    finally:
        s.close()


async def client(port, args, latencies, lost):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = os.urandom(args.size)
    try:
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            writer.write(msg)
            try:
                got = await asyncio.wait_for(reader.readexactly(len(msg)), args.timeout)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                lost[0] += 1
                return
            latencies.append((time.perf_counter() - t0) * 1000.0)
            if got != msg:
                sys.exit("echo_hog: an echo came back with other bytes")
    finally:
        writer.close()


async def clients(port, args):
    latencies, lost = [], [0]
    await asyncio.gather(*(client(port, args, latencies, lost) for _ in range(args.clients)))
    return latencies, lost[0]


def pct(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main():
    args = parse_args()
    proc, port = start_server(args)
    stop = threading.Event()
    sent = [0]
    hog_thread = None
    try:
        if not args.no_hog:
            hog_thread = threading.Thread(target=hog, args=(port, args, stop, sent), daemon=True)
            hog_thread.start()
            # Until the hog's sends stall for half a second (at most 20 s): the server holds what it takes.
            deadline, last, still_since = time.monotonic() + 20, -1, time.monotonic()
            while time.monotonic() < deadline:
                if sent[0] != last:
                    last, still_since = sent[0], time.monotonic()
                elif time.monotonic() - still_since > 0.5:
                    break
                time.sleep(0.05)
        latencies, lost = asyncio.run(clients(port, args))
    finally:
        stop.set()
        if hog_thread is not None:
            hog_thread.join(timeout=5)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    latencies.sort()
    expected = args.clients * args.rounds
    over = sum(1 for v in latencies if v > args.target)
    print(f"backend={args.backend} recv={args.recv} hog={'no' if args.no_hog else f'{sent[0] >> 10} KiB sent'} "
          f"echoes={len(latencies)}/{expected} lost={lost} p50={pct(latencies, 0.5):.2f}ms "
          f"p99={pct(latencies, 0.99):.2f}ms max={(latencies[-1] if latencies else float('nan')):.2f}ms "
          f"over_{args.target:g}ms={over}")
    return 0 if len(latencies) == expected and over == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
