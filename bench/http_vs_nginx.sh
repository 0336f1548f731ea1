#!/usr/bin/env bash
# http_vs_nginx.sh [uring-http] — requests/s of `GET /` ("hello\n", keep-alive) from wrk against uring-http
# --threads 1 (native and emulated) and nginx with one worker (`return 200 "hello\n"`), side by side.
# The server runs pinned to CPU 0 and wrk to CPU 1 (taskset), the variants interleaved REPS times; prints
# each run (req/s, wrk's p99 latency, the server's CPU time per request from /proc/PID/stat) and the medians
# per variant with the ratios to nginx. Needs wrk and nginx (scripts/install-deps).
# TLS=1: the same over HTTPS, both servers with one EC P-256 certificate made here, and a second test per
# variant: a new connection per request (wrk -H "Connection: close"), each a full handshake: both servers run
# with OPENSSL_CONF setting NumTickets = 0, so no TLS 1.3 session is handed out to resume. Checks that
# s_client negotiates the same cipher suite and key exchange with every server and that no session resumes
# (else fails).
# Environment: REPS (default 3), DURATION (wrk -d, default 10s), CONNECTIONS (wrk -c, default 50),
# NGINX_PORT (default 18089), THREADS (default 1: uring-http --threads 1 and one nginx worker on CPU 0, wrk on
# CPU 1; 2: two executors and two nginx workers, server and wrk unpinned, sharing both CPUs), TLS (default 0;
# 1: HTTPS), TLS_VERSION (1.3, the default, or 1.2: both servers capped at it; with 1.2 no handshake test,
# since uring-http keeps TLS 1.2 sessions in OpenSSL's cache and wrk resumes them).
set -euo pipefail
server=${1:-build/release/samples/uring-http}
reps=${REPS:-3}
duration=${DURATION:-10s}
connections=${CONNECTIONS:-50}
nginx_port=${NGINX_PORT:-18089}
threads=${THREADS:-1}
tls=${TLS:-0}
tls_version=${TLS_VERSION:-1.3}
if [ "$threads" = 1 ]; then
  server_cpus=0 client_cpus=1 master=off
else
  server_cpus=0,1 client_cpus=0,1 master=on  # nginx runs more than one worker only under a master
fi
command -v wrk >/dev/null || { echo "wrk not found (scripts/install-deps)"; exit 1; }
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "nginx not found (scripts/install-deps)"; exit 1; }
[ -x "$server" ] || { echo "$server not found: build the release preset first"; exit 1; }
case $tls_version in 1.2 | 1.3) ;; *) echo "TLS_VERSION is 1.2 or 1.3"; exit 1 ;; esac

dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

scheme=http
listen_ssl=''
nginx_tls=''
uring_tls=()
server_env=()
tests=(keep-alive)
if [ "$tls" = 1 ]; then
  command -v openssl >/dev/null || { echo "openssl not found"; exit 1; }
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/key.pem" \
    -out "$dir/cert.pem" -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null
  # Read by both servers' OpenSSL (system_default applies to every SSL_CTX): the same protocol cap on both,
  # since uring-http has no flag for it; no TLS 1.3 tickets, so that every new connection is a full handshake.
  cat >"$dir/openssl.cnf" <<EOF
openssl_conf = conf
[conf]
ssl_conf = ssl
[ssl]
system_default = system
[system]
MaxProtocol = TLSv$tls_version
NumTickets = 0
EOF
  scheme=https listen_ssl=" ssl"
  # ssl_session_cache builtin: OpenSSL's own cache at its default size, what uring-http's context keeps.
  nginx_tls="ssl_certificate $dir/cert.pem; ssl_certificate_key $dir/key.pem;
    ssl_protocols TLSv$tls_version; ssl_session_cache builtin;"
  uring_tls=(--tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem" --tls-port 0)
  server_env=(OPENSSL_CONF="$dir/openssl.cnf")
  [ "$tls_version" = 1.3 ] && tests+=(handshake)
fi

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
    listen 127.0.0.1:$nginx_port$listen_ssl;
    $nginx_tls
    default_type text/plain;
    location / { return 200 "hello\n"; }
  }
}
EOF

# start VARIANT: starts the server on $server_cpus, sets pid, port and url.
start() {
  case $1 in
    nginx)
      env "${server_env[@]}" taskset -c "$server_cpus" "$nginx" -c "$dir/nginx.conf" -e "$dir/error.log" &
      pid=$!
      port=$nginx_port
      url=$scheme://127.0.0.1:$port/
      for _ in $(seq 100); do curl -sk -o /dev/null "$url" && break; sleep 0.05; done
      ;;
    uring-native | uring-emulated)
      coproc srv { exec env "${server_env[@]}" taskset -c "$server_cpus" "$server" --port 0 --threads "$threads" \
        --backend "${1#uring-}" "${uring_tls[@]}"; }
      pid=$srv_PID
      IFS= read -r -t 10 banner <&"${srv[0]}"
      [ "$tls" = 1 ] && banner=${banner#*and on}  # the second port is the TLS one
      port=${banner#*127.0.0.1:}
      port=${port%% *}
      url=$scheme://127.0.0.1:$port/
      ;;
  esac
  [ "$(curl -sk "$url")" = hello ] || { echo "$1 does not answer hello at $url"; exit 1; }
}
stop() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
}

