#!/usr/bin/env bash
# kv_vs_redis.sh [uring-kv binary] [requests]: redis-benchmark (SET and GET, `requests` (default 1'000'000)
# requests, 50 clients, pipeline 1 and 16) against uring-kv --threads 1 (native and emulated backends) and
# redis-server (no persistence), each server pinned to CPU 1 and the client to CPU 0. Then uring-kv
# --threads 2 (native; unpinned: on 2 cores the client competes with both shards), with the share of keyed
# commands that crossed to the other shard, read from its INFO. Needs redis-tools and redis-server. Prints
# one line per server and pipeline depth. Servers are stopped by their pids.
set -euo pipefail
kv=${1:-build/release/samples/uring-kv}
n=${2:-1000000}
taskset -c 1 "$kv" --port 6391 --threads 1 --backend native >/dev/null 2>&1 & p1=$!
taskset -c 1 "$kv" --port 6392 --threads 1 --backend emulated >/dev/null 2>&1 & p2=$!
taskset -c 1 redis-server --port 6393 --save '' --appendonly no --daemonize no >/dev/null 2>&1 & p3=$!
"$kv" --port 6394 --threads 2 --backend native >/dev/null 2>&1 & p4=$!
trap 'kill -TERM $p1 $p2 $p3 $p4 2>/dev/null || true' EXIT
for port in 6391 6392 6393 6394; do
  for _ in $(seq 1 500); do redis-cli -p $port ping >/dev/null 2>&1 && break; done
done
declare -A name=([6391]="uring-kv native" [6392]="uring-kv emulated" [6393]="redis-server 7.0")
run() {  # run <port> <pipeline> [command prefix...]: "SET: ... GET: ..." as redis-benchmark -q says it
  local port=$1 P=$2; shift 2
  "$@" redis-benchmark -p "$port" -t set,get -n "$n" -c 50 -P "$P" $keys -q 2>&1 | tr '\r' '\n' |
    grep -E "^(SET|GET): .*requests per second" | tr '\n' ' '
}
keys=""  # redis-benchmark's default: every request uses the one key "key:__rand_int__"
for P in 1 16; do
  for port in 6391 6392 6393; do echo "${name[$port]} -P $P: $(run $port $P taskset -c 0)"; done
done
# Two shards: with one key, a connection's requests all cross or none do; -r spreads them over 100'000 keys.
keys="-r 100000"
for P in 1 16; do
  before=$(redis-cli -p 6394 info | tr -d '\r')
  result=$(run 6394 $P)
  after=$(redis-cli -p 6394 info | tr -d '\r')
  keyed=$(( $(sed -n 's/^keyed_commands://p' <<<"$after") - $(sed -n 's/^keyed_commands://p' <<<"$before") ))
  crossed=$(( $(sed -n 's/^forwarded_commands://p' <<<"$after") - $(sed -n 's/^forwarded_commands://p' <<<"$before") ))
  echo "uring-kv --threads 2 native -r 100000 -P $P: $result crossed shards: $crossed of $keyed ($((100 * crossed / keyed))%)"
done
