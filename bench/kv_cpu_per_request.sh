#!/usr/bin/env bash
# kv_cpu_per_request.sh SERVER... — server CPU time per request of two or more uring-kv builds, and
# redis-server beside them (name it as a SERVER: `redis-server`), taking turns within each round, each round
# led by the next server. Each server in turn (pinned to CPU 1, the client to CPU 0) takes redis-benchmark's
# commands, `-n REQUESTS -c 50 -P PIPELINE`, and TX, transactions from kv_tx_client.py; prints each run's
# server CPU per request (the sum over its threads of /proc/PID/task/TID/schedstat's time on CPU, in
# nanoseconds), then each figure's median per server and its ratio to the first server's.
# Environment: ROUNDS (3), REQUESTS (300000), PIPELINE (1), COMMANDS (redis-benchmark -t names, "get set
# incr"), TX (1: run the transactions too), THREADS (uring-kv --threads, 1), BACKEND (native), KEYSPACE
# (keys drawn from this many, redis-benchmark -r; 0, the default: one key), PIN (1, the default: server on
# CPU 1 and client on CPU 0; 0: neither pinned, as for several threads).
set -euo pipefail
rounds=${ROUNDS:-3}
n=${REQUESTS:-300000}
P=${PIPELINE:-1}
commands=${COMMANDS:-get set incr}
tx=${TX:-1}
threads=${THREADS:-1}
backend=${BACKEND:-native}
keyspace=${KEYSPACE:-0}
range=()
[ "$keyspace" -gt 0 ] && range=(-r "$keyspace")
server_cpu=() client_cpu=()
[ "${PIN:-1}" = 1 ] && server_cpu=(taskset -c 1) client_cpu=(taskset -c 0)
[ $# -ge 1 ] || { echo "usage: $0 SERVER... (uring-kv binaries, or redis-server)"; exit 2; }
tx_client=$(dirname "$0")/kv_tx_client.py
pid=
cpu_ns() { cat /proc/"$pid"/task/*/schedstat | awk '{t += $1} END {printf "%.0f", t}'; }  # %d: 32 bits in mawk
results=$(mktemp)
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true; rm -f "$results"' EXIT
port=$((10000 + RANDOM % 20000))  # below the ephemeral ports (32768 on), which clients take
servers=("$@")
for r in $(seq "$rounds"); do
  # Each round starts with the next server: whichever runs first in a round may find the machine quieter
  # (unpinned, two shards: ~12% either way), so no server keeps that place.
  for i in $(seq 0 $((${#servers[@]} - 1))); do
    server=${servers[$(((i + r - 1) % ${#servers[@]}))]}
    port=$((port + 1))  # a fresh port each run: a server still closing must not take its connections
    if [ "$server" = redis-server ]; then
      "${server_cpu[@]}" redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize no \
        >/dev/null 2>&1 &
    else
      "${server_cpu[@]}" "$server" --port "$port" --threads "$threads" --backend "$backend" >/dev/null 2>&1 &
    fi
    pid=$!
    for _ in $(seq 1 500); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; done
    redis-cli -p "$port" ping >/dev/null 2>&1 || { echo "$server did not start on port $port"; exit 1; }
    line="$server"
    for t in $commands; do
      before=$(cpu_ns)
      "${client_cpu[@]}" redis-benchmark -p "$port" -t "$t" -n "$n" -c 50 -P "$P" "${range[@]}" -q >/dev/null 2>&1
      after=$(cpu_ns)
      line+=" ${t^^} $(awk -v t=$((after - before)) -v n="$n" 'BEGIN {printf "%.3f", t / 1e3 / n}')"
    done
    if [ "$tx" = 1 ]; then
      before=$(cpu_ns)
      read -r _ done < <("${client_cpu[@]}" python3 "$tx_client" "$port" 50 "$P" $((n / 4)) "$keyspace")
      after=$(cpu_ns)
      line+=" TX $(awk -v t=$((after - before)) -v n="$done" 'BEGIN {printf "%.3f", t / 1e3 / n}')"
    fi
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
    echo "round $r: $line us/request"
    echo "$line" >>"$results"
  done
done
echo "medians over $rounds rounds, -P $P (us of server CPU per request; ratio to the first):"
python3 - "$results" "$1" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    words = line.split()
    figures = runs.setdefault(words[0], {})
    for k, v in zip(words[1::2], words[2::2]):
        figures.setdefault(k, []).append(float(v))
base = {k: statistics.median(v) for k, v in runs[sys.argv[2]].items()}
for server, figures in runs.items():
    print("%s: %s" % (server, "  ".join("%s %.3f (%.2fx)" % (k, statistics.median(v), statistics.median(v) / base[k])
                                       for k, v in figures.items())))
PY
