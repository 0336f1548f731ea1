#!/usr/bin/env bash
# http_vs_nginx.sh [uring-http] — requests/s of `GET /` ("hello\n", keep-alive) from wrk against uring-http
# --threads 1 (native and emulated) and nginx with one worker (`return 200 "hello\n"`), side by side.
# The server runs pinned to CPU 0 and wrk to CPU 1 (taskset), the variants interleaved REPS times; prints
# each run (req/s and wrk's p99 latency) and the medians per variant with the ratios to nginx. Needs wrk and nginx (scripts/install-deps).
# Environment: REPS (default 3), DURATION (wrk -d, default 10s), CONNECTIONS (wrk -c, default 50),
# NGINX_PORT (default 18089), THREADS (default 1: uring-http --threads 1 and one nginx worker on CPU 0, wrk on
# CPU 1; 2: two executors and two nginx workers, server and wrk unpinned, sharing both CPUs).
set -euo pipefail
server=${1:-build/release/samples/uring-http}
reps=${REPS:-3}
duration=${DURATION:-10s}
connections=${CONNECTIONS:-50}
nginx_port=${NGINX_PORT:-18089}
threads=${THREADS:-1}
if [ "$threads" = 1 ]; then
  server_cpus=0 client_cpus=1 master=off
else
  server_cpus=0,1 client_cpus=0,1 master=on  # nginx runs more than one worker only under a master
fi
command -v wrk >/dev/null || { echo "wrk not found (scripts/install-deps)"; exit 1; }
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "nginx not found (scripts/install-deps)"; exit 1; }
[ -x "$server" ] || { echo "$server not found: build the release preset first"; exit 1; }

dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process $master;
worker_processes $threads;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 100000000;
  client_body_temp_path $dir;
  proxy_temp_path $dir;
  fastcgi_temp_path $dir;
  uwsgi_temp_path $dir;
  scgi_temp_path $dir;
  server {
    listen 127.0.0.1:$nginx_port;
    default_type text/plain;
    location / { return 200 "hello\n"; }
  }
}
EOF

# start VARIANT: starts the server on $server_cpus, sets pid and url.
start() {
  case $1 in
    nginx)
      taskset -c "$server_cpus" "$nginx" -c "$dir/nginx.conf" -e "$dir/error.log" &
      pid=$!
      url=http://127.0.0.1:$nginx_port/
      for _ in $(seq 100); do curl -s -o /dev/null "$url" && break; sleep 0.05; done
      ;;
    uring-native | uring-emulated)
      coproc srv { exec taskset -c "$server_cpus" "$server" --port 0 --threads "$threads" --backend "${1#uring-}"; }
      pid=$srv_PID
      IFS= read -r -t 10 banner <&"${srv[0]}"
      port=${banner#*127.0.0.1:}
      url=http://127.0.0.1:${port%% *}/
      ;;
  esac
  [ "$(curl -s "$url")" = hello ] || { echo "$1 does not answer hello at $url"; exit 1; }
}
stop() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
}

# wrk's "1.23ms" / "456.00us" / "1.02s" as microseconds.
to_us() { awk '{v = $1 + 0; if ($1 ~ /ms$/) v *= 1000; else if ($1 ~ /[0-9]s$/) v *= 1000000; print v}'; }

variants=(nginx uring-native uring-emulated)
declare -A runs p99s
echo "wrk -t1 -c$connections -d$duration (CPUs $client_cpus) against each server ($threads thread(s), CPUs $server_cpus), $reps interleaved rounds"
for round in $(seq "$reps"); do
  for v in "${variants[@]}"; do
    start "$v"
    out=$(taskset -c "$client_cpus" wrk -t1 -c"$connections" -d"$duration" --latency "$url")
    stop
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out" | to_us)
    runs[$v]="${runs[$v]:-} $rps"
    p99s[$v]="${p99s[$v]:-} $p99"
    echo "round $round  $v  $rps req/s  p99 ${p99} us"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
base=$(median <<<"${runs[nginx]}")
base_p99=$(median <<<"${p99s[nginx]}")
echo
echo "| server | median req/s | ratio to nginx | median p99 (us) | p99 ratio to nginx |"
echo "|---|---|---|---|---|"
for v in "${variants[@]}"; do
  m=$(median <<<"${runs[$v]}")
  l=$(median <<<"${p99s[$v]}")
  printf '| %s | %.0f | %.2fx | %.0f | %.2fx |\n' "$v" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')" \
    "$l" "$(awk -v a="$l" -v b="$base_p99" 'BEGIN {print a / b}')"
done
