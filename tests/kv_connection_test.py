#!/usr/bin/env python3
"""kv_connection_test.py <uring-kv> <native|emulated> <shards>: uring-kv's connection commands side by side
with redis-server 7.0, both started with --requirepass.

AUTH and HELLO (errors, NOAUTH before AUTH, RESP3 after HELLO 3) compared byte for byte; redis-cli -a and
redis-py's password= against both, their outputs compared; CLIENT INFO and CLIENT LIST parsed on both (the
same field names in the same order, the values that do not vary by nature checked, idle= growing while a
client is quiet and 0 after its command); CLIENT KILL ID of
clients spread over every thread; INFO's format, its keyspace lines for the same data set, and its counters
(hits and misses, per command; connections, commands, expired keys, used_memory; CONFIG RESETSTAT zeroing
them); uring-kv's own bounds (the 10th failed AUTH closes the connection, client names of 1024 bytes at
most, save and appendonly fixed) and --requirepass-file. Servers are started and killed as in
kv_compat_test.py (which this imports); every wait is a poll with a deadline.
"""
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import kv_compat_test as compat
from kv_compat_test import Conn, both_servers, encode, fail, poll, run

PASSWORD = "s3cret"


def check(ok, what):
    if not ok:
        fail(what)
    return ok


def call(conn, *args):
    conn.send(encode(list(args)))
    return conn.reply()


def authed(port, *hello):
    c = Conn(port)
    call(c, "AUTH", PASSWORD)
    for step in hello:
        call(c, *step)
    return c


def auth_sequences(ports):
    seq = [
        ["PING"], ["GET", "k"], ["NOSUCH", "a"], ["GET"], ["MULTI"], ["CLIENT", "ID"], ["ECHO", "x"], ["SELECT", "1"],
        ["HELLO"], ["HELLO", "3"], ["HELLO", "2", "SETNAME", "early"], ["AUTH", "x"], ["AUTH", "a", "b"],
        ["AUTH", "default", "wrong"], ["AUTH"], ["AUTH", "a", "b", "c"], ["HELLO", "2", "AUTH", "default", "wrong"],
        ["HELLO", "3", "AUTH", "bob", PASSWORD], ["HELLO", "4", "AUTH", "default", PASSWORD], ["HELLO", "x"],
        ["AUTH", PASSWORD], ["PING"], ["CLIENT", "GETNAME"], ["AUTH", "x"], ["PING"],
        ["AUTH", "default", PASSWORD], ["GET", "k"], ["QUIT"], ("closed",),
    ]
    run("auth", seq, *ports)
    run("hello auth", [
        ["HELLO", "3", "AUTH", "default", PASSWORD, "SETNAME", "nm"], ["GET", "nosuch"], ["CLIENT", "GETNAME"],
        ["MGET", "a", "b"], ["HELLO", "2"], ["GET", "nosuch"], ["AUTH", "default", "wrong"], ["PING"],
    ], *ports)
    run("quit unauthenticated", [["GET", "k"], ["QUIT"], ("closed",)], *ports)
    run("auth in multi", [
        ["AUTH", PASSWORD], ["MULTI"], ["AUTH", "x"], ["AUTH", PASSWORD], ["HELLO", "3"], ["GET", "nosuch"],
        ["EXEC"], ["GET", "nosuch"],
    ], *ports)


def auth_failures_close(kv_port):
    """uring-kv closes a connection at its 10th failed AUTH (redis-server never does)."""
    c = Conn(kv_port)
    for i in range(9):
        check(call(c, "AUTH", "guess%d" % i)[0].startswith(b"-WRONGPASS"), "failed AUTH %d replied" % i)
    check(call(c, "HELLO", "3", "AUTH", "default", "guess9")[0].startswith(b"-WRONGPASS"), "10th failed AUTH")
    check(c.at_eof(), "the connection is closed after the 10th failed AUTH")
    c.close()
    c = Conn(kv_port)  # a new connection starts counting again, and AUTH still works
    check(call(c, "AUTH", "nope")[0].startswith(b"-WRONGPASS"), "AUTH on a new connection")
    check(call(c, "AUTH", PASSWORD)[0] == b"+OK\r\n", "AUTH after a failure")
    c.close()


