#!/usr/bin/env python3
"""get_sample_test.py <uring-get> <uring-http> <backend>: uring-get against real servers, on loopback.

- uring-http (plain HTTP, --port 0, --root with files of 0 B, 1 B, 64 KiB+1 and 5 MiB+3 made here): bodies
  byte for byte (-o and stdout), one connection reused across URLs (-v lines), 404 -> exit 1 with its body,
  -I prints the head and no body, a bad URL is exit 2; over its HTTPS port (--tls-cert): the same bodies
  on one reused connection, an unknown CA refused;
- nginx with TLS (a test CA and server certificate made with the openssl CLI, a config in a scratch
  directory, a free port): the same bodies over https with --cacert, one TLS connection for all of them
  (-v lines, and nginx's own log of $connection), an unknown CA refused (exit 4, "verify"), a wrong host
  name refused through --resolve (exit 4), --insecure accepting it, --progress printing its line for 5 MiB;
- a python server scripting the responses: chunked bodies with extensions and trailers, a body ended by
  the close (HTTP/1.0), 100 Continue first, reuse counted by its accepts, a kept connection closed by the
  server reopened once, 512 MiB streamed with a small peak RSS, then the hostile ones: an endless header (exit 6), a close mid-body (exit 6), a bad
  chunk size (exit 6), an answer that never comes (--timeout 1: exit 5 within seconds), a TLS
  handshake never answered (--connect-timeout 1: exit 5), a refused
  connection (exit 3), and the first failing URL's status winning.
Every process started here is ended by its pid; waits are bounded loops on a banner, a port or a process.
"""
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

GET, HTTP, BACKEND = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run_get(*args, timeout=60):
    """Runs uring-get with the backend; returns (exit status, stdout bytes, stderr text, seconds)."""
    start = time.monotonic()
    p = subprocess.run([GET, "--backend", BACKEND, *args], capture_output=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace"), time.monotonic() - start


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)  # polling a port that is not open yet, bounded by the deadline
    return False


work = tempfile.mkdtemp(prefix="uring-get-test.")
root = os.path.join(work, "root")
os.mkdir(root)
files = {"empty": 0, "one": 1, "mid": 64 * 1024 + 1, "big": 5 * 1024 * 1024 + 3}
contents = {}
for name, size in files.items():
    contents[name] = os.urandom(size)
    with open(os.path.join(root, name), "wb") as f:
        f.write(contents[name])
started = []  # processes to end by pid


def cleanup():
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()
    shutil.rmtree(work, ignore_errors=True)


