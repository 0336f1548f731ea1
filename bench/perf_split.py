#!/usr/bin/env python3
"""perf_split.py [perf.data] — a server's CPU split three ways from `perf record -e cpu-clock -g`.

  user        samples whose leaf frame is outside the kernel
  kernel TCP  kernel samples with a TCP/IP or socket frame on their stack (tcp_sendmsg, tcp_recvmsg, the
              loopback's transmit and its softirq receive, skb allocation and freeing, the peer's wake-up):
              the work any server on this socket pays, whatever it waits with
  kernel other every other kernel sample: syscall entry and exit, epoll, io_uring's submission and task
              work, the scheduler, and the readiness checks (tcp_poll) epoll and poll arming make: what the
              way of waiting costs

Prints each share, kernel other by group, kernel TCP by its outermost TCP frame, and the top leaf symbols
of each part. With
--comm NAME (repeatable) or --tid TID only those threads' samples count, with --not-tid TID all but that
one (a benchmark's client is its main thread, its server another).
"""
import collections
import re
import subprocess
import sys

TCP = re.compile(
    r"^(__)?(tcp|inet|ip|ip6|udp|sk|skb|sock|__sock|__sk|net_rx|netif|__netif|napi|__napi|process_backlog|"
    r"dev_|__dev|loopback|__kfree_skb|kfree_skb|consume_skb|__alloc_skb|alloc_skb|__skb|release_sock|"
    r"lock_sock|__release_sock|__inet|__tcp|__ip|nf_|neigh|do_softirq|__local_bh|security_sock)")
# Readiness checks: what a way of waiting asks the socket, not work on its data.
POLL = {"tcp_poll", "sock_poll", "tcp_stream_is_readable", "sk_stream_is_writeable"}
GROUPS = [
    ("io_uring", re.compile(r"^(__)?io_|^io_uring|^tctx_task_work|^task_work_run")),
    ("epoll", re.compile(r"^(__)?(ep_|do_epoll|epoll)")),
    ("scheduler", re.compile(r"^(__)?(schedule|finish_task_switch|pick_next|dequeue|enqueue|update_|"
                             r"try_to_wake_up|ttwu|psi_|select_task)")),
    ("entry/exit", re.compile(r"^(entry_|syscall_|do_syscall|__x64_sys|x64_sys|exit_to_user|"
                              r"arch_exit|__do_sys|irqentry|asm_)")),
]


def samples(path, keep):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,period,ip,sym,dso"],
                         capture_output=True, text=True, check=True).stdout
    head, frames = None, []
    for line in out.splitlines() + [""]:
        if not line.strip():
            if head is not None and keep(head):
                yield head, frames
            head, frames = None, []
        elif line[0] not in " \t":
            parts = line.split()
            # comm may hold spaces: tid then period are the last two fields
            head = (" ".join(parts[:-2]), parts[-2], int(parts[-1]))
        else:
            m = re.match(r"\s*[0-9a-f]+\s+(.*?)(\+0x[0-9a-f]+)?\s+\((.*)\)\s*$", line)
            if m:
                frames.append((m.group(1), m.group(3)))


def main():
    args = sys.argv[1:]
    path, comms, tids, not_tids = "perf.data", set(), set(), set()
    while args:
        a = args.pop(0)
        if a == "--comm":
            comms.add(args.pop(0))
        elif a == "--tid":
            tids.add(args.pop(0))
        elif a == "--not-tid":
            not_tids.add(args.pop(0))
        else:
            path = a
    keep = lambda h: (not comms or h[0] in comms) and (not tids or h[1] in tids) and h[1] not in not_tids
    total = collections.Counter()
    groups = collections.Counter()
    entries = collections.Counter()  # kernel TCP by its outermost TCP frame
    top = {kind: collections.Counter() for kind in ("user", "kernel TCP", "kernel other")}
    for (_, _, period), frames in samples(path, keep):
        if not frames:
            continue
        leaf, dso = frames[0]
        if "kernel" not in dso:
            kind = "user"
            top[kind][f"{leaf} ({dso.rsplit('/', 1)[-1]})"] += period
        elif tcp := [s for s, d in frames if "kernel" in d and TCP.match(s) and s not in POLL]:
            kind = "kernel TCP"
            entries[tcp[-1]] += period
            top[kind][leaf] += period
        else:
            kind = "kernel other"
            top[kind][leaf] += period
            kernel = [sym for sym, d in frames if "kernel" in d]
            groups[next((g for g, rx in GROUPS if any(rx.match(s) for s in kernel)), "other")] += period
        total[kind] += period
    whole = sum(total.values()) or 1
    print(f"{whole / 1e9:.3f} s of samples")
    for kind in ("user", "kernel TCP", "kernel other"):
        print(f"{kind:12s} {100 * total[kind] / whole:5.1f}%")
    print("kernel other by the first of io_uring, epoll, scheduler, entry/exit with a frame on the stack:")
    for g, p in groups.most_common():
        print(f"  {g:12s} {100 * p / whole:5.1f}%")
    print("kernel TCP by its outermost TCP frame:")
    for sym, p in entries.most_common(8):
        print(f"  {100 * p / whole:5.1f}%  {sym}")
    for kind, counter in top.items():
        print(f"top {kind} leaf symbols:")
        for sym, p in counter.most_common(12):
            print(f"  {100 * p / whole:5.1f}%  {sym}")


main()