def redis_cli(ports):
    outputs = []
    for port in ports:
        out = []
        for pw, args in ((PASSWORD, ["SET", "cli", "v"]), (PASSWORD, ["GET", "cli"]), ("wrong", ["GET", "cli"]),
                         (PASSWORD, ["HELLO", "3"]), (PASSWORD, ["CLIENT", "GETNAME"])):
            p = subprocess.run(["redis-cli", "-p", str(port), "-a", pw, "--no-auth-warning"] + args,
                               capture_output=True, timeout=30)
            text = p.stdout + p.stderr
            if args[0] == "HELLO":  # the version and id differ by nature
                text = b"\n".join(l for l in text.split(b"\n") if not l.startswith((b"id ", b"version ")))
            out.append(text)
        outputs.append(out)
    check(outputs[0] == outputs[1], "redis-cli -a: redis %r, uring-kv %r" % tuple(outputs))


def redis_py(ports):
    try:
        import redis
    except ImportError:
        print("redis-py not importable by this python: its part is skipped")
        return
    results = []
    for port in ports:
        r = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD, socket_timeout=15)
        out = [r.set("py", "v"), r.get("py"), r.client_setname("pyname"), r.client_getname(), r.dbsize() > 0]
        try:
            redis.Redis(host="127.0.0.1", port=port, password="wrong", socket_timeout=15).ping()
            out.append("no error")
        except redis.RedisError as e:
            out.append(type(e).__name__ + " " + str(e))
        try:
            redis.Redis(host="127.0.0.1", port=port, socket_timeout=15).ping()
            out.append("no error")
        except redis.RedisError as e:
            out.append(type(e).__name__ + " " + str(e))
        if int(redis.__version__.split(".")[0]) >= 5:
            r3 = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD, protocol=3, socket_timeout=15)
            out += [r3.get("nosuch"), r3.get("py"), r3.config_get("save")]
        results.append(out)
    check(results[0] == results[1], "redis-py: redis %r, uring-kv %r" % tuple(results))
    print("redis-py %s%s" % (redis.__version__, "" if int(redis.__version__.split(".")[0]) >= 5 else
                             " (no protocol=3 before 5.0: RESP3 is checked with raw sockets)"))


def fields(line):
    return [f.split(b"=", 1) for f in line.split(b" ")]


def client_lines(ports):
    names = []
    for port in ports:
        c = authed(port, ["CLIENT", "SETNAME", "lister"], ["SELECT", "2"])
        me = c.s.getsockname()
        cid = call(c, "CLIENT", "ID")[1]
        info = call(c, "CLIENT", "INFO")[1]
        check(info.endswith(b"\n") and info.count(b"\n") == 1, "CLIENT INFO is one line: %r" % info)
        f = dict(fields(info.rstrip(b"\n")))
        names.append([k for k, _ in fields(info.rstrip(b"\n"))])
        want = {b"id": str(cid).encode(), b"addr": ("%s:%d" % me).encode(), b"laddr": b"127.0.0.1:%d" % port,
                b"name": b"lister", b"db": b"2", b"flags": b"N", b"multi": b"-1", b"cmd": b"client|info",
                b"user": b"default", b"resp": b"2", b"sub": b"0", b"redir": b"-1"}
        for k, v in want.items():
            check(f.get(k) == v, "port %d CLIENT INFO %s=%r, want %r" % (port, k, f.get(k), v))
        others = [authed(port) for _ in range(3)]
        lst = call(c, "CLIENT", "LIST")[1]
        lines = lst.rstrip(b"\n").split(b"\n")
        ids = [int(dict(fields(l))[b"id"]) for l in lines]
        mine = [cid] + [call(o, "CLIENT", "ID")[1] for o in others]
        check(set(mine) <= set(ids) and ids == sorted(ids), "port %d CLIENT LIST: %r by id: %r" % (port, mine, ids))
        for l in lines:
            check([k for k, _ in fields(l)] == names[-1], "port %d CLIENT LIST fields of %r" % (port, l))
        c.send(encode(["HELLO", "3"]))
        c.reply()
        call(c, "MULTI")
        call(c, "GET", "x")
        c.send(encode(["CLIENT", "INFO"]))  # queued
        c.reply()
        f = dict(fields(call(c, "EXEC")[1][1].rstrip(b"\n")))
        check((f[b"resp"], f[b"cmd"], f[b"flags"], f[b"multi"]) == (b"3", b"exec", b"x", b"2"),
              "port %d CLIENT INFO in EXEC: %r" % (port, f))
        ok = call(c, "CLIENT", "LIST", "ID", str(cid), "999999")
        check(ok[0].startswith(b"=") and ok[1].startswith(b"id=%d " % cid), "CLIENT LIST ID in RESP3: %r" % (ok[0],))
        for o in others + [c]:
            o.close()
    check(names[0] == names[1], "CLIENT INFO field names: redis %r, uring-kv %r" % tuple(names))


