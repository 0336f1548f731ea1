#!/usr/bin/env bash
# kv_test.sh <uring-kv> <backend> <threads>: starts uring-kv on a free port and drives it with redis-cli,
# redis-benchmark and raw sockets: every command, pipelined requests whose replies must come back in order
# across shards, keys spread over every shard, malformed input answered with -ERR and a close, and SIGTERM
# giving exit status 0. Needs redis-tools (scripts/install-deps).
set -euo pipefail
server=$1 backend=$2 threads=$3
command -v redis-cli >/dev/null || { echo "redis-cli not installed (apt-get install redis-tools)"; exit 1; }
coproc server { exec "$server" --port 0 --backend "$backend" --threads "$threads"; }
pid=$server_PID
cleanup() { kill -KILL "$pid" 2>/dev/null || true; }
trap cleanup EXIT

IFS= read -r -t 10 banner <&"${server[0]}" || { echo "no port announced"; exit 1; }
[[ "$banner" =~ listening\ on\ 127\.0\.0\.1:([0-9]+)\ \(([0-9]+)\ threads,\ ([a-z]+)\ backend\) ]] ||
  { echo "unexpected banner: $banner"; exit 1; }
port=${BASH_REMATCH[1]}
[ "${BASH_REMATCH[2]}" = "$threads" ] || { echo "banner says ${BASH_REMATCH[2]} threads: $banner"; exit 1; }
[ "$backend" = auto ] || [ "${BASH_REMATCH[3]}" = "$backend" ] || { echo "wrong backend: $banner"; exit 1; }

failures=0
cli() { redis-cli -p "$port" "$@"; }
# expect "<expected output>" redis-cli args...
expect() {
  local want=$1; shift
  local got
  got=$(cli "$@" 2>&1) || true
  if [ "$got" != "$want" ]; then
    echo "FAIL: $*: expected '$want', got '$got'"
    failures=$((failures + 1))
  fi
}

# Every command through redis-cli.
expect PONG ping
expect hello ping hello
expect "hi there" echo "hi there"
expect OK set k v
expect v get k
expect "" get missing
expect OK set k v2 XX
expect "" set k v3 NX
expect v2 get k
expect OK set n 10
expect 11 incr n
expect 10 decr n
expect 15 incrby n 5
expect 5 decrby n 10
expect "ERR value is not an integer or out of range" incr k
expect OK set big 9223372036854775807
expect "ERR increment or decrement would overflow" incr big
expect 1 incr fresh
expect OK mset a 1 b 2 c 3 d 4
expect $'1\n2\n\n3\n4' mget a b nope c d
expect 3 exists a b nope d
expect 2 del a b nope
expect 0 exists a b
expect OK set t v EX 100
ttl=$(cli ttl t); [ "$ttl" -ge 99 ] && [ "$ttl" -le 100 ] || { echo "FAIL: ttl t = $ttl"; failures=$((failures + 1)); }
expect OK set t v PX 50000
pttl=$(cli pttl t); [ "$pttl" -gt 40000 ] && [ "$pttl" -le 50000 ] || { echo "FAIL: pttl t = $pttl"; failures=$((failures + 1)); }
expect -1 ttl k
expect -2 ttl missing
expect 1 expire k 1000
expect 1000 ttl k
expect 0 expire missing 10
expect 1 expire k 0
expect 0 exists k
expect "ERR invalid expire time in 'set' command" set t v EX 0
expect "ERR syntax error" set t v EX
expect "ERR syntax error" set t v BOGUS
# An expired key disappears: wait for it by polling the condition itself, not by sleeping.
expect OK set brief v PX 20
gone=0
for _ in $(seq 1 1000); do
  if [ -z "$(cli get brief)" ]; then gone=1; break; fi
done
[ "$gone" = 1 ] || { echo "FAIL: a key set with PX 20 never expired"; failures=$((failures + 1)); }
expect 0 exists brief
expect OK select 0
expect OK select 1
expect "ERR DB index is out of range" select 16
expect $'appendonly\nno\nsave\n\nclient-query-buffer-limit\n1073741824\nproto-max-bulk-len\n536870912' config get '*'
expect "ERR wrong number of arguments for 'get' command" get
expect "ERR wrong number of arguments for 'mset' command" mset a 1 b
expect "ERR unknown command 'nope', with args beginning with: 'x' " nope x
expect OK flushall
expect 0 dbsize

# Pipelined on one raw connection, written at once: 200 SETs, then GETs and INCRs interleaved, then one
# MGET of all the keys. Every reply must come back in the order of its request, whatever shard it ran on.
keyed_before=$(cli info | tr -d '\r' | sed -n 's/^keyed_commands://p')
exec 3<>"/dev/tcp/127.0.0.1/$port"
req="" want=""
for i in $(seq 0 199); do req+="SET key:$i value-$i"$'\r\n'; want+=$'+OK\r\n'; done
for i in $(seq 0 199); do
  req+="GET key:$i"$'\r\n'; v="value-$i"; want+="\$${#v}"$'\r\n'"$v"$'\r\n'
  req+="INCR counter:$((i % 7))"$'\r\n'; want+=":$((i / 7 + 1))"$'\r\n'
