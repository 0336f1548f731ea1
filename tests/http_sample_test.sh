#!/usr/bin/env bash
# http_sample_test.sh <uring-http> <backend> [leased|copy]: starts the HTTP server on a free port with the given
# backend and receive mode (--recv; default leased) and
# checks it as clients see it: with curl (GET / body, keep-alive reuse, files under --root, traversal refused,
# 404, 405, HEAD) and with raw sockets (pipelining answered in order, 431, 400, 408 for a slow client, 503
# over --max-connections), then SIGTERM with a connection open: exit 0.
set -euo pipefail
server=$1
backend=$2
recv=${3:-leased}
root=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$root"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
printf 'file body\n' >"$root/x"
printf 'secret\n' >"$(dirname "$root")/http_sample_outside_$$"
trap 'cleanup; rm -f "$(dirname "$root")/http_sample_outside_$$"' EXIT

# start <args...>: runs the server, sets pid and port from its banner.
start() {
  coproc srv { exec "$server" --port 0 --backend "$backend" --recv "$recv" --root "$root" "$@"; }
  pid=$srv_PID
  pids+=("$pid")
  IFS= read -r -t 10 banner <&"${srv[0]}" || fail "no port announced"
  port=${banner#*127.0.0.1:}
  port=${port%% *}
  [[ "$banner" == "uring-http: listening on 127.0.0.1:"* && "$port" =~ ^[0-9]+$ ]] || fail "banner: $banner"
  [[ "$banner" == *"$backend backend, $recv recv"* ]] || fail "banner: $banner"
}
# raw <bytes>: sends them on a new connection and prints everything the server sends until it closes.
raw() {
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf '%b' "$1" >&3 || true  # a server that answers early may have closed already
  timeout 10 cat <&3 || true
  exec 3>&-
}

start --header-timeout 1
url=http://127.0.0.1:$port

# GET /: exact body.
[ "$(curl -sS "$url/")" = "hello" ] || fail "GET / body"
# Keep-alive: two URLs in one curl reuse the connection.
out=$(curl -sSv "$url/" "$url/file/x" 2>&1)
grep -q "Re-using existing connection" <<<"$out" || fail "no connection reuse: $out"
# A file under --root.
[ "$(curl -sS "$url/file/x")" = "file body" ] || fail "GET /file/x body"
# Traversal is refused, whatever its spelling.
for t in "/file/../http_sample_outside_$$" "/file/../etc/passwd" "/file/%2e%2e/etc/passwd" "/file//etc/passwd"; do
  code=$(curl -sS --path-as-is -o /dev/null -w '%{http_code}' "$url$t")
  [[ "$code" == 404 || "$code" == 400 ]] || fail "traversal $t answered $code"
done
# Missing things: 404; other methods: 405.
[ "$(curl -sS -o /dev/null -w '%{http_code}' "$url/nope")" = 404 ] || fail "404"
[ "$(curl -sS -o /dev/null -w '%{http_code}' "$url/file/missing")" = 404 ] || fail "404 file"
[ "$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$url/")" = 405 ] || fail "405"
# HEAD: the GET head, Content-Length of the body, and no body.
out=$(raw 'HEAD /file/x HTTP/1.1\r\nConnection: close\r\n\r\n'; echo END)  # END: $() drops trailing newlines
[[ "$out" == "HTTP/1.1 200 OK"* ]] || fail "HEAD status: $out"
grep -q $'Content-Length: 10\r' <<<"$out" || fail "HEAD length: $out"
[[ "$out" == *$'\r\n\r\nEND' ]] || fail "HEAD sent a body: $out"

# Pipelining: three requests in one write, answered in order.
out=$(raw 'GET /file/x HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nConnection: close\r\n\r\n')
order=$(grep -E '^(HTTP/1.1|hello|file body)' <<<"$out" | tr -d '\r' | tr '\n' '|')
[ "$order" = "HTTP/1.1 200 OK|file body|HTTP/1.1 404 Not Found|HTTP/1.1 200 OK|hello|" ] || fail "pipelining: $order"
# An oversized header: 431 and close.
big=$(head -c 9000 /dev/zero | tr '\0' a)
out=$(raw "GET / HTTP/1.1\r\nX-Big: $big\r\n\r\n")
[[ "$out" == "HTTP/1.1 431 "* ]] || fail "oversized header: ${out:0:80}"
# A malformed request line: 400 and close.
out=$(raw 'GET/ HTTP/1.1\r\n\r\n')
[[ "$out" == "HTTP/1.1 400 "* ]] || fail "malformed request line: $out"
# A slow client (a head never finished): 408 after --header-timeout, then close.
out=$(raw 'GET / HTTP/1.1\r\nHost: x')
[[ "$out" == "HTTP/1.1 408 "* ]] || fail "slow client: $out"
# A reset in the middle of a pipeline only ends that connection.
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /file/x HTTP/1.1\r\n\r\nGET /file/x HTTP/1.1\r\n\r\n' >&3
exec 3>&-
[ "$(curl -sS "$url/")" = "hello" ] || fail "after a reset"

# SIGTERM with an idle keep-alive connection open: the server closes it and exits 0.
exec 4<>"/dev/tcp/127.0.0.1/$port"
printf 'GET / HTTP/1.1\r\n\r\n' >&4
IFS= read -r -t 5 line <&4 || fail "no answer before SIGTERM"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 0 ] || fail "exit status $status after SIGTERM"
exec 4>&-

# The connection cap: with one allowed, a second connection while the first is open is answered 503.
start --max-connections 1
exec 4<>"/dev/tcp/127.0.0.1/$port"
printf 'GET / HTTP/1.1\r\n\r\n' >&4
IFS= read -r -t 5 line <&4 || fail "no answer on the first connection"
out=$(raw 'GET / HTTP/1.1\r\n\r\n')
[[ "$out" == "HTTP/1.1 503 "* ]] || fail "over the cap: $out"
kill -INT "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 0 ] || fail "exit status $status after SIGINT"
exec 4>&-
echo "uring-http ($backend, $recv recv): all checks passed"
