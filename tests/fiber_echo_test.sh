#!/usr/bin/env bash
# fiber_echo_test.sh <uring-fiber-echo>: starts the echo server on a free port, echoes bytes over two
# connections at once (one of them left open), then stops it with SIGTERM (by its pid) and expects exit 0.
set -euo pipefail
server=$1
coproc server { exec "$server" --port 0; }
pid=$server_PID
cleanup() { kill -KILL "$pid" 2>/dev/null || true; }
trap cleanup EXIT

# The server prints its port once it listens: read that line (blocking, with a timeout).
IFS= read -r -t 10 banner <&"${server[0]}" || { echo "no port announced"; exit 1; }
port=${banner#listening on 127.0.0.1:}
port=${port%% *}
[[ "$banner" == "listening on 127.0.0.1:"*" backend)" && "$port" =~ ^[0-9]+$ ]] || { echo "unexpected banner: $banner"; exit 1; }

exec 3<>"/dev/tcp/127.0.0.1/$port"
exec 4<>"/dev/tcp/127.0.0.1/$port"
printf 'hello fibers\n' >&3
printf 'second connection\n' >&4
IFS= read -r -t 5 a <&3
IFS= read -r -t 5 b <&4
[ "$a" = "hello fibers" ] || { echo "echo 1: got '$a'"; exit 1; }
[ "$b" = "second connection" ] || { echo "echo 2: got '$b'"; exit 1; }
exec 3>&-  # one closes; the other stays open across the stop

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 0 ] || { echo "exit status $status after SIGTERM"; exit 1; }
# The server closed the connection that was still open when it stopped.
if IFS= read -r -t 5 rest <&4; then echo "connection still open after stop: '$rest'"; exit 1; fi
echo "echoed and stopped cleanly"
