#!/usr/bin/env python3
# kv_tx_client.py PORT CONNECTIONS IN_FLIGHT TRANSACTIONS KEYSPACE — the transaction load of the uring-kv
# benchmarks (kv_vs_redis.sh, kv_cpu_per_request.sh): each connection sends IN_FLIGHT transactions
# (MULTI, INCR, INCR, EXEC; keys drawn from KEYSPACE, or one key when 0) at once and waits for all their
# replies (6 lines each: +OK, +QUEUED twice, EXEC's array of two integers) before it sends the next batch.
# Prints transactions per second and the transactions done.
import random, selectors, socket, sys, time
port, conns, inflight, total, keyspace = map(int, sys.argv[1:])
def cmd(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)
rng = random.Random(1)
def key():
    return b"key:%012d" % (rng.randrange(keyspace) if keyspace else 0)
batches = [b"".join(cmd(b"MULTI") + cmd(b"INCR", key()) + cmd(b"INCR", key()) + cmd(b"EXEC")
                    for _ in range(inflight)) for _ in range(64)]
sel = selectors.DefaultSelector()
batches_each = max(1, total // (conns * inflight))
left = [batches_each] * conns
start = time.monotonic()
for i in range(conns):
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, [i, 0])
    s.sendall(batches[i % 64])
open_conns = conns
while open_conns:
    for k, _ in sel.select():
        s, state = k.fileobj, k.data
        data = s.recv(1 << 16)
        if not data:
            raise SystemExit("connection closed")
        state[1] += data.count(b"\n")
        if state[1] < 6 * inflight:
            continue
        state[1] -= 6 * inflight
        left[state[0]] -= 1
        if left[state[0]] == 0:
            sel.unregister(s)
            s.close()
            open_conns -= 1
        else:
            s.sendall(batches[(left[state[0]] + state[0]) % 64])
done = conns * inflight * batches_each
print("%.0f %d" % (done / (time.monotonic() - start), done))