def client_idle(ports):
    """CLIENT LIST's idle= counts from the client's last input, as Redis's: it grows while the client sends
    nothing and is 0 again once it sends a command."""
    for port in ports:
        control = authed(port)
        quiet = authed(port)
        qid = call(quiet, "CLIENT", "ID")[1]

        def idle_of():
            lines = call(control, "CLIENT", "LIST", "ID", str(qid))[1].rstrip(b"\n").split(b"\n")
            return int(dict(fields(lines[0]))[b"idle"])

        check(poll(lambda: idle_of() >= 1, deadline_s=10), "port %d: idle never reached 1 s" % port)
        call(quiet, "PING")
        check(idle_of() == 0, "port %d: idle %d after a command" % (port, idle_of()))
        quiet.close()
        control.close()


def client_kill(ports):
    for port in ports:
        control = authed(port)
        victims = [authed(port) for _ in range(8)]  # SO_REUSEPORT spreads them over uring-kv's threads
        ids = [call(v, "CLIENT", "ID")[1] for v in victims]
        for v, cid in zip(victims, ids):
            check(call(control, "CLIENT", "KILL", "ID", str(cid))[0] == b":1\r\n", "port %d kill %d" % (port, cid))
            check(v.at_eof(), "port %d: client %d closed by CLIENT KILL ID" % (port, cid))
        check(call(control, "CLIENT", "KILL", "ID", str(ids[0]))[0] == b":0\r\n", "a killed id is gone")
        own = call(control, "CLIENT", "ID")[1]
        check(call(control, "CLIENT", "KILL", "ID", str(own))[0] == b":0\r\n", "SKIPME yes by default")
        other = authed(port)
        addr = "%s:%d" % other.s.getsockname()
        check(call(control, "CLIENT", "KILL", addr)[0] == b"+OK\r\n" and other.at_eof(), "old-style KILL addr")
        mine = "%s:%d" % control.s.getsockname()
        check(call(control, "CLIENT", "KILL", "ADDR", mine, "SKIPME", "no")[0] == b":1\r\n", "kill oneself")
        check(control.at_eof(), "port %d: killing oneself closes after the reply" % port)
        for v in victims + [control, other]:
            v.close()


def info_of(conn, section):
    raw = call(conn, "INFO", section)[1]
    out = {}
    for line in raw.split(b"\r\n"):
        if line and not line.startswith(b"#"):
            k, v = line.split(b":", 1)
            out[k.decode()] = v.decode()
    return raw, out


