#!/usr/bin/env python3
"""kv_limits_test.py <uring-kv> <native|emulated> <shards>: Redis's input limits, uring-kv side by side with
redis-server 7.0 (servers of their own: the test changes their settings).

proto-max-bulk-len and client-query-buffer-limit: CONFIG GET and CONFIG SET (memory values, ranges, errors,
all or nothing), replies byte for byte (one name per CONFIG GET: Redis orders several by its hash table,
which varies by process); a bulk string one byte over the limit (the default 512 MiB, then a
limit lowered with CONFIG SET) and a multibulk count over INT_MAX refused with Redis's error and a close; a
command past the query buffer limit closes the connection with no reply on both. Through redis-py (when
importable): a 2 MB value set and read back, and one DEL of 5000 keys. Servers are started and killed as in
kv_compat_test.py (which this imports).
"""
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import kv_compat_test as compat
from kv_compat_test import Conn, both_servers, fail, run

MB = 1024 * 1024


def config_sequences(ports):
    run("config", [
        ["CONFIG", "GET", "proto-max-bulk-len"], ["CONFIG", "GET", "client-query-buffer-limit"],
        ["CONFIG", "GET", "PROTO-MAX-BULK-LEN"],
        ["CONFIG", "SET", "proto-max-bulk-len", "100"], ["CONFIG", "SET", "proto-max-bulk-len", "abc"],
        ["CONFIG", "SET", "proto-max-bulk-len", "-1"], ["CONFIG", "SET", "proto-max-bulk-len", "1.5mb"],
        ["CONFIG", "SET", "proto-max-bulk-len", "99999999999999999999"],
        ["CONFIG", "SET", "proto-max-bulk-len", "1048575"], ["CONFIG", "SET", "client-query-buffer-limit", "1kb"],
        ["CONFIG", "SET", "proto-max-bulk-len", "1mb", "proto-max-bulk-len", "2mb"],
        ["CONFIG", "SET", "nosuch", "1"], ["CONFIG", "SET", "proto-max-bulk-len"],
        ["CONFIG", "SET", "proto-max-bulk-len", "1mb", "x"],
        ["CONFIG", "SET", "proto-max-bulk-len", "2mb", "client-query-buffer-limit", "0"],
        ["CONFIG", "GET", "proto-max-bulk-len"],  # unchanged: all or nothing
        ["CONFIG", "SET", "proto-max-bulk-len", "2MB"], ["CONFIG", "GET", "proto-max-bulk-len"],
        ["CONFIG", "SET", "proto-max-bulk-len", "1500k"], ["CONFIG", "GET", "proto-max-bulk-len"],
        ["CONFIG", "SET", "PROTO-max-bulk-len", "1048576b", "client-query-buffer-limit", "3gb"],
        ["CONFIG", "GET", "proto-max-bulk-len"], ["CONFIG", "GET", "client-query-buffer-limit"],
        ["CONFIG", "SET", "proto-max-bulk-len", "512mb", "client-query-buffer-limit", "1gb"],
        ["CONFIG", "GET", "proto-max-bulk-len"], ["CONFIG", "GET", "client-query-buffer-limit"],
        ["CONFIG", "RESETSTAT"], ["CONFIG", "RESETSTAT", "x"], ["config", "resetstat"],
    ], *ports)


def refusals(ports):
    run("bulk over the default limit", [b"*1\r\n$%d\r\n" % (512 * MB + 1), ("closed",)], *ports)
    run("multibulk over INT_MAX", [b"*2147483648\r\n", ("closed",)], *ports)
    run("lowered bulk limit", [
        ["CONFIG", "SET", "proto-max-bulk-len", "2mb"], b"*1\r\n$%d\r\n" % (2 * MB + 1), ("closed",),
    ], *ports)
    run("lowered bulk limit, a value at it", [
        ["SET", "k", "v" * (2 * MB)], ["STRLEN", "k"], ["CONFIG", "SET", "proto-max-bulk-len", "512mb"],
    ], *ports)


def query_buffer_limit(ports):
    """A command past client-query-buffer-limit: the connection is closed with no reply, on both."""
    for port in ports:
        setter = Conn(port)
        setter.send(compat.encode(["CONFIG", "SET", "client-query-buffer-limit", "1mb"]))
        if setter.reply()[0] != b"+OK\r\n":
            fail("CONFIG SET client-query-buffer-limit 1mb on port %d" % port)
        c = Conn(port)
        try:
            c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (3 * MB) + b"x" * (2 * MB))
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while it was still sending: what is checked below
        if not c.at_eof() or c.buf:
            fail("port %d: a command past the query buffer limit: closed %s, got %r" % (port, c.closed, c.buf[:80]))
        c.close()
        setter.send(compat.encode(["CONFIG", "SET", "client-query-buffer-limit", "1gb"]))
        setter.reply()
        setter.close()


def with_redis_py(ports):
    try:
        import redis
    except ImportError:
        print("redis-py not importable: its part is skipped")
        return
    big = b"\x00\xffv" * (2 * MB // 3 + 1)
    keys = ["key:%d" % i for i in range(5000)]
    results = []
    for port in ports:
        r = redis.Redis(port=port, socket_timeout=30)
        r.flushall()
        r.mset({k: i for i, k in enumerate(keys)})
        results.append((r.set("big", big), r.get("big") == big, r.strlen("big"), r.delete(*keys), r.dbsize()))
        r.close()
    if results[0] != results[1] or results[0] != (True, True, len(big), 5000, 1):
        fail("redis-py: a 2 MB value and DEL of 5000 keys: redis %r, uring-kv %r" % tuple(results))


def main():
    binary, backend, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with both_servers(binary, backend, shards) as ports:
        config_sequences(ports)
        refusals(ports)
        query_buffer_limit(ports)
        with_redis_py(ports)
    if compat.failures:
        raise SystemExit("FAIL: %d failures" % len(compat.failures))
    print("PASS")


if __name__ == "__main__":
    main()