# The cipher suite and key exchange s_client negotiates with the server on $port.
cipher() {
  openssl s_client -connect "127.0.0.1:$port" -tls"${tls_version/./_}" </dev/null 2>/dev/null |
    awk '/Server Temp Key:/ {sub(/,.*/, "", $4); group = $4} /Cipher is/ {print $NF ", key exchange " group; exit}'
}
# Fails if the server on $port hands out a session that a second connection resumes.
check_no_resumption() {
  rm -f "$dir/session"
  printf 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' |
    openssl s_client -connect "127.0.0.1:$port" -sess_out "$dir/session" -ign_eof >/dev/null 2>&1
  [ -e "$dir/session" ] || return 0
  if openssl s_client -connect "127.0.0.1:$port" -sess_in "$dir/session" </dev/null 2>/dev/null | grep -q ^Reused; then
    echo "$1 resumes a session: its handshakes would not be full ones"
    exit 1
  fi
}

# The server's CPU time so far in clock ticks (utime + stime of it and, under nginx's master, its workers).
cpu_ticks() {
  local p ticks=0 stat
  for p in "$pid" $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
    stat=$(cat /proc/"$p"/stat 2>/dev/null) || continue
    stat=${stat##*) }  # after the command name, which may hold spaces: field 3 on
    read -ra f <<<"$stat"
    ticks=$((ticks + f[11] + f[12]))  # utime and stime, fields 14 and 15
  done
  echo "$ticks"
}
# Connections the kernel accepted so far, all sockets (the loopback runs here are the only traffic).
passive_opens() { awk '/^Tcp:/ && ++n == 2 {print $7}' /proc/net/snmp; }

# wrk's "1.23ms" / "456.00us" / "1.02s" as microseconds.
to_us() { awk '{v = $1 + 0; if ($1 ~ /ms$/) v *= 1000; else if ($1 ~ /[0-9]s$/) v *= 1000000; print v}'; }

# run VARIANT TEST: one wrk run; appends req/s, p99, the server's CPU µs per request and its CPU's busy share
# (below 100%: wrk's core is the limit) to runs, p99s, cpus and busys.
run() {
  local headers=() out rps p99 busy requests ticks0 opens0 opened us key=$1/$2 note=''
  [ "$2" = handshake ] && headers=(-H "Connection: close")
  ticks0=$(cpu_ticks) opens0=$(passive_opens)
  out=$(taskset -c "$client_cpus" wrk -t1 -c"$connections" -d"$duration" --latency "${headers[@]}" "$url")
  us=$(cpu_ticks) opened=$(($(passive_opens) - opens0))
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  us=$(awk -v t="$((us - ticks0))" -v hz="$(getconf CLK_TCK)" -v r="$requests" 'BEGIN {print t * 1e6 / hz / r}')
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out" | to_us)
  busy=$(awk -v r="$rps" -v us="$us" 'BEGIN {print r * us / 1e4}')
  if [ "$2" = handshake ]; then
    note="  $opened connections for $requests requests"
    ((opened >= requests)) || { echo "$1: wrk did not reconnect for every request"; exit 1; }
  fi
  grep -q "Socket errors\|Non-2xx" <<<"$out" && note="$note  $(grep "Socket errors\|Non-2xx" <<<"$out" | tr -s ' ')"
  runs[$key]="${runs[$key]:-} $rps"
  p99s[$key]="${p99s[$key]:-} $p99"
  cpus[$key]="${cpus[$key]:-} $us"
  busys[$key]="${busys[$key]:-} $busy"
  printf 'round %s  %-14s %-10s %s req/s  p99 %s us  server CPU %.1f us/req, %.0f%% busy%s\n' "$round" "$1" "$2" \
    "$rps" "$p99" "$us" "$busy" "$note"
}

variants=(nginx uring-native uring-emulated)
declare -A runs p99s cpus busys ciphers
echo "wrk -t1 -c$connections -d$duration (CPUs $client_cpus) over $scheme against each server ($threads thread(s)," \
  "CPUs $server_cpus), $reps interleaved rounds; tests: ${tests[*]}"
for round in $(seq "$reps"); do
  for v in "${variants[@]}"; do
    start "$v"
    if [ "$tls" = 1 ] && [ "$round" = 1 ]; then
      ciphers[$v]=$(cipher)
      echo "$v: TLSv$tls_version cipher ${ciphers[$v]}"
      [ "${ciphers[$v]}" = "${ciphers[nginx]}" ] || { echo "cipher suites differ: nginx ${ciphers[nginx]}, $v ${ciphers[$v]}"; exit 1; }
      [ "$tls_version" = 1.3 ] && check_no_resumption "$v"
    fi
    for t in "${tests[@]}"; do run "$v" "$t"; done
    stop
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }
echo
echo "| test | server | median req/s | ratio to nginx | median p99 (µs) | p99 ratio | server CPU per request (µs) | CPU ratio | server CPU busy |"
echo "|---|---|---|---|---|---|---|---|---|"
for t in "${tests[@]}"; do
  base=$(median <<<"${runs[nginx/$t]}")
  base_p99=$(median <<<"${p99s[nginx/$t]}")
  base_cpu=$(median <<<"${cpus[nginx/$t]}")
  for v in "${variants[@]}"; do
    m=$(median <<<"${runs[$v/$t]}")
    l=$(median <<<"${p99s[$v/$t]}")
    c=$(median <<<"${cpus[$v/$t]}")
    b=$(median <<<"${busys[$v/$t]}")
    printf '| %s | %s | %.0f | %s | %.0f | %s | %.1f | %s | %.0f%% |\n' "$t" "$v" "$m" "$(ratio "$m" "$base")" \
      "$l" "$(ratio "$l" "$base_p99")" "$c" "$(ratio "$c" "$base_cpu")" "$b"
  done
done
