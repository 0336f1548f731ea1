#!/usr/bin/env bash
# kv_vs_redis.sh [uring-kv binary] [requests] [rounds]: redis-benchmark (SET, GET, INCR and MSET of 10 keys,
# `requests` (default 1'000'000) requests each, 50 clients, pipeline 1 and 16) against uring-kv --threads 1
# (native and emulated backends) and redis-server (no persistence), each server pinned to CPU 1 and the
# client to CPU 0; then uring-kv --threads 2 (native; unpinned: on 2 cores the client competes with both
# shards) with -r 100000, so that keys spread over both shards, and the share of keyed commands that
# crossed to the other shard (from its INFO). Each run also reads the server's CPU time (utime + stime in
# /proc/PID/stat) before and after, and reports it per request. The servers take turns within each of
# `rounds` (default 3) rounds, so that a noisy neighbour hits them alike; the last lines are each figure's
# median over the rounds. Needs redis-tools and redis-server. Servers are stopped by their pids.
set -euo pipefail
kv=${1:-build/release/samples/uring-kv}
n=${2:-1000000}
rounds=${3:-3}
taskset -c 1 "$kv" --port 6391 --threads 1 --backend native >/dev/null 2>&1 & p1=$!
taskset -c 1 "$kv" --port 6392 --threads 1 --backend emulated >/dev/null 2>&1 & p2=$!
taskset -c 1 redis-server --port 6393 --save '' --appendonly no --daemonize no >/dev/null 2>&1 & p3=$!
"$kv" --port 6394 --threads 2 --backend native >/dev/null 2>&1 & p4=$!
trap 'kill -TERM $p1 $p2 $p3 $p4 2>/dev/null || true' EXIT
for port in 6391 6392 6393 6394; do
  for _ in $(seq 1 500); do redis-cli -p $port ping >/dev/null 2>&1 && break; done
done
declare -A name=([6391]="uring-kv native" [6392]="uring-kv emulated" [6393]="redis-server 7.0"
                 [6394]="uring-kv --threads 2 native -r 100000")
declare -A pid=([6391]=$p1 [6392]=$p2 [6393]=$p3 [6394]=$p4)
tests=set,get,incr,mset
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime, in clock ticks
hz=$(getconf CLK_TCK)
# run <port> <pipeline> [command prefix...]: "SET <rps> GET <rps> INCR <rps> MSET <rps> cpu_us_per_request <us>"
run() {
  local port=$1 P=$2; shift 2
  local before after rps
  before=$(cpu_ticks "${pid[$port]}")
  # shellcheck disable=SC2086  # $keys is empty or "-r 100000"
  rps=$("$@" redis-benchmark -p "$port" -t "$tests" -n "$n" -c 50 -P "$P" $keys -q 2>&1 | tr '\r' '\n' |
    sed -n 's/^\([A-Z]*\)[^:]*: \([0-9.]*\) requests per second.*/\1 \2/p' | tr '\n' ' ')
  after=$(cpu_ticks "${pid[$port]}")
  echo "$rps cpu_us_per_request $(awk -v t=$((after - before)) -v hz="$hz" -v r=$((4 * n)) \
    'BEGIN {printf "%.2f", t * 1e6 / hz / r}')"
}
results=$(mktemp)
trap 'kill -TERM $p1 $p2 $p3 $p4 2>/dev/null || true; rm -f "$results"' EXIT
for round in $(seq 1 "$rounds"); do
  for P in 1 16; do
    keys=""  # redis-benchmark's default: every request uses the one key "key:__rand_int__"
    for port in 6391 6392 6393; do
      line="${name[$port]} -P $P: $(run $port $P taskset -c 0)"
      echo "round $round: $line" && echo "$line" >>"$results"
    done
    # Two shards: with one key, a connection's requests all cross or none do; -r spreads them.
    keys="-r 100000"
    before=$(redis-cli -p 6394 info | tr -d '\r')
    line="${name[6394]} -P $P: $(run 6394 $P)"
    after=$(redis-cli -p 6394 info | tr -d '\r')
    keyed=$(( $(sed -n 's/^keyed_commands://p' <<<"$after") - $(sed -n 's/^keyed_commands://p' <<<"$before") ))
    crossed=$(( $(sed -n 's/^forwarded_commands://p' <<<"$after") - $(sed -n 's/^forwarded_commands://p' <<<"$before") ))
    echo "round $round: $line crossed shards: $((100 * crossed / keyed))%" && echo "$line" >>"$results"
  done
done
echo "medians over $rounds rounds:"
python3 - "$results" <<'EOF'
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
EOF
