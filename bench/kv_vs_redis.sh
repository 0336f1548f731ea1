#!/usr/bin/env bash
# kv_vs_redis.sh [uring-kv binary] [requests] [rounds]: uring-kv against redis-server (no persistence), each
# command measured alone: redis-benchmark's SET, GET, INCR and MSET (10 keys), `requests` (default 1'000'000)
# each, 50 clients, pipeline 1 and 16; and TX, transactions (MULTI, INCR, INCR, EXEC: 50 connections, 1 or 16
# transactions in flight on each, `requests`/4 of them) from a small raw-socket client in this script.
# Group 1: uring-kv --threads 1 (native and emulated) and redis-server, each pinned to CPU 1, the client to
# CPU 0, one key per command (redis-benchmark's default). Group 2: uring-kv --threads 2 (native) and
# redis-server, both unpinned (on 2 cores the client competes with both shards), keys drawn from 100000 (-r),
# so that they spread over both shards; with the share of keyed commands that crossed to the other shard and
# the share that found its lock taken and hopped to its thread (from uring-kv's INFO). Every run also reads
# the server's CPU time before and after (the sum over its threads of /proc/PID/task/TID/schedstat's time on
# CPU, user and system, in nanoseconds: clock ticks are too coarse for short runs), and reports it per request
# (a transaction is one request). The servers take turns within each of `rounds` (default 3) rounds, so that a
# noisy neighbour hits them alike; the last lines are each figure's median over the rounds. Needs redis-tools
# and redis-server. Servers are stopped by their pids.
set -euo pipefail
kv=${1:-build/release/samples/uring-kv}
n=${2:-1000000}
rounds=${3:-3}
taskset -c 1 "$kv" --port 6391 --threads 1 --backend native >/dev/null 2>&1 & p1=$!
taskset -c 1 "$kv" --port 6392 --threads 1 --backend emulated >/dev/null 2>&1 & p2=$!
taskset -c 1 redis-server --bind 127.0.0.1 --port 6393 --save '' --appendonly no --daemonize no >/dev/null 2>&1 & p3=$!
"$kv" --port 6394 --threads 2 --backend native >/dev/null 2>&1 & p4=$!
redis-server --bind 127.0.0.1 --port 6395 --save '' --appendonly no --daemonize no >/dev/null 2>&1 & p5=$!
results=$(mktemp)
tx_client=$(dirname "$0")/kv_tx_client.py
trap 'kill -TERM $p1 $p2 $p3 $p4 $p5 2>/dev/null || true; rm -f "$results"' EXIT
for port in 6391 6392 6393 6394 6395; do
  for _ in $(seq 1 500); do redis-cli -p $port ping >/dev/null 2>&1 && break; done
done
declare -A name=([6391]="uring-kv native" [6392]="uring-kv emulated" [6393]="redis-server 7.0"
                 [6394]="uring-kv --threads 2 native, -r 100000" [6395]="redis-server 7.0, -r 100000")
declare -A pid=([6391]=$p1 [6392]=$p2 [6393]=$p3 [6394]=$p4 [6395]=$p5)
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{t += $1} END {printf "%.0f", t}'; }  # %d: 32 bits in mawk
per_request() { awk -v t="$1" -v r="$2" 'BEGIN {printf "%.3f", t / 1e3 / r}'; }
# run <port> <pipeline> <keyspace> [command prefix...]: "SET <rps> SET_cpu_us <us> ... TX <tps> TX_cpu_us <us>"
run() {
  local port=$1 P=$2 r=$3; shift 3
  local before after rps out="" t range=()
  [ "$r" -gt 0 ] && range=(-r "$r")
  for t in set get incr mset; do
    before=$(cpu_ns "${pid[$port]}")
    rps=$("$@" redis-benchmark -p "$port" -t "$t" -n "$n" -c 50 -P "$P" "${range[@]}" -q 2>&1 | tr '\r' '\n' |
      sed -n 's/^[A-Z]*[^:]*: \([0-9.]*\) requests per second.*/\1/p' | tail -1)
    after=$(cpu_ns "${pid[$port]}")
    out+="${t^^} $rps ${t^^}_cpu_us $(per_request $((after - before)) "$n") "
  done
  before=$(cpu_ns "${pid[$port]}")
  read -r rps done < <("$@" python3 "$tx_client" "$port" 50 "$P" $((n / 4)) "$r")
  after=$(cpu_ns "${pid[$port]}")
  echo "${out}TX $rps TX_cpu_us $(per_request $((after - before)) "$done")"
}
stat() { redis-cli -p 6394 info | tr -d '\r' | sed -n "s/^$1://p"; }
for round in $(seq 1 "$rounds"); do
  for P in 1 16; do
    for port in 6391 6392 6393; do
      line="${name[$port]}, -P $P: $(run $port $P 0 taskset -c 0)"
      echo "round $round: $line" && echo "$line" >>"$results"
    done
    # Two shards: with one key, a connection's requests all cross or none do; -r spreads them.
    for port in 6394 6395; do
      keyed=$(stat keyed_commands) crossed=$(stat forwarded_commands) hops=$(stat hops)
      line="${name[$port]}, -P $P: $(run $port $P 100000)"
      keyed=$(($(stat keyed_commands) - keyed)) crossed=$(($(stat forwarded_commands) - crossed))
      hops=$(($(stat hops) - hops))
      [ $port = 6394 ] && line+=" crossed_pct $((100 * crossed / keyed)) hopped_pct $((100 * hops / keyed))"
      echo "round $round: $line" && echo "$line" >>"$results"
    done
  done
done
echo "medians over $rounds rounds:"
python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, _, rest = line.partition(": ")
    words = rest.split()
    figures = runs.setdefault(label, {})
    for k, v in zip(words[::2], words[1::2]):
        figures.setdefault(k, []).append(float(v))
for label, figures in runs.items():
    print("%s: %s" % (label, " ".join("%s %.6g" % (k, statistics.median(v)) for k, v in figures.items())))
PY
