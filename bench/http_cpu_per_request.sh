#!/usr/bin/env bash
# http_cpu_per_request.sh BINARY... — uring-http's CPU time per request, two or more builds compared:
# each binary in turn (--threads 1, pinned to CPU 0) serves `GET /` to wrk -t1 -c50 (CPU 1), ROUNDS times
# alternated; prints each run's requests and the server's utime + stime (/proc/PID/stat) ÷ requests, then
# the median per binary and its ratio to the first's.
# Environment: ROUNDS (default 3), DURATION (wrk -d, default 8s), BACKEND (native, the default, or emulated).
set -euo pipefail
rounds=${ROUNDS:-3}
duration=${DURATION:-8s}
backend=${BACKEND:-native}
[ $# -ge 1 ] || { echo "usage: $0 BINARY..."; exit 2; }
command -v wrk >/dev/null || { echo "wrk not found (scripts/install-deps)"; exit 1; }
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true' EXIT
declare -A runs
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    coproc srv { exec taskset -c 0 "$bin" --port 0 --threads 1 --backend "$backend" 2>&1; }
    pid=$srv_PID
    IFS= read -r -t 10 banner <&"${srv[0]}"
    port=${banner#*127.0.0.1:}
    port=${port%% *}
    t0=$(awk '{print $14 + $15}' /proc/"$pid"/stat)
    out=$(taskset -c 1 wrk -t1 -c50 -d"$duration" "http://127.0.0.1:$port/")
    t1=$(awk '{print $14 + $15}' /proc/"$pid"/stat)
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    us=$(awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN {printf "%.2f", t * 1e6 / hz / n}')
    runs[$bin]="${runs[$bin]:-} $us"
    echo "round $r  $bin  $requests requests  $us us/request"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
base=$(median <<<"${runs[$1]}")
for bin in "$@"; do
  m=$(median <<<"${runs[$bin]}")
  awk -v b="$bin" -v m="$m" -v base="$base" 'BEGIN {printf "%s: median %.2f us/request, %.2fx\n", b, m, m / base}'
done
