#!/usr/bin/env python3
"""http_pipeline_test.py <uring-http> <backend>: large answers to pipelined requests stay out of memory.

 - 100 x GET /file/big (a 16 MiB file) pipelined in one write, by a client that then reads nothing for
   a while: the server starts sending (answers one at a time, streams the file) and, while the client does
   not read, its RSS stays under 100 MB (answered all at once the 100 answers were 1.6 GB); then the client
   reads, and all 100 responses arrive complete, each body equal to the file.
 - A client that asks for the file and never reads is dropped after --write-timeout: the server's fd count
   returns to its baseline (the send_file piece in flight is cancelled, on both backends).
 - HEAD of the big file: its length, no body.
 - A client that asks for the file, does not read and keeps sending, and one that pipelines small requests
   and never reads, do not starve another client of the executor's receive buffers.
"""
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_util import Reader, Server, fail, status_of, exchange  # noqa: E402

BIG = 16 * 1024 * 1024
COUNT = 100
RSS_BOUND = 100 * 1024 * 1024


def flood(sock, seconds=2):
    """Sends pipelined GET / on `sock` for `seconds` without reading; returns the bytes the kernel took. Stops
    early if the server drops the connection."""
    sock.settimeout(0.2)
    data = b"GET / HTTP/1.1\r\n\r\n" * 1000
    pushed = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            pushed += sock.send(data)
        except socket.timeout:
            pass
        except OSError:
            break
    return pushed


def main():
    binary, backend = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as root:
        content = os.urandom(BIG)
        with open(os.path.join(root, "big"), "wb") as f:
            f.write(content)
        with Server(binary, backend, root, ["--write-timeout", "2"]) as srv:
            if status_of(exchange(srv.port, b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")) != 200:
                fail("GET /")
            baseline = srv.fds()

            # The burst, then no reading until the server has begun to answer.
            c = srv.connect(timeout=60)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            burst = b"GET /file/big HTTP/1.1\r\nHost: x\r\n\r\n" * COUNT
            c.sendall(burst)
            end = time.monotonic() + 60
            first = b""
            while time.monotonic() < end and not first:
                c.settimeout(max(0.1, end - time.monotonic()))
                first = c.recv(1, socket.MSG_PEEK)
            if not first:
                fail("no answer within 60 s")
            # Not reading for a while (the write timeout is 2 s: stay under it): the server must wait with
            # its output bounded, not build more.
            peak_during = 0
            for _ in range(10):
                peak_during = max(peak_during, srv.status("VmRSS"))
                time.sleep(0.1)
            c.settimeout(60)
            r = Reader(c)
            started = time.monotonic()
            for i in range(COUNT):
                got = r.response(head_only=True)
                if got is None:
                    fail("stream ended after %d responses" % i)
                code, headers, _ = got
                if code != 200 or int(headers.get("content-length", -1)) != BIG:
                    fail("response %d: %d %r" % (i, code, headers))
                r.skip_body(BIG, content)
            took = time.monotonic() - started
            c.close()
            peak = srv.status("VmHWM")
            if peak > RSS_BOUND:
                fail("peak RSS %d bytes (%d while the client did not read), bound %d" % (peak, peak_during,
                                                                                        RSS_BOUND))

            # HEAD: the length, no body.
            reply = exchange(srv.port, b"HEAD /file/big HTTP/1.1\r\nConnection: close\r\n\r\n")
            if status_of(reply) != 200 or b"Content-Length: %d\r\n" % BIG not in reply or \
                    not reply.endswith(b"\r\n\r\n"):
                fail("HEAD /file/big: %r" % reply)

            # A client that never reads: dropped after --write-timeout, its fds given back.
            stuck = srv.connect()
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stuck.sendall(b"GET /file/big HTTP/1.1\r\n\r\n")
            end = time.monotonic() + 20
            while srv.fds() <= baseline and time.monotonic() < end:
                time.sleep(0.02)
            if srv.fds() <= baseline:
                fail("the stuck client's connection never showed up")
            srv.wait_fds(baseline, deadline_s=40)
            stuck.close()
            srv.stop()
        # A client that asks for the file, does not read, and then keeps sending requests: what it sends waits in
        # its socket, not in the receive buffers the executor's connections share, so another client is
        # still answered at once (the header timeout is long: starved, it would get nothing for 20 s).
        with Server(binary, backend, root, ["--write-timeout", "60", "--header-timeout", "30"]) as srv2:
            hog = srv2.connect()
            hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            hog.sendall(b"GET /file/big HTTP/1.1\r\n\r\n")
            hog.settimeout(30)
            if not hog.recv(1, socket.MSG_PEEK):  # the server is sending the file: the flood comes after
                fail("no answer to the hog")
            pushed = flood(hog)
            # And one that only pipelines small requests, never reading its answers (it may be dropped for
            # sending too far ahead of them).
            hog2 = srv2.connect()
            hog2.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            pushed += flood(hog2)
            started = time.monotonic()
            reply = exchange(srv2.port, b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", timeout=20)
            waited = time.monotonic() - started
            hog.close()
            hog2.close()
            if status_of(reply) != 200:
                fail("another client, while two hog (%d bytes pushed): %r after %.1f s" % (pushed, reply[:80],
                                                                                             waited))
            srv2.stop()
            print("uring-http (%s): %d x %d MiB pipelined: peak RSS %.1f MB (%.1f MB while not read), read in "
                  "%.1f s; a client that never reads dropped" % (backend, COUNT, BIG >> 20, peak / 1e6,
                                                                 peak_during / 1e6, took)
                  + "; another client answered in %.2f s while two pushed %d bytes without reading" % (waited,
                                                                                                      pushed))


if __name__ == "__main__":
    main()
