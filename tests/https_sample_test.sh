#!/usr/bin/env bash
# https_sample_test.sh <uring-http> <backend>: makes a test CA and a server certificate with the openssl CLI
# (in a scratch directory, valid two days), starts uring-http with --tls-cert/--tls-key on two free ports
# with the given backend and checks the HTTPS port with real clients: curl (GET / over TLS 1.3 with ALPN
# http/1.1, keep-alive reuse, files of several sizes byte for byte, an unknown CA and a wrong host name
# refused, plain HTTP on the other port at the same time), openssl s_client (the chain verified), python3's
# ssl module (a clean close_notify at the end, 408 for a request not finished in time, a client that never
# starts its handshake dropped after --handshake-timeout, a connection over --max-connections closed before
# its handshake), then SIGTERM with an idle connection open: close_notify, exit 0; last, a second server
# with --tls-client-ca serves a client certificate the CA signed and refuses a client without one.
set -euo pipefail
server=$1
backend=$2
dir=$(mktemp -d)
pid=
idle_pid=
cleanup() {
  if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
  if [ -n "$idle_pid" ]; then kill -KILL "$idle_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 \
  -subj "/CN=uring test CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
  -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile ext \
  -out server.pem 2>/dev/null

# Files served under /file/: empty, one byte, one TLS record and one byte, and larger than the 64 KiB
# buffer a file is encrypted from, not a multiple of it.
mkdir root
: >root/empty
printf x >root/one
head -c 16385 /dev/urandom >root/record
head -c 1048579 /dev/urandom >root/big

coproc srv { exec "$server" --tls-cert server.pem --tls-key server.key --port 0 --tls-port 0 --root root \
  --backend "$backend" --max-connections 3 --handshake-timeout 1 --header-timeout 1 2>"$dir/stderr"; }
pid=$srv_PID
IFS= read -r -t 10 banner <&"${srv[0]}" || fail "no port announced"
plain_port=${banner#*listening on 127.0.0.1:}
plain_port=${plain_port%% *}
port=${banner#*and on 127.0.0.1:}
port=${port%% *}
[[ "$banner" == "uring-http: listening on 127.0.0.1:"*" and on 127.0.0.1:"*" for tls ("* ]] || fail "banner: $banner"
[[ "$plain_port" =~ ^[0-9]+$ && "$port" =~ ^[0-9]+$ && "$port" != "$plain_port" ]] || fail "banner: $banner"
[[ "$banner" == *"$backend backend"* ]] || fail "banner: $banner"
url=https://localhost:$port

# Files over TLS, byte for byte, on one connection; plain HTTP on the other port meanwhile.
for f in empty one record big; do
  curl -sS --fail --cacert ca.pem "$url/file/$f" -o "got-$f" || fail "GET /file/$f over TLS"
  cmp -s "root/$f" "got-$f" || fail "/file/$f differs over TLS"
done
out=$(curl -sSv --fail --cacert ca.pem "$url/file/big" "$url/file/record" -o /dev/null -o /dev/null 2>&1)
grep -q "Re-using existing connection" <<<"$out" || fail "no reuse after a file: $out"
[ "$(curl -sS "http://127.0.0.1:$plain_port/")" = "hello" ] || fail "plain HTTP beside HTTPS"
code=0
curl -sS "http://127.0.0.1:$port/" >/dev/null 2>&1 || code=$?
[ "$code" != 0 ] || fail "plain HTTP answered on the TLS port"

# curl: the body, TLS 1.3, ALPN http/1.1, and a second request on the same connection.
[ "$(curl -sS --cacert ca.pem "$url/")" = "hello" ] || fail "GET / body"
out=$(curl -sSv --cacert ca.pem "$url/" "$url/nope" 2>&1)
grep -q "SSL connection using TLSv1.3" <<<"$out" || fail "not TLS 1.3: $out"
grep -q "ALPN: server accepted http/1.1" <<<"$out" || fail "ALPN: $out"
grep -q "Re-using existing connection" <<<"$out" || fail "no connection reuse: $out"
grep -q "< HTTP/1.1 404" <<<"$out" || fail "404: $out"
# curl refuses an unknown CA and a name the certificate does not carry (exit 60).
code=0
curl -sS "$url/" >/dev/null 2>&1 || code=$?
[ "$code" = 60 ] || fail "unknown CA: curl exit $code"
code=0
curl -sS --cacert ca.pem --resolve "wrong.test:$port:127.0.0.1" "https://wrong.test:$port/" >/dev/null 2>&1 || code=$?
[ "$code" = 60 ] || fail "wrong host name: curl exit $code"

# openssl s_client: the chain verifies and the answer arrives.
out=$(printf 'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' |
  timeout 20 openssl s_client -connect "127.0.0.1:$port" -servername localhost -CAfile ca.pem \
    -verify_return_error -ign_eof 2>&1) || fail "s_client: $out"
grep -q "Verify return code: 0 (ok)" <<<"$out" || fail "s_client verify: $out"
grep -q "^hello" <<<"$out" || fail "s_client body: $out"

# python3's ssl module: what a client sees at the end of a connection, and the time-outs.
python3 - "$port" "$dir/ca.pem" <<'PY' || fail "python checks"
import socket, ssl, sys, time
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)

def tls():
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20), server_hostname="localhost")
    s.settimeout(20)
    return s

def read_all(s):
    data = b""
    while True:
        chunk = s.recv(4096)  # b"" at close_notify; ssl.SSLEOFError for a close without it
        if not chunk:
            return data
        data += chunk

# Connection: close -> the answer, then close_notify.
s = tls()
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
out = read_all(s)
assert out.startswith(b"HTTP/1.1 200 OK") and out.endswith(b"hello\n"), out
s.close()
# A request not finished within --header-timeout: 408, then close_notify.
s = tls()
s.sendall(b"GET / HTTP/1.1\r\nHost: x")
out = read_all(s)
assert out.startswith(b"HTTP/1.1 408 "), out
s.close()
# A client that connects and never starts its handshake is dropped after --handshake-timeout.
raw = socket.create_connection(("127.0.0.1", port), timeout=20)
start = time.monotonic()
assert raw.recv(1) == b""
took = time.monotonic() - start
assert 0.8 <= took < 15, took
raw.close()
# Over --max-connections (3): the fourth is closed before its handshake; the three still work.
# The connections closed above give their places back as the server sees them close: retry until three
# are served.
held = []
for attempt in range(500):
    if len(held) == 3:
        break
    try:
        s = tls()
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        if s.recv(4096).startswith(b"HTTP/1.1 200 OK"):
            held.append(s)
            continue
    except (ssl.SSLError, OSError):
        pass
    time.sleep(0.01)
assert len(held) == 3, len(held)
try:
    tls()
    raise AssertionError("a fourth connection was served")
except (ssl.SSLError, ConnectionError, OSError) as e:
    assert not isinstance(e, socket.timeout), e
for s in held:
    s.close()
PY

# SIGTERM with an idle connection open: the client gets close_notify, the server exits 0.
# Its lines come through a fifo held open here, so that they can be read after it has exited.
mkfifo "$dir/idle"
python3 - "$port" "$dir/ca.pem" >"$dir/idle" <<'PY' &
import socket, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20), server_hostname="localhost")
s.settimeout(20)
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
out = b""
while not out.endswith(b"hello\n"):
    out += s.recv(4096)
