#!/usr/bin/env bash
# kv_vs_redis.sh [uring-kv binary]: redis-benchmark (SET and GET, 100'000 requests, 50 clients, pipeline 1
# and 16) against uring-kv --threads 1 (native and emulated backends) and redis-server (no persistence),
# each server pinned to CPU 1 and the client to CPU 0. Needs redis-tools and redis-server. Prints one line
# per server and pipeline depth. Servers are stopped by their pids.
set -euo pipefail
kv=${1:-build/release/samples/uring-kv}
taskset -c 1 "$kv" --port 6391 --threads 1 --backend native >/dev/null 2>&1 & p1=$!
taskset -c 1 "$kv" --port 6392 --threads 1 --backend emulated >/dev/null 2>&1 & p2=$!
taskset -c 1 redis-server --port 6393 --save '' --appendonly no --daemonize no >/dev/null 2>&1 & p3=$!
trap 'kill -TERM $p1 $p2 $p3 2>/dev/null || true' EXIT
for port in 6391 6392 6393; do
  for _ in $(seq 1 500); do redis-cli -p $port ping >/dev/null 2>&1 && break; done
done
declare -A name=([6391]="uring-kv native" [6392]="uring-kv emulated" [6393]="redis-server 7.0")
for P in 1 16; do
  for port in 6391 6392 6393; do
    result=$(taskset -c 0 redis-benchmark -p $port -t set,get -n 100000 -c 50 -P $P -q 2>&1 | tr '\r' '\n' |
             grep -E "^(SET|GET): .*requests per second" | tr '\n' ' ')
    echo "${name[$port]} -P $P: $result"
  done
done