def info(ports):
    conns = [authed(p) for p in ports]
    for c in conns:
        call(c, "FLUSHALL")
        call(c, "MSET", *["k%d" % i for i in range(100) for _ in (0, 1)])
        call(c, "SELECT", "3")
        call(c, "MSET", *["d3k%d" % i for i in range(10) for _ in (0, 1)])
        call(c, "SELECT", "0")
    raws = [info_of(c, "keyspace")[0] for c in conns]
    check(raws[0] == raws[1], "INFO keyspace: redis %r, uring-kv %r" % tuple(raws))
    for c in conns:
        for i in range(7):
            call(c, "EXPIRE", "k%d" % i, "100000")
    spaces = [info_of(c, "keyspace")[1] for c in conns]
    for s in spaces:
        check(s["db0"].startswith("keys=100,expires=7,avg_ttl=") and s["db3"] == "keys=10,expires=0,avg_ttl=0",
              "INFO keyspace with deadlines: %r" % s)
    avg = int(spaces[1]["db0"].split("avg_ttl=")[1])
    check(90_000_000 < avg <= 100_000_000, "uring-kv's avg_ttl is the mean time left: %d" % avg)
    for c in conns:
        raw = call(c, "INFO")[1]
        heads = [l for l in raw.split(b"\r\n") if l.startswith(b"#")]
        check(heads[:2] == [b"# Server", b"# Clients"] and b"# Keyspace" in heads and b"# Stats" in heads
              and b"\r\n\r\n# Clients\r\n" in raw and raw.endswith(b"\r\n") and not raw.endswith(b"\r\n\r\n"),
              "INFO's layout: %r" % heads)
        check(info_of(c, "nosuch")[0] == b"" and info_of(c, "KEYSPACE")[1].keys() == info_of(c, "keyspace")[1].keys(),
              "INFO of an unknown section, and names in any case")
    # Counters: the same deltas on both for the same commands.
    deltas = []
    for port, c in zip(ports, conns):
        before = info_of(c, "stats")[1]
        clients_before = int(info_of(c, "clients")[1]["connected_clients"])
        for k in ["k1", "k2", "nosuch", "k3", "no2"]:
            call(c, "GET", k)
        call(c, "MGET", "k4", "x", "k5", "y")
        extra = [Conn(port) for _ in range(3)]
        check(poll(lambda: int(info_of(c, "clients")[1]["connected_clients"]) == clients_before + 3),
              "port %d connected_clients counts 3 more" % port)
        call(c, "SET", "gone1", "v", "PX", "1")
        call(c, "SET", "gone2", "v", "PX", "1")
        check(poll(lambda: int(info_of(c, "stats")[1]["expired_keys"]) >= int(before["expired_keys"]) + 2),
              "port %d expired_keys counts active expiry" % port)
        after = info_of(c, "stats")[1]
        deltas.append({k: int(after[k]) - int(before[k])
                       for k in ("keyspace_hits", "keyspace_misses", "total_connections_received")})
        for e in extra:
            e.close()
    check(deltas[0] == deltas[1] and deltas[0]["keyspace_hits"] == 5, "INFO stats deltas: %r" % deltas)
    for c in conns:  # between two INFO on one connection: the commands between them and the first INFO
        a = int(info_of(c, "stats")[1]["total_commands_processed"])
        call(c, "PING")
        call(c, "GET", "k1")
        b = int(info_of(c, "stats")[1]["total_commands_processed"])
        check(b - a == 3, "total_commands_processed delta %d" % (b - a))
    # keyspace_hits and keyspace_misses per command, on a key that is there and one that is not: the same on
    # both (Redis counts every read lookup: STRLEN, GETRANGE, the TTL family, TYPE, EXISTS, GETEX, SET GET,
    # COPY's source; not those of writes: APPEND, RENAME).
    reads = [["STRLEN", "{}"], ["GETRANGE", "{}", "0", "1"], ["SUBSTR", "{}", "0", "1"], ["TTL", "{}"],
             ["PTTL", "{}"], ["EXPIRETIME", "{}"], ["PEXPIRETIME", "{}"], ["TYPE", "{}"], ["EXISTS", "{}", "{}"],
             ["TOUCH", "{}"], ["GETEX", "{}"], ["SET", "{}", "v", "GET"], ["SET", "{}", "v"], ["GETSET", "{}", "v"],
             ["GETDEL", "{}"], ["COPY", "{}", "copied"], ["APPEND", "{}", "x"], ["RENAME", "{}", "renamed"],
             ["MGET", "{}", "k11"], ["PERSIST", "{}"], ["INCR", "{}"]]
    for cmd in reads:
        for key in ("k10", "nosuch"):
            counted = []
            for c in conns:
                call(c, "SET", "k10", "v", "EX", "1000")
                call(c, "DEL", "copied", "renamed", "nosuch")
                before = info_of(c, "stats")[1]
                call(c, *[a.format(key) for a in cmd])
                after = info_of(c, "stats")[1]
                counted.append([int(after[k]) - int(before[k]) for k in ("keyspace_hits", "keyspace_misses")])
            check(counted[0] == counted[1], "%r on %s: redis counts hits, misses %r, uring-kv %r"
                  % (cmd, key, counted[0], counted[1]))
    # CONFIG RESETSTAT: the counters start again from zero on both (the INFO that reads them counted).
    stats = []
    for c in conns:
        check(call(c, "CONFIG", "RESETSTAT")[0] == b"+OK\r\n", "CONFIG RESETSTAT")
        s = info_of(c, "stats")[1]
        stats.append({k: s[k] for k in ("total_connections_received", "total_commands_processed", "expired_keys",
                                        "keyspace_hits", "keyspace_misses")})
    check(stats[0] == stats[1] and stats[0]["total_commands_processed"] == "1",
          "INFO stats after CONFIG RESETSTAT: redis %r, uring-kv %r" % tuple(stats))
    kv = conns[1]
    used = int(info_of(kv, "memory")[1]["used_memory"])
    for i in range(8):
        call(kv, "SET", "big%d" % i, "x" * 1_000_000)
    grown = int(info_of(kv, "memory")[1]["used_memory"])
    if used == 0:  # a sanitizer's allocator, which glibc's mallinfo2 does not see
        print("used_memory is 0: the allocator's statistics are not glibc's; its growth is not checked")
    else:
        check(grown - used >= 7_000_000, "used_memory grows with the values stored: %d -> %d" % (used, grown))
    for c in conns:
        c.close()


