#!/usr/bin/env python3
"""kv_redispy_test.py <uring-kv> <native|emulated> <shards>: redis-py (python3-redis) against uring-kv and
redis-server 7.0 side by side.

The same client calls go to both servers through redis-py and must give the same Python values (TTLs within
10 s, KEYS and SCAN as sets, INFO only for the fields clients read): a real client library, its pipelines,
its per-database connections and its SCAN iterator, using uring-kv as it would Redis. Servers are started and
killed as in kv_compat_test.py (which this imports).
"""
import sys

import redis

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from kv_compat_test import both_servers

failures = []


def same(what, a, b):
    if a != b:
        print("FAIL: %s: redis %r, uring-kv %r" % (what, a, b), flush=True)
        failures.append(what)


def session(r):
    """The calls, each returning a value to compare; errors are compared by their message."""
    out = []

    def call(name, fn):
        try:
            out.append((name, fn()))
        except redis.ResponseError as e:
            out.append((name, "error: " + str(e)))

    call("flushall", lambda: r.flushall())
    call("set", lambda: r.set("k", "v", ex=100))
    call("get", lambda: r.get("k"))
    call("ttl", lambda: r.ttl("k") > 90)
    call("set nx", lambda: r.set("k", "w", nx=True))
    call("set get", lambda: r.set("k", "w", get=True))
    call("getex", lambda: r.getex("k", persist=True))
    call("ttl after persist", lambda: r.ttl("k"))
    call("mset", lambda: r.mset({"a%d" % i: i for i in range(50)}))
    call("mget", lambda: r.mget(["a%d" % i for i in range(50)] + ["missing"]))
    call("msetnx", lambda: r.msetnx({"a1": 1, "new": 2}))
    call("incr", lambda: r.incr("a7", 5))
    call("incr bad", lambda: r.incr("k"))
    call("incrbyfloat", lambda: r.incrbyfloat("a8", 1.25))
    call("append", lambda: r.append("k", "xyz"))
    call("getrange", lambda: r.getrange("k", 1, -2))
    call("setrange", lambda: r.setrange("k", 2, "AB"))
    call("strlen", lambda: r.strlen("k"))
    call("getset", lambda: r.getset("k", "z"))
    call("getdel", lambda: r.getdel("a9"))
    call("exists", lambda: r.exists("a1", "a9", "k"))
    call("type", lambda: r.type("k"))
    call("rename", lambda: r.rename("a10", "b10"))
    call("renamenx", lambda: r.renamenx("a11", "b10"))
    call("copy", lambda: r.copy("b10", "c10"))
    call("expire gt", lambda: r.expire("c10", 100, gt=True))
    call("expire nx", lambda: r.expire("c10", 100, nx=True))
    call("pexpireat", lambda: r.pexpireat("c10", 99999999999000))
    call("expiretime", lambda: r.expiretime("c10"))
    call("persist", lambda: r.persist("c10"))
    call("delete", lambda: r.delete("a1", "a2", "nothere"))
    call("keys", lambda: sorted(r.keys("a1*")))
    call("scan_iter", lambda: sorted(r.scan_iter(match="a*", count=7)))
    call("dbsize", lambda: r.dbsize())
    call("info keys", lambda: r.info().get("db0", {}).get("keys"))
    call("randomkey", lambda: r.randomkey() is not None)
    call("time", lambda: len(r.time()))
    call("ping", lambda: r.ping())
    call("echo", lambda: r.echo("hi"))
    call("client_setname", lambda: r.client_setname("redispy"))
    call("client_getname", lambda: r.client_getname())
    p = r.pipeline(transaction=False)
    for i in range(100):
        p.set("p%d" % i, i).incr("p%d" % i).get("p%d" % i)
    call("pipeline", lambda: p.execute())
    t = r.pipeline()  # transaction=True: MULTI ... EXEC
    for i in range(50):
        t.set("t%d" % i, i).incr("t%d" % i)
    t.get("t0").mget("t1", "t2", "nosuch").delete("t3", "t4")
    call("transaction", lambda: t.execute())
    bad = r.pipeline()
    bad.set("s", "x").incr("s").get("s")
    call("transaction with an error inside",
         lambda: [str(v) if isinstance(v, Exception) else v for v in bad.execute(raise_on_error=False)])

    def watched(conflict):
        with r.pipeline() as p:
            p.watch("wk")
            v = p.get("wk") or b""
            if conflict:
                r.set("wk", "changed")  # through another connection of the pool
            p.multi()
            p.set("wk", v + b"+").get("wk")
            try:
                return p.execute()
            except redis.WatchError:
                return "watch error"

    call("watch", lambda: watched(False))
    call("watch conflict", lambda: watched(True))
    call("watch after conflict", lambda: watched(False))
    call("transaction helper", lambda: r.transaction(lambda p: p.multi() or p.incr("wk2"), "wk2"))
    call("flushdb", lambda: r.flushdb())
    call("dbsize after flushdb", lambda: r.dbsize())
    return out


def main():
    binary, backend, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with both_servers(binary, backend, shards) as ports:
        clients = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=15) for p in ports]
        want, got = session(clients[0]), session(clients[1])
        for (name, a), (_, b) in zip(want, got):
            same(name, a, b)
        # Another database through its own connection pool, as redis-py selects one.
        other = [redis.Redis(host="127.0.0.1", port=p, db=5, socket_timeout=15) for p in ports]
        for c in clients:
            c.set("shared", "db0")
        for c in other:
            c.set("shared", "db5")
        same("db 5", other[0].get("shared"), other[1].get("shared"))
        same("db 0", clients[0].get("shared"), clients[1].get("shared"))
        same("dbsize 5", other[0].dbsize(), other[1].dbsize())
        print("compared %d redis-py calls (%s, %d shards)" % (len(want) + 3, backend, shards))
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("uring-kv with redis-py (%s, %d shards): ok" % (backend, shards))


if __name__ == "__main__":
    main()