done
req+="*201"$'\r\n$4\r\nMGET\r\n'; want+=$'*200\r\n'
for i in $(seq 0 199); do
  k="key:$i"; v="value-$i"
  req+="\$${#k}"$'\r\n'"$k"$'\r\n'; want+="\$${#v}"$'\r\n'"$v"$'\r\n'
done
req+=$'DBSIZE\r\n'; want+=$':207\r\n'
printf '%s' "$req" >&3
got=$(timeout 10 head -c "${#want}" <&3 | od -An -c) || true
[ "$got" = "$(printf '%s' "$want" | od -An -c)" ] || { echo "FAIL: pipelined replies out of order or wrong"; failures=$((failures + 1)); }
exec 3>&-

# The keys are spread over every shard.
info=$(cli info | tr -d '\r')
for s in $(seq 0 $((threads - 1))); do
  n=$(sed -n "s/^shard${s}_keys://p" <<<"$info")
  [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "FAIL: shard $s holds no keys: $info"; failures=$((failures + 1)); }
done
# Every keyed command is counted (the pipeline above had 601); with one shard none crossed to another, with
# more some did and some did not (the keys hash over all shards).
keyed=$(sed -n 's/^keyed_commands://p' <<<"$info") forwarded=$(sed -n 's/^forwarded_commands://p' <<<"$info")
[ "$((keyed - keyed_before))" = 601 ] ||
  { echo "FAIL: keyed_commands went from $keyed_before to $keyed over 601"; failures=$((failures + 1)); }
if [ "$threads" = 1 ]; then
  [ "$forwarded" = 0 ] || { echo "FAIL: forwarded_commands $forwarded with one shard"; failures=$((failures + 1)); }
else
  [ "$forwarded" -gt 0 ] && [ "$forwarded" -lt "$keyed" ] ||
    { echo "FAIL: forwarded_commands $forwarded of $keyed"; failures=$((failures + 1)); }
fi

# redis-cli --pipe (mass insertion) and redis-benchmark, pipelined, must work against it.
pipe_out=$(for i in $(seq 1 1000); do printf 'SET pipe:%d %d\r\n' "$i" "$i"; done | cli --pipe 2>&1)
grep -q "errors: 0, replies: 1000" <<<"$pipe_out" || { echo "FAIL: --pipe: $pipe_out"; failures=$((failures + 1)); }
expect 1000 get pipe:1000
bench=$(redis-benchmark -p "$port" -t set,get -n 2000 -c 4 -P 8 -q 2>&1 | tr '\r' '\n')
grep -q "^SET: .* requests per second" <<<"$bench" && grep -q "^GET: .* requests per second" <<<"$bench" ||
  { echo "FAIL: redis-benchmark: $bench"; failures=$((failures + 1)); }

# An unknown command is answered and the connection goes on; malformed input is answered and closed.
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'FOO\r\nPING\r\n' >&3
want=$'-ERR unknown command \'FOO\', with args beginning with: \r\n+PONG\r\n'
got=$(timeout 5 head -c "${#want}" <&3 | od -An -c) || true
[ "$got" = "$(printf '%s' "$want" | od -An -c)" ] || { echo "FAIL: unknown command: '$got'"; failures=$((failures + 1)); }
exec 3>&-
malformed() {  # malformed <request> <expected error line>
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf '%s' "$1" >&3
  local got
  got=$(timeout 5 cat <&3) || { echo "FAIL: connection left open after '$1'"; failures=$((failures + 1)); }
  [ "$got" = "$2"$'\r' ] || { echo "FAIL: '$1' -> '$got'"; failures=$((failures + 1)); }
  exec 3>&-
}
malformed $'*1\r\n$abc\r\n' "-ERR Protocol error: invalid bulk length"
malformed $'*2\r\n$3\r\nGET\r\n$536870913\r\n' "-ERR Protocol error: invalid bulk length"
malformed $'*2147483648\r\n' "-ERR Protocol error: invalid multibulk length"
malformed $'*1\r\n+PING\r\n' "-ERR Protocol error: expected '\$', got '+'"
malformed $'*1\r\n$4\r\nPINGxx' "-ERR Protocol error: expected CRLF after bulk string"
expect PONG ping  # and the server lives on

# SIGTERM (to its pid): exit status 0.
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 0 ] || { echo "FAIL: exit status $status after SIGTERM"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "uring-kv ($backend, $threads threads): all commands, pipelining in order, malformed input, SIGTERM: ok"