def bounds(kv_port):
    c = authed(kv_port)
    check(call(c, "CLIENT", "SETNAME", "n" * 1024)[0] == b"+OK\r\n", "a name of 1024 bytes")
    r = call(c, "CLIENT", "SETNAME", "n" * 1025)[0]
    check(r.startswith(b"-ERR Client names are limited to 1024 bytes"), "a name of 1025 bytes: %r" % r)
    r = call(c, "HELLO", "3", "SETNAME", "n" * 1025)[0]
    check(r.startswith(b"-ERR Client names are limited to 1024 bytes"), "HELLO SETNAME of 1025 bytes: %r" % r)
    # Nothing persists: save and appendonly take only their fixed values, refused as Redis refuses an
    # immutable parameter, and the whole CONFIG SET with them.
    for name, value in (("appendonly", "yes"), ("save", "3600 1")):
        r = call(c, "CONFIG", "SET", "proto-max-bulk-len", "2mb", name, value)[0]
        check(r == b"-ERR CONFIG SET failed (possibly related to argument '%s') - can't set immutable config\r\n"
              % name.encode(), "CONFIG SET %s %s: %r" % (name, value, r))
    r = [call(c, "CONFIG", "GET", n)[0] for n in ("appendonly", "save", "proto-max-bulk-len")]
    check(r == [b"*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n", b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n",
                b"*2\r\n$18\r\nproto-max-bulk-len\r\n$9\r\n536870912\r\n"], "nothing set: %r" % r)
    c.close()


def password_file(binary, backend, shards):
    with tempfile.NamedTemporaryFile("w", suffix=".pw") as f:
        f.write("from-file\r\nsecond line\n")
        f.flush()
        proc, port = compat.start_kv(binary, backend, shards, ["--requirepass-file", f.name])
        try:
            c = Conn(port)
            check(call(c, "PING")[0] == b"-NOAUTH Authentication required.\r\n", "NOAUTH with a password file")
            check(call(c, "AUTH", "second line")[0].startswith(b"-WRONGPASS"), "only the first line")
            check(call(c, "AUTH", "from-file")[0] == b"+OK\r\n", "AUTH with the file's first line")
            c.close()
        finally:
            proc.kill()
            proc.wait()


def main():
    binary, backend, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with both_servers(binary, backend, shards, ["--requirepass", PASSWORD], ["--requirepass", PASSWORD]) as ports:
        for part in (auth_sequences, redis_cli, redis_py, client_lines, client_idle, client_kill, info):
            part(ports)
        auth_failures_close(ports[1])
        bounds(ports[1])
    password_file(binary, backend, shards)
    if compat.failures:
        print("%d failures" % len(compat.failures))
        sys.exit(1)
    print("uring-kv connection commands (%s, %d shards): ok" % (backend, shards))


if __name__ == "__main__":
    main()
