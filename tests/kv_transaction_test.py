#!/usr/bin/env python3
"""kv_transaction_test.py <uring-kv> <native|emulated> <shards>: uring-kv's own bounds and guarantees for
MULTI/EXEC/WATCH, which redis-server has no counterpart of (kv_compat_test.py compares the replies).

- The queue bound: the 10001st queued command is an error and EXEC aborts; so are arguments past 16 MiB.
- The watch bound: past 1024 watched keys per client, WATCH is an error and watches nothing more.
- With one shard, EXEC is atomic: a transaction INCR c, KEYS * (a reply past the 64 KiB at which a
  connection writes), INCR c, run while another client floods INCR c, always sees two consecutive numbers.
- With any number of shards, a transaction on one key is atomic (run holding its shard's lock): INCR,
  GET, INCRBY of one key amid another client's flood of INCRs see consecutive numbers.
- With several shards, a transaction on keys of two shards is atomic (run holding both locks): amid
  another client's transactions INCR x, INCR y, a transaction GET x, GET y always reads them equal.
- No command is lost between shards, nor run out of a client's order: four clients at once (the
  connections land on either shard) pipeline INCRs and APPENDs on shared keys spread over every shard, and
  SETs then GETs of their own; each command runs under its key's shard lock, on the connection's thread or
  by a hop, and the totals, the appended lengths and every GET of the client's own SET come out right.
The server is killed by pid on every exit path; every wait has a deadline.
"""
import contextlib
import multiprocessing
import re
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from kv_compat_test import Conn, encode, start_kv

failures = []


def check(what, cond):
    if not cond:
        print("FAIL: " + what, flush=True)
        failures.append(what)


def pipeline(c, commands):
    """Sends the commands at once and returns their parsed replies."""
    c.send(b"".join(encode(cmd) for cmd in commands))
    return [c.reply()[1] for _ in commands]


def queue_bound(port):
    c = Conn(port)
    got = pipeline(c, [["MULTI"]] + [["PING"]] * 10001 + [["EXEC"]])
    check("10000 commands queued", all(r == ("+", b"QUEUED") for r in got[1:10001]))
    check("the 10001st refused: %r" % (got[10001],), "transaction too long" in repr(got[10001]))
    check("EXEC aborts: %r" % (got[-1],), "EXECABORT" in repr(got[-1]))
    big = "x" * (1024 * 1024)
    got = pipeline(c, [["MULTI"]] + [["SET", "k", big]] * 17 + [["EXEC"], ["EXISTS", "k"]])
    check("16 MiB of arguments refused: %r" % (got[16],), "transaction too long" in repr(got[16]))
    check("EXEC aborts after the bytes: %r" % (got[-2],), "EXECABORT" in repr(got[-2]))
    check("nothing ran", got[-1] == 0)
    c.close()


def watch_bound(port):
    c = Conn(port)
    got = pipeline(c, [["WATCH"] + ["w%d" % i for i in range(1000)], ["WATCH", "w0", "w1"],
                       ["WATCH"] + ["v%d" % i for i in range(25)], ["WATCH"] + ["v%d" % i for i in range(24)],
                       ["MULTI"], ["EXEC"]])
    check("1000 watched", got[0] == ("+", b"OK") and got[1] == ("+", b"OK"))
    check("past 1024 refused: %r" % (got[2],), "too many watched keys" in repr(got[2]))
    check("up to 1024 taken: %r" % (got[3],), got[3] == ("+", b"OK"))
    check("EXEC runs: %r" % (got[5],), got[5] == [])
    c.close()


def flood(port, batch, stop, first, count):
    """The flooding client's loop, in a process of its own (so that it runs beside the test's client, not
    in turns with it under one interpreter lock)."""
    f = Conn(port)
    until = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < until:
        pipeline(f, batch)
        with count.get_lock():
            count.value += len(batch)
        first.set()
    f.close()


@contextlib.contextmanager
def flooding(port, batch):
    """Another client sends `batch` (a list of commands) again and again until the block ends (60 s at
    most)."""
    stop, first, count = multiprocessing.Event(), multiprocessing.Event(), multiprocessing.Value("q", 0)
    p = multiprocessing.Process(target=flood, args=(port, batch, stop, first, count))
    p.start()
    # The block starts once the other client is under way: on a loaded machine the block could otherwise
    # end before its first batch.
    first.wait(30)
    try:
        yield
    finally:
        stop.set()
        p.join(70)
        if p.is_alive():
            p.kill()
            p.join()
    check("the other client ran meanwhile (%d commands)" % count.value, count.value > 0)


def atomic_on_one_shard(port):
    c = Conn(port)
    names = [["SET", "key:%06d:%s" % (i, "p" * 20), "1"] for i in range(4000)]
    pipeline(c, names)  # KEYS * replies about 140 KiB
    with flooding(port, [["INCR", "c"]] * 50):
        for _ in range(40):
            got = pipeline(c, [["MULTI"], ["INCR", "c"], ["KEYS", "*"], ["INCR", "c"], ["EXEC"]])
            first, keys, second = got[-1]
            check("one transaction's INCRs %d and %d are consecutive" % (first, second), second == first + 1)
            check("KEYS whole", len(keys) >= 4000)
    c.close()


