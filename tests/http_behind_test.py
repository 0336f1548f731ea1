#!/usr/bin/env python3
"""http_behind_test.py <uring-http> <backend>: clients that pipeline and do not read hold no shared buffers.

HOGS clients, each with a small receive buffer (SO_RCVBUF before connect), pipeline requests for small files
(under 16 KiB of answers per 4 KiB read, so no burst flush pauses receiving for them) and read nothing, each
keeping AHEAD batches of requests beyond the answers it has been sent; the server's writes to them stop once
their answers fill the socket buffers. Leased, a flush to a peer that is behind (SIOCOUTQ over out_limit)
ends the connection's armed receive first; left armed, each waiting connection would hold up to 16 of its
executor's 1024 receive buffers, and HOGS of them all of them.
 - Once the server has stopped on every hog, another client is answered at once (starved of buffers, it
   would get nothing before the header timeout).
 - Then each hog reads: every answer arrives complete and in order, byte for byte (what a pause took in is
   answered before the connection reads again).
"""
import fcntl
import os
import socket
import struct
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_util import Server, exchange, fail, status_of  # noqa: E402

HOGS = 160  # more than the 1024 buffers of a thread over the 16 one connection may hold
COUNT = 4000  # 4000 answers of about 2.6 KB each: more than a hog's socket buffers take
FILES = 4
REQUEST = 1024  # a request's bytes: a 4 KiB read brings at most 5, under 16 KiB of answers
BATCH = 4  # requests per send: 4 KiB, a receive buffer's size
AHEAD = 7  # batches sent beyond the answers: at most 14 chunks (a client over 16 chunks ahead when
#            receiving pauses is dropped), and more than the 1024 / HOGS chunks it takes to hold them all


def request(j):
    head = b"GET /file/f%d HTTP/1.1\r\nHost: x\r\nX-Pad: " % (j % FILES)
    return head + b"p" * (REQUEST - len(head) - 4) + b"\r\n\r\n"


def tcp_queues(port):
    """{peer port: (tx_queue, rx_queue)} of the server's connections on `port` (/proc/net/tcp)."""
    out = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote, queues = fields[1], fields[2], fields[4]
            if int(local.split(":")[1], 16) != port or remote.endswith(":0000"):
                continue
            tx, rx = (int(q, 16) for q in queues.split(":"))
            out[int(remote.split(":")[1], 16)] = (tx, rx)
    return out


def unread(sock):
    """Bytes received on `sock` and not read yet (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def main():
    binary, backend = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as root:
        bodies = [os.urandom(2500) for _ in range(FILES)]
        for i, body in enumerate(bodies):
            with open(os.path.join(root, "f%d" % i), "wb") as f:
                f.write(body)
        args = ["--threads", "1", "--write-timeout", "120", "--header-timeout", "150"]
        with Server(binary, backend, root, args) as srv:
            # Each file's answer as the server writes it, to compare the hogs' streams with.
            answers = []
            for i in range(FILES):
                reply = exchange(srv.port, request(i))
                if status_of(reply) != 200 or not reply.endswith(bodies[i]):
                    fail("GET /file/f%d: %r" % (i, reply[:200]))
                answers.append(reply)

            hogs = []
            for _ in range(HOGS):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", srv.port))
                s.settimeout(60)
                hogs.append(s)
            # Each hog keeps about AHEAD batches of requests beyond the answers it has been sent (unread, or
            # queued at the server), until the server stops on it: its answers fill the socket buffers. Then
            # what each hog was sent and what the server took of its input stop changing: polled until every
            # hog is unchanged over 5 consecutive looks, 0.1 s apart.
            ports = [s.getsockname()[1] for s in hogs]
            sent = [0] * HOGS
            answer_len = len(answers[0])
            deadline = time.monotonic() + 90
            last, same = None, 0
            while same < 5:
                if time.monotonic() > deadline:
                    fail("the server never stopped on the hogs")
                queues = tcp_queues(srv.port)
                now = [(queues.get(p), unread(s)) for p, s in zip(ports, hogs)]
                pushed = False
                for n, s in enumerate(hogs):
                    answered = ((now[n][0] or (0, 0))[0] + now[n][1]) // answer_len
                    while sent[n] < COUNT and sent[n] - answered < AHEAD * BATCH:
                        s.sendall(b"".join(request(sent[n] + j) for j in range(BATCH)))
                        sent[n] += BATCH
                        pushed = True
                same = same + 1 if now == last and not pushed else 0
                last = now
                if not pushed:
                    time.sleep(0.1)
            stalled = sum(1 for (q, _) in last if q is not None and q[1] > 0)

            started = time.monotonic()
            reply = exchange(srv.port, b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", timeout=20)
            waited = time.monotonic() - started
            if status_of(reply) != 200:
                fail("another client, while %d hogs wait (%d with input unread): %r after %.1f s"
                     % (HOGS, stalled, reply[:80], waited))

            for n, s in enumerate(hogs):
                expected = b"".join(answers[j % FILES] for j in range(sent[n]))
                got = bytearray()
                while len(got) < len(expected):
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    got += chunk
                if got != expected:
                    at = next((i for i in range(min(len(got), len(expected))) if got[i] != expected[i]),
                              min(len(got), len(expected)))
                    fail("hog %d: %d of %d bytes, first difference at %d" % (n, len(got), len(expected), at))
                s.close()
            srv.stop()
            print("uring-http (%s): %d clients x %d pipelined requests, not reading (%d with input left "
                  "unread): another client answered in %.2f s; then every answer arrived in order"
                  % (backend, HOGS, COUNT, stalled, waited))


if __name__ == "__main__":
    main()
