#!/usr/bin/env python3
"""scripts/demo's table: the medians of a uring-bench JSON file, as ratios with a verdict each."""
import json
import os
import sys


def medians(path):
    with open(path) as f:
        runs = json.load(f)["benchmarks"]
    out = {}
    for r in runs:
        if r.get("aggregate_name") == "median" and "items_per_second" in r:
            out[r["run_name"]] = r["items_per_second"]
    return out


def find(m, prefix):
    for name, rate in m.items():
        if name.startswith(prefix):
            return rate
    return None


def main():
    m = medians(sys.argv[1])
    rows = [
        # what, the first, the second, what the ratio measures
        ("registered ring fd vs plain, threaded process, 1 NOP per enter",
         "nop_threaded/raw_registered/1", "nop_threaded/raw_plain/1",
         "the fd table's atomic reference count each enter skips"),
        ("our executor vs raw liburing, 1 NOP per enter",
         "nop/uring/1", "nop/raw_registered/1", "the library's own cost per operation"),
        ("our executor vs raw liburing, 32 NOPs per enter",
         "nop/uring/32", "nop/raw_registered/32", "the library's own cost per operation"),
        ("messages between 2 threads (stream): send vs raw MSG_RING",
         "stream/uring_send/64", "stream/raw_msg_ring/64", "the library's cost per message"),
        ("messages between 2 threads (stream): send vs an eventfd queue",
         "stream/uring_send/64", "stream/eventfd_queue/64", "MSG_RING against a mutex queue + eventfd"),
        ("messages between 2 threads (stream): send vs Boost.Asio post",
         "stream/uring_send/64", "stream/asio_post/64", "MSG_RING against Asio's io_context"),
        ("messages both ways (bidir): send vs an eventfd queue",
         "bidir/uring_send/64", "bidir/eventfd_queue/64", "MSG_RING against a mutex queue + eventfd"),
        ("messages both ways (bidir): send vs Boost.Asio post",
         "bidir/uring_send/64", "bidir/asio_post/64", "MSG_RING against Asio's io_context"),
        ("TCP echo, 16 connections: leased receives vs epoll",
         "echo/uring_leased/16", "echo/epoll/16", "one enter per turn against a syscall per read and write"),
    ]
    print(f"{'comparison':<64} {'ratio':>6}  verdict")
    for what, ours, theirs, reason in rows:
        a, b = find(m, ours), find(m, theirs)
        if a is None or b is None:
            print(f"{what:<64} {'-':>6}  not measured")
            continue
        ratio = a / b
        verdict = "ahead" if ratio >= 1.05 else "level" if ratio > 0.95 else "behind"
        print(f"{what:<64} {ratio:5.2f}x  {verdict}: {reason}")
    print("ratio = items per second, the first named / the second (above 1: the first is ahead)")
    load = os.getloadavg()[0]
    if load > os.cpu_count():
        print(f"note: the machine is busy (load {load:.1f} on {os.cpu_count()} cores): "
              "the figures are not reliable, run it again when it is idle")


if __name__ == "__main__":
    main()