try:
    # ---------------------------------------------------------------- uring-http, plain HTTP
    http = subprocess.Popen([HTTP, "--port", "0", "--root", root, "--backend", BACKEND],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    started.append(http)
    banner = http.stdout.readline()  # the server prints it once listening, or exits
    check(banner.startswith("uring-http: listening on 127.0.0.1:"), "uring-http banner: %r" % banner)
    port = int(banner.split("127.0.0.1:")[1].split()[0])
    base = "http://127.0.0.1:%d" % port

    for name in files:
        out = os.path.join(work, "out-" + name)
        code, _, err, _ = run_get("-o", out, "%s/file/%s" % (base, name))
        check(code == 0 and err == "", "http %s: exit %d, stderr %r" % (name, code, err))
        with open(out, "rb") as f:
            check(f.read() == contents[name], "http %s: bytes differ" % name)

    urls = ["%s/file/%s" % (base, n) for n in files] + [base + "/file/missing"]
    code, out, err, _ = run_get("-v", *urls)
    check(code == 1, "http 404 among 200s: exit %d (want 1): %s" % (code, err))
    check(out == b"".join(contents.values()) + b"not found\n", "http: bodies on stdout, 404's last")
    check(err.count("* connected to 127.0.0.1:%d (127.0.0.1:%d)" % (port, port)) == 1,
          "http: one connection: %s" % err)
    check(err.count("* reusing connection to 127.0.0.1:%d" % port) == 4, "http: reuse: %s" % err)
    check("< HTTP/1.1 404 Not Found" in err and err.count("< HTTP/1.1 200 OK") == 4, "http: status lines: %s" % err)

    code, out, err, _ = run_get("-I", "%s/file/big" % base)
    check(code == 0, "http -I: exit %d: %s" % (code, err))
    check(out.startswith(b"HTTP/1.1 200 OK\r\n") and b"\r\nContent-Length: %d\r\n" % files["big"] in out
          and out.endswith(b"\r\n\r\n"), "http -I: head %r" % out)

    for bad in ["ftp://x/", "http://", "http://host:99999/", "http://user@host/", "http://[::1/", "nohost",
                "http://a b/"]:
        code, _, err, _ = run_get(bad)
        check(code == 2 and ("uring-get: %s: " % bad) in err, "bad URL %r: exit %d: %s" % (bad, code, err))
    code, _, err, _ = run_get("-o", os.path.join(work, "x"), base + "/", base + "/")
    check(code == 2, "-o with two URLs: exit %d" % code)
    http.terminate()
    http.wait(timeout=30)

    # ---------------------------------------------------------------- nginx, HTTPS
    tls = os.path.join(work, "tls")
    os.mkdir(tls)

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=tls, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=uring-get test CA")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key",
            "-out", "server.csr", "-subj", "/CN=localhost")
    with open(os.path.join(tls, "ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", "ext", "-out", "server.pem")
    # Another CA, which signed nothing here: trusting it alone must refuse nginx's certificate.
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "other.key",
            "-out", "other.pem", "-days", "2", "-subj", "/CN=unrelated CA")

    ngx = os.path.join(work, "nginx")
    for d in ["", "body", "proxy", "fastcgi", "uwsgi", "scgi"]:
        os.makedirs(os.path.join(ngx, d), exist_ok=True)
    nginx = None
    for attempt in range(5):
        sport = free_port()
        with open(os.path.join(ngx, "nginx.conf"), "w") as f:
            f.write("""daemon off;
master_process off;
pid {n}/nginx.pid;
error_log {n}/error.log;
events {{ worker_connections 64; }}
http {{
  log_format conn '$connection $connection_requests $request_method $uri $status';
  access_log {n}/access.log conn;
  client_body_temp_path {n}/body;
  proxy_temp_path {n}/proxy;
  fastcgi_temp_path {n}/fastcgi;
  uwsgi_temp_path {n}/uwsgi;
  scgi_temp_path {n}/scgi;
  server {{
    listen 127.0.0.1:{port} ssl;
    server_name localhost;
    ssl_certificate {t}/server.pem;
    ssl_certificate_key {t}/server.key;
    keepalive_requests 1000;
    location /file/ {{ alias {root}/; }}
  }}
}}
""".format(n=ngx, t=tls, port=sport, root=root))
        nginx = subprocess.Popen(["nginx", "-e", os.path.join(ngx, "error.log"), "-c", os.path.join(ngx, "nginx.conf"),
                                  "-p", ngx], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(nginx)
        if wait_for_port(sport, nginx):
            break
        if nginx.poll() is None:
            nginx.kill()
        nginx.wait()
        nginx = None  # the port was taken meanwhile (or nginx failed): another one
    if nginx is None:
        with open(os.path.join(ngx, "error.log")) as f:
            check(False, "nginx did not start: " + f.read())
        raise SystemExit(1)
    sbase = "https://localhost:%d" % sport
    cacert = os.path.join(tls, "ca.pem")

    surls = ["%s/file/%s" % (sbase, n) for n in files]
    code, out, err, _ = run_get("-v", "--cacert", cacert, *surls)
    check(code == 0, "https: exit %d: %s" % (code, err))
    check(out == b"".join(contents.values()), "https: bodies differ")
    check(err.count("* connected to localhost:%d (" % sport) == 1, "https: one connection: %s" % err)
    check(err.count("* reusing connection to localhost:%d" % sport) == 3, "https: reuse: %s" % err)
    check("ALPN http/1.1" in err, "https: ALPN: %s" % err)
    # nginx's view: the four requests came on one connection, its requests 1 to 4.
    with open(os.path.join(ngx, "access.log")) as f:
        lines = [line.split() for line in f.read().splitlines()]
    check(len(lines) == 4 and len({line[0] for line in lines}) == 1 and [line[1] for line in lines] == ["1", "2", "3", "4"],
          "https: nginx access log: %r" % lines)

    for name in files:
        out_file = os.path.join(work, "sout-" + name)
        code, _, err, _ = run_get("--cacert", cacert, "-o", out_file, "%s/file/%s" % (sbase, name))
        with open(out_file, "rb") as f:
            check(code == 0 and f.read() == contents[name], "https %s: exit %d: %s" % (name, code, err))

    code, _, err, _ = run_get("--cacert", os.path.join(tls, "other.pem"), sbase + "/file/one")
    check(code == 4 and "uring-get: %s/file/one: tls handshake: certificate verify failed" % sbase in err,
          "https unknown CA: exit %d: %s" % (code, err))
    wrong = "https://wrong.test:%d/file/one" % sport
    resolve = "wrong.test:%d:127.0.0.1" % sport
    code, _, err, _ = run_get("--cacert", cacert, "--resolve", resolve, wrong)
    check(code == 4 and "verify failed" in err and "mismatch" in err.lower(),
          "https wrong host name: exit %d: %s" % (code, err))
    code, out, err, _ = run_get("-v", "--insecure", "--resolve", resolve, wrong)
    check(code == 0 and out == contents["one"], "https --insecure: exit %d: %s" % (code, err))
    check("* connected to wrong.test:%d (127.0.0.1:%d)" % (sport, sport) in err, "--resolve: %s" % err)

    code, out, err, _ = run_get("--progress", "--cacert", cacert, sbase + "/file/big")
    check(code == 0 and out == contents["big"], "https --progress: exit %d" % code)
    total = files["big"]
    check(("uring-get: %s/file/big: %d of %d bytes (100%%), " % (sbase, total, total)) in err and err.endswith("MiB/s\n"),
          "--progress line: %r" % err[-300:])
    code, out, err, _ = run_get("--progress", "--cacert", cacert, sbase + "/file/mid")
    check(code == 0 and "bytes" not in err, "no progress line below 1 MiB: %r" % err)
    nginx.terminate()
    nginx.wait(timeout=30)

    # ---------------------------------------------------------------- uring-http, HTTPS
    https = subprocess.Popen([HTTP, "--port", "0", "--tls-port", "0", "--tls-cert", os.path.join(tls, "server.pem"),
                              "--tls-key", os.path.join(tls, "server.key"), "--root", root, "--backend", BACKEND],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    started.append(https)
    banner = https.stdout.readline()
    check(" for tls " in banner, "uring-http --tls-cert banner: %r" % banner)
    tport = int(banner.split("and on 127.0.0.1:")[1].split()[0])
    tbase = "https://localhost:%d" % tport
    code, out, err, _ = run_get("-v", "--cacert", cacert, *["%s/file/%s" % (tbase, n) for n in files])
    check(code == 0 and out == b"".join(contents.values()), "uring-http https: exit %d: %s" % (code, err))
    check(err.count("* connected to localhost:%d (" % tport) == 1, "uring-http https: one connection: %s" % err)
    check(err.count("* reusing connection to localhost:%d" % tport) == len(files) - 1,
          "uring-http https: reuse: %s" % err)
    code, _, err, _ = run_get("--cacert", os.path.join(tls, "other.pem"), tbase + "/")
    check(code == 4 and "certificate verify failed" in err, "uring-http https unknown CA: exit %d: %s" % (code, err))
    https.terminate()
    https.wait(timeout=30)

    # ---------------------------------------------------------------- scripted responses
    accepts = [0]
    huge = 512 << 20
    lock = threading.Lock()
    endless_sent = [0]

    def answer(path):
        """(bytes to send, whether to close afterwards, streaming function or None)"""
        if path == "/chunked":
            return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n"
                    b"7 ; x=\"y;z\"\r\n, world\r\n0\r\nX-Checksum: abc\r\nX-More: 1\r\n\r\n"), False
        if path == "/http10":
            return b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close\r\nof the connection", True
        if path == "/continue":
            return b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nafter", False
        if path == "/ka":
            return b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nka\n", False
        if path == "/ka-then-close":
            return b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nkc\n", True
        if path == "/cut":
            return b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", True
        if path == "/bad-chunk":
            return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n", True
        if path == "/redirect":
            return b"HTTP/1.1 302 Found\r\nLocation: /ka\r\nContent-Length: 6\r\n\r\nmoved\n", False
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", False

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            with lock:
                accepts[0] += 1
            s = self.request
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = s.recv(65536)
                    if not data:
                        return
                    buf += data
                    if buf.startswith(b"\x16"):  # a TLS ClientHello: never answered
                        while s.recv(65536):
                            pass
                        return
                head, buf = buf.split(b"\r\n\r\n", 1)
                path = head.split(b" ")[1].decode()
                if path == "/silent":
                    while s.recv(65536):  # never answers; ends when the client gives up and closes
                        pass
                    return
                if path == "/huge":
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % huge)
                    block = b"x" * (1 << 20)
                    try:
                        for _ in range(huge >> 20):
                            s.sendall(block)
                    except OSError:
                        return
                    continue
                if path == "/endless-header":
                    s.sendall(b"HTTP/1.1 200 OK\r\nX-Endless: ")
                    try:
                        while True:  # until the client refuses the head and closes
                            s.sendall(b"a" * 4096)
                            endless_sent[0] += 4096
                    except OSError:
                        return
                data, close = answer(path)
                s.sendall(data)
                if close:
                    s.shutdown(socket.SHUT_WR)
                    return

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pbase = "http://127.0.0.1:%d" % server.server_address[1]

    def scripted(*args, **kw):
        accepts[0] = 0
        return run_get(*args, **kw)

    code, out, err, _ = scripted(pbase + "/chunked")
    check(code == 0 and out == b"hello, world", "chunked: exit %d, %r: %s" % (code, out, err))
    code, out, err, _ = scripted(pbase + "/http10")
    check(code == 0 and out == b"until the close\r\nof the connection", "HTTP/1.0 until close: %d %r %s" % (code, out, err))
    code, out, err, _ = scripted("-v", pbase + "/continue", pbase + "/ka")
    check(code == 0 and out == b"afterka\n" and "< HTTP/1.1 100" not in err, "100 Continue: %d %r %s" % (code, out, err))
    code, out, err, _ = scripted("-v", pbase + "/ka", pbase + "/chunked", pbase + "/ka")
    check(code == 0 and out == b"ka\nhello, worldka\n", "keep-alive: %d %r" % (code, out))
    check(accepts[0] == 1 and err.count("* reusing connection") == 2, "keep-alive: %d accepts: %s" % (accepts[0], err))
    # A body ended by the close, and a server closing after its answer: a new connection each time, and
    # the reused connection that turns out closed is replaced without an error.
    code, out, err, _ = scripted("-v", pbase + "/http10", pbase + "/ka", pbase + "/ka-then-close", pbase + "/ka")
    check(code == 0 and out == b"until the close\r\nof the connection" + b"ka\nkc\nka\n",
          "reconnect: %d %r %s" % (code, out, err))
    check(accepts[0] == 3, "reconnect: %d accepts (want 3): %s" % (accepts[0], err))
    code, out, err, _ = scripted(pbase + "/redirect")
    check(code == 1 and out == b"moved\n", "302 not followed: exit %d %r" % (code, out))

    # A body far larger than any buffer streams through: uring-get's peak RSS is about what it is for a
    # 3-byte body. (ru_maxrss also counts this python forked before the exec: the same in both runs.)
    def peak_rss(url):
        p = subprocess.Popen([GET, "--backend", BACKEND, "-o", "/dev/null", url], stderr=subprocess.PIPE)
        err = p.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        check(p.returncode == 0, "%s: exit %d: %s" % (url, p.returncode, err))
        return usage.ru_maxrss

    small, large = peak_rss(pbase + "/ka"), peak_rss(pbase + "/huge")
    check(large - small < 16 * 1024, "huge body: peak RSS %d KiB, %d KiB for 3 bytes" % (large, small))

    # Hostile servers.
    code, out, err, _ = scripted(pbase + "/endless-header")
    check(code == 6 and "uring-get: %s/endless-header: response head too large" % pbase in err,
          "endless header: exit %d: %s" % (code, err))
    code, out, err, _ = scripted(pbase + "/cut")
    check(code == 6 and "uring-get: %s/cut: connection closed before the body ended" % pbase in err
          and out == b"0123456789", "cut body: exit %d %r: %s" % (code, out, err))
    code, out, err, _ = scripted(pbase + "/bad-chunk")
    check(code == 6 and "bad chunk size" in err and out == b"hello", "bad chunk: exit %d: %s" % (code, err))
    code, out, err, took = scripted("--timeout", "1", pbase + "/silent")
    check(code == 5 and "timed out after 1 s (--timeout)" in err and 0.9 <= took < 5,
          "silent server: exit %d after %.1fs: %s" % (code, took, err))
    # A TLS handshake that never gets an answer ends at --connect-timeout.
    code, out, err, took = scripted("--connect-timeout", "1", "--timeout", "30", pbase.replace("http:", "https:") + "/")
    check(code == 5 and "connect timed out after 1 s (--connect-timeout)" in err and 0.9 <= took < 5,
          "silent TLS server: exit %d after %.1fs: %s" % (code, took, err))
    closed = free_port()  # nothing listens there
    code, out, err, _ = scripted("http://127.0.0.1:%d/" % closed)
    check(code == 3 and "Connection refused" in err, "refused: exit %d: %s" % (code, err))
    # The first failing URL's kind wins; the later URLs are still fetched.
    code, out, err, _ = scripted(pbase + "/redirect", "http://127.0.0.1:%d/" % closed, pbase + "/ka")
    check(code == 1 and out == b"moved\nka\n", "first failure wins (1): exit %d %r" % (code, out))
    code, out, err, _ = scripted("http://127.0.0.1:%d/" % closed, pbase + "/cut", pbase + "/redirect")
    check(code == 3 and out.endswith(b"moved\n"), "first failure wins (3): exit %d %r" % (code, out))
    server.shutdown()
    server.server_close()
finally:
    cleanup()

if failures:
    print("%d check(s) failed on %s" % (len(failures), BACKEND))
    sys.exit(1)
print("get_sample_test: all checks passed on", BACKEND)