print("answered", flush=True)
print("close_notify" if s.recv(4096) == b"" else "data", flush=True)
PY
idle_pid=$!
exec 4<"$dir/idle"
IFS= read -r -t 20 line <&4 || fail "idle client: no answer"
[ "$line" = answered ] || fail "idle client: $line"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[ "$status" = 0 ] || fail "exit status $status after SIGTERM: $(cat "$dir/stderr")"
IFS= read -r -t 20 line <&4 || fail "idle client: nothing at the drain"
[ "$line" = close_notify ] || fail "idle client at the drain: $line"
wait "$idle_pid" || fail "idle client failed"
idle_pid=
# Mutual TLS (--tls-client-ca): a client certificate the CA signed is served, none is refused.
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client.key -out client.csr \
  -subj "/CN=uring client" 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' >client-ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile client-ext \
  -out client.pem 2>/dev/null
coproc mtls { exec "$server" --tls-cert server.pem --tls-key server.key --tls-client-ca ca.pem --port 0 \
  --tls-port 0 --root root --backend "$backend" 2>"$dir/mtls-stderr"; }
pid=$mtls_PID
IFS= read -r -t 10 banner <&"${mtls[0]}" || fail "mutual TLS: no port announced"
port=${banner#*and on 127.0.0.1:}
port=${port%% *}
[ "$(curl -sS --cacert ca.pem --cert client.pem --key client.key "https://localhost:$port/")" = "hello" ] ||
  fail "mutual TLS: a client with a certificate"
code=0
out=$(curl -sS --cacert ca.pem "https://localhost:$port/" 2>&1) || code=$?
[ "$code" != 0 ] && [[ "$out" != *hello* ]] || fail "mutual TLS: served without a client certificate: $out"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[ "$status" = 0 ] || fail "mutual TLS server: exit status $status: $(cat "$dir/mtls-stderr")"
echo "PASS uring-http https $backend"