def atomic_on_one_key(port):
    """Transactions on one key run in one visit to its shard (or on the connection's own): atomic."""
    with flooding(port, [["INCR", "one"]] * 50):
        for _ in range(4):  # connections land on either shard
            c = Conn(port)
            for _ in range(20):
                got = pipeline(c, [["MULTI"], ["INCR", "one"], ["GET", "one"], ["INCRBY", "one", "1"],
                                   ["EXEC"]])
                first, read, second = got[-1]
                check("INCRs %d, GET %r, INCRBY %d consecutive" % (first, read, second),
                      read == b"%d" % first and second == first + 1)
            c.close()


def shard_of(key, shards):
    """uring-kv's kv::shard_of: FNV-1a over the key's bytes, modulo the shard count."""
    h = 14695981039346656037
    for ch in key.encode():
        h = ((h ^ ch) * 1099511628211) % 2**64
    return h % shards


def atomic_across_shards(port, shards):
    """A transaction on keys of two shards holds both shards' locks: another client's transactions INCR x,
    INCR y are seen whole (x equals y at every read), and so is a WATCH on both."""
    x = "x0"
    y = next("y%d" % i for i in range(100) if shard_of("y%d" % i, shards) != shard_of(x, shards))
    c = Conn(port)
    pipeline(c, [["SET", x, "0"], ["SET", y, "0"]])
    c.close()
    # Reads between the two INCRs widen the moment a transaction that is not atomic shows x ahead of y.
    pad = [["GET", "pad%d" % i] for i in range(200)]
    check_pair = [["MULTI"], ["GET", x], ["GET", y], ["EXEC"]]
    with flooding(port, ([["MULTI"], ["INCR", x]] + pad + [["INCR", y], ["EXEC"]]) * 10):
        # For 2 s (12 connections at least; each lands on either shard): on two shared cores the two
        # shards run side by side only now and then.
        until, n = time.monotonic() + 2, 0
        while n < 12 or time.monotonic() < until:
            n += 1
            c = Conn(port)
            for _ in range(10):
                got = pipeline(c, check_pair * 50)
                torn = [r for r in got[3::4] if r[0] != r[1]]
                check("x and y read together, not %r" % (torn[:3],), not torn)
            got = pipeline(c, [["WATCH", x, y], ["GET", x], ["MULTI"], ["INCR", x], ["INCR", y], ["EXEC"]])
            check("a watched pair, changed meanwhile or not: %r" % (got[-1],),
                  got[-1] is None or (isinstance(got[-1], list) and got[-1][0] == got[-1][1]))
            c.close()


def counts_from_every_shard(port, shards):
    keys = ["n:%d" % i for i in range(16)]
    clients, rounds = 4, 200
    errors = []

    def hammer(who):
        try:
            c = Conn(port)
            for r in range(rounds):
                mine = ["own:%d:%d" % (who, i) for i in range(4)]  # spread over the shards too
                batch = [["INCR", k] for k in keys] + [["APPEND", "log:%d" % (r % 4), "x"]]
                batch += [["SET", k, "%d" % r] for k in mine] + [["GET", k] for k in mine]
                got = pipeline(c, batch)
                n = len(keys) + 1
                if any(not isinstance(v, int) for v in got[:n]) or got[n + 4:] != [b"%d" % r] * 4:
                    errors.append("client %d round %d: %r" % (who, r, got))
            c.close()
        except Exception as e:  # reported below: the check fails
            errors.append("client %d: %r" % (who, e))

    threads = [threading.Thread(target=hammer, args=(w,)) for w in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    check("every client finished: %r" % errors[:3], not errors and not any(t.is_alive() for t in threads))
    c = Conn(port)
    got = pipeline(c, [["MGET"] + keys, ["MGET"] + ["log:%d" % i for i in range(4)]])
    want = b"%d" % (clients * rounds)
    check("each key counted every INCR: %r" % (got[0],), got[0] == [want] * len(keys))
    check("each APPEND landed: %r" % ([len(v or b"") for v in got[1]],),
          [len(v or b"") for v in got[1]] == [clients * rounds // 4] * 4)
    info = pipeline(c, [["INFO", "shards"]])[0]
    figures = dict(re.findall(rb"\r\n(forwarded_commands|hops):(\d+)", info))
    forwarded, hops = int(figures.get(b"forwarded_commands", -1)), int(figures.get(b"hops", -1))
    if shards > 1:  # with one shard nothing crosses
        check("commands crossed shards (%d), at most one hop each (%d)" % (forwarded, hops),
              forwarded > 0 and 0 <= hops <= forwarded)
    else:
        check("one shard: no crossing (%d), no hop (%d)" % (forwarded, hops), forwarded == 0 and hops == 0)
    c.close()


def main():
    binary, backend, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
    proc, port = start_kv(binary, backend, shards)
    try:
        queue_bound(port)
        watch_bound(port)
        atomic_on_one_key(port)
        counts_from_every_shard(port, shards)
        if shards > 1:
            atomic_across_shards(port, shards)
        if shards == 1:
            atomic_on_one_shard(port)
    finally:
        proc.kill()
        proc.wait()
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("uring-kv transactions (%s, %d shards): ok" % (backend, shards))


if __name__ == "__main__":
    main()
