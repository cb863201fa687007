#!/usr/bin/env bash
# W10 (../shared/BENCHMARKS.md): HTTP load against examples/http_server, once on
# asio_wheel::timed_stream and once on beast::tcp_stream, with real clients.
#
#   bench/http/run.sh BUILD_DIR OUT_FILE
#
# scripts/bench --http installs wrk and h2load (nghttp2-client), builds http_server and
# http_idle_clients (Release) into BUILD_DIR and runs this. For each stream, client
# (wrk; h2load --h1, i.e. HTTP/1.1) and number of keep-alive connections it starts a
# fresh server (1 thread, --idle longer than the run), loads it on loopback for the
# run's length and reports:
#   req/s        the client's count
#   p50/p99 ms   request latency: wrk --latency; h2load from its per-request log
#   rss B/conn   (server RSS at mid-run - RSS before) / connections
#   cpu us/req   server utime+stime over the run (/proc/PID/stat) / requests completed
#   errors       the client's socket errors, timeouts and non-2xx responses
# Then, per stream, the idle run: a fresh server with --idle HTTP_BENCH_IDLE, wrk with
# 100 connections for the run's length, and meanwhile http_idle_clients holding
# HTTP_BENCH_IDLE_CONNECTIONS connections idle after one request each. Reported: wrk's
# req/s, server RSS per idle connection (RSS once all are idle - RSS with only wrk's),
# how many the server closed, the time from each one's last activity (its response) to
# its close (p50/p99/max, client side), the worst overshoot past --idle, and the
# server's own count of the same (idle_late_max_ms, from its deadline to the close).
#
# Knobs (environment): HTTP_BENCH_SECONDS (10), HTTP_BENCH_CONNECTIONS ("100 1000
# 10000"), HTTP_BENCH_IDLE_CONNECTIONS (10000), HTTP_BENCH_IDLE (5s), HTTP_BENCH_STREAMS
# ("wheel beast"), HTTP_BENCH_CLIENTS ("wrk h2load"), HTTP_BENCH_SERVER_THREADS (1),
# HTTP_BENCH_CLIENT_THREADS (1), HTTP_BENCH_RUNS (5: each load row is run that many times,
# the streams taking turns going first, and the table shows each column's median; every
# run's own row is listed under it). The soft descriptor limit is raised as far as it goes
# (20000+ descriptors are needed at 10k connections: the server's and the client's).
set -euo pipefail

build=${1:?usage: bench/http/run.sh BUILD_DIR OUT_FILE}
out=${2:?usage: bench/http/run.sh BUILD_DIR OUT_FILE}
server_bin=$build/http_server
idle_bin=$build/http_idle_clients
for b in "$server_bin" "$idle_bin"; do
  [[ -x $b ]] || { echo "bench/http/run.sh: $b is not built" >&2; exit 2; }
done
for tool in wrk h2load; do
  command -v $tool >/dev/null || { echo "bench/http/run.sh: $tool not found" >&2; exit 2; }
done

seconds=${HTTP_BENCH_SECONDS:-10}
conn_counts=${HTTP_BENCH_CONNECTIONS:-100 1000 10000}
idle_conns=${HTTP_BENCH_IDLE_CONNECTIONS:-10000}
idle=${HTTP_BENCH_IDLE:-5s}
streams=${HTTP_BENCH_STREAMS:-wheel beast}
clients=${HTTP_BENCH_CLIENTS:-wrk h2load}
server_threads=${HTTP_BENCH_SERVER_THREADS:-1}
client_threads=${HTTP_BENCH_CLIENT_THREADS:-1}
runs=${HTTP_BENCH_RUNS:-5}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench/http/run.sh: HTTP_BENCH_RUNS must be a positive count" >&2; exit 2; }
hz=$(getconf CLK_TCK)

# Descriptors: as many as the kernel lets us (root may raise the hard limit too).
ulimit -n 1048576 2>/dev/null || ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
echo "descriptor limit: $(ulimit -n)"

work=$(mktemp -d "${TMPDIR:-/tmp}/asio_wheel-http.XXXXXX")
server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill -9 "$server_pid" 2>/dev/null
  jobs -p | xargs -r kill 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# ---- the server ------------------------------------------------------------------------
# start_server STREAM IDLE: starts it on an ephemeral port; sets server_pid, port.
start_server() {
  local log=$work/server.log
  "$server_bin" --stream "$1" --port 0 --threads "$server_threads" --idle "$2" \
    --read-timeout 10s --write-timeout 10s >"$log" 2>&1 &
  server_pid=$!
  local i
  for i in $(seq 1 200); do
    if grep -q 'listening on' "$log"; then
      port=$(sed -nE 's/.*listening on [0-9.]+:([0-9]+).*/\1/p' "$log" | head -n 1)
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "bench/http/run.sh: the server did not start:" >&2
  cat "$log" >&2
  exit 1
}
# stop_server: SIGTERM, wait; sets `counters` to its counters line. (Not to be called in
# a command substitution: that subshell could not wait for the server.)
stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
  counters=$(grep '^http_server: connections=' "$work/server.log" | tail -n 1 || true)
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status"; }
cpu_ticks() { # utime + stime; field 2 may hold spaces, so count from the last ')'
  local stat rest
  stat=$(<"/proc/$server_pid/stat")
  rest=${stat##*) }
  awk '{print $12 + $13}' <<<"$rest"
}
# field KEY LINE: the value of KEY=value in a line of counters.
field() { sed -nE "s/.*[ :]$1=([^ ]+).*/\1/p" <<<"$2" | head -n 1; }

# ---- the clients -----------------------------------------------------------------------
# Both print: requests rps p50_ms p99_ms errors
to_ms() { # wrk's "123.45us" / "1.23ms" / "1.02s" -> ms
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /m$/) { sub(/m$/, "", v); printf "%.3f", v * 60000 }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else printf "%s", v }'
}
run_wrk() { # CONNS SECONDS LOG
  wrk -t"$client_threads" -c"$1" -d"${2}s" --timeout 10s --latency "http://127.0.0.1:$port/" \
    >"$3" 2>&1 || true
}
parse_wrk() { # LOG
  local log=$1 requests rps p50 p99 errors
  requests=$(awk '/requests in/ {print $1; exit}' "$log")
  rps=$(awk '/^Requests\/sec:/ {print $2; exit}' "$log")
  p50=$(to_ms "$(awk '$1 == "50%" {print $2; exit}' "$log")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2; exit}' "$log")")
  errors=$(awk '/Socket errors:/ {gsub(/,/, ""); s += $4 + $6 + $8 + $10}
                /Non-2xx or 3xx/ {s += $NF} END {print s + 0}' "$log")
  echo "${requests:-0} ${rps:-0} ${p50:-0} ${p99:-0} ${errors:-0}"
}
run_h2load() { # CONNS SECONDS LOG
  h2load --h1 -t"$client_threads" -c"$1" -D "$2" --log-file="$3.requests" \
    "http://127.0.0.1:$port/" >"$3" 2>&1 || true
}
parse_h2load() { # LOG: latencies from the per-request log (3rd column: microseconds)
  local log=$1 requests rps errors pct
  requests=$(awk '/^requests:/ {print $8; exit}' "$log") # "N succeeded"
  rps=$(sed -nE 's/^finished in [^,]+, ([0-9.]+) req\/s.*/\1/p' "$log" | head -n 1)
  errors=$(awk '/^requests:/ {print $10 + $12 + $14; exit}' "$log") # failed errored timeout
  pct=$(cut -f3 "$log.requests" 2>/dev/null | sort -n | awk '{v[NR] = $1}
    END { if (NR == 0) { print "0 0"; exit }
          i50 = int(0.50 * (NR - 1)) + 1; i99 = int(0.99 * (NR - 1)) + 1
          printf "%.3f %.3f", v[i50] / 1000, v[i99] / 1000 }')
  echo "${requests:-0} ${rps:-0} $pct ${errors:-0}"
}

# ---- the runs --------------------------------------------------------------------------
# The machine's load before and after, for the record: other work on it skews the runs.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
load_rows=()  # per client, connections and stream: the medians over the runs
run_rows=()   # every run's own row
idle_rows=()

# median_row CLIENT STREAM CONNS FILE: one row of the table from FILE's runs (one line of
# "rps p50 p99 rss cpu errors" each): the median of each column over the runs (the upper
# one of an even count), errors summed.
median_row() {
  awk -v c="$1" -v s="$2" -v n="$3" '
    { for (k = 1; k <= 5; ++k) v[k, NR] = $k; err += $6 }
    END {
      m = int(NR / 2) + 1
      for (k = 1; k <= 5; ++k) {
        for (i = 1; i <= NR; ++i) { # insertion sort of column k into col[1..NR]
          x = v[k, i]
          for (j = i - 1; j >= 1 && col[j] > x; --j) col[j + 1] = col[j]
          col[j + 1] = x
        }
        med[k] = col[m]
      }
      printf "%-7s %-6s %6d %10.0f %8.3f %8.3f %11.0f %11.2f %7d", c, s, n, med[1], med[2], med[3], med[4], med[5], err
    }' "$4"
}

for client in $clients; do
  for conns in $conn_counts; do
    for run in $(seq 1 "$runs"); do
      # Every other run the other stream goes first, so that neither always runs on
      # the machine as the one before left it.
      order=$streams
      ((run % 2 == 0)) && order=$(tr ' ' '\n' <<<"$streams" | tac | tr '\n' ' ')
      for stream in $order; do
        echo "== $client, $stream, $conns connections, ${seconds} s (run $run of $runs)"
        # An idle deadline longer than the run: no load connection is reaped.
        start_server "$stream" "$((seconds + 60))s"
        rss0=$(rss_kib)
        cpu0=$(cpu_ticks)
        log=$work/$client.$stream.$conns.log
        "run_$client" "$conns" "$seconds" "$log" &
        client_pid=$!
        sleep "$(awk -v s="$seconds" 'BEGIN {print s / 2}')"
        rss_mid=$(rss_kib)
        wait "$client_pid" || true
        cpu1=$(cpu_ticks)
        stop_server
        read -r requests rps p50 p99 errors <<<"$("parse_$client" "$log")"
        if [[ ${requests:-0} == 0 ]]; then
          echo "bench/http/run.sh: $client completed no request; its output:" >&2
          cat "$log" >&2
        fi
        fields=$(awk -v rps="$rps" -v p50="$p50" -v p99="$p99" -v r0="$rss0" -v r1="$rss_mid" \
          -v c0="$cpu0" -v c1="$cpu1" -v hz="$hz" -v n="$conns" -v req="$requests" -v err="$errors" 'BEGIN {
            rss = (r1 - r0) * 1024 / n; cpu = req > 0 ? (c1 - c0) / hz * 1e6 / req : 0
            printf "%s %s %s %.0f %.2f %d", rps, p50, p99, rss, cpu, err }')
        echo "$fields" >>"$work/runs.$client.$stream.$conns"
        row=$(median_row "$client" "$stream" "$conns" <(echo "$fields"))
        echo "$row"
        echo "   server: $counters"
        run_rows+=("$row  run $run")
      done
    done
    for stream in $streams; do
      load_rows+=("$(median_row "$client" "$stream" "$conns" "$work/runs.$client.$stream.$conns")")
    done
  done
done

idle_ms=$(awk -v v="$idle" 'BEGIN {
  if (v ~ /ms$/) { sub(/ms$/, "", v); print v + 0 } else { sub(/s$/, "", v); print v * 1000 } }')
for stream in $streams; do
  echo "== idle: $stream, $idle_conns idle connections (--idle $idle) + wrk -c100, ${seconds} s"
  start_server "$stream" "$idle"
  wlog=$work/idle-wrk.$stream.log
  run_wrk 100 "$seconds" "$wlog" &
  wrk_pid=$!
  sleep 1
  rss0=$(rss_kib)
  ilog=$work/idle.$stream.log
  "$idle_bin" --port "$port" --connections "$idle_conns" --give-up 60 >"$ilog" 2>&1 &
  idle_pid=$!
  rss_idle=""
  for i in $(seq 1 1200); do
    if grep -q 'all .* idle' "$ilog"; then rss_idle=$(rss_kib); break; fi
    kill -0 "$idle_pid" 2>/dev/null || break
    sleep 0.05
  done
  wait "$idle_pid" || true
  wait "$wrk_pid" || true
  stop_server
  result=$(grep '^idle_clients: connections=' "$ilog" | tail -n 1)
  [[ -n $result ]] || { echo "bench/http/run.sh: http_idle_clients failed:" >&2; cat "$ilog" >&2; }
  read -r _ wrps _ _ _ <<<"$(parse_wrk "$wlog")"
  # reaped counts against the connections that became idle: one that failed before
  # (connect, request or response; the clients line names the first error) had no idle
  # deadline to keep, and is counted in `failed` instead.
  row=$(awk -v s="$stream" -v rps="$wrps" -v r0="$rss0" -v r1="${rss_idle:-$rss0}" \
    -v n="$idle_conns" -v idle="$idle_ms" -v reaped="$(field reaped "$result")" \
    -v became_idle="$(field idle "$result")" -v failed="$(field failed "$result")" \
    -v p50="$(field reap_ms_p50 "$result")" \
    -v p99="$(field reap_ms_p99 "$result")" -v mx="$(field reap_ms_max "$result")" \
    -v late="$(field idle_late_max_ms "$counters")" -v early="$(field idle_early "$counters")" 'BEGIN {
      printf "%-6s %10.0f %10.0f %8d/%-6d %6d %8.1f %8.1f %8.1f %9.1f %10.3f %6d",
        s, rps, (r1 - r0) * 1024 / n, reaped, became_idle, failed, p50, p99, mx, mx - idle,
        late, early }')
  echo "$row"
  echo "   server: $counters"
  grep '^idle_clients: first error:' "$ilog" | sed 's/^/   /' || true
  echo "   clients: $result"
  idle_rows+=("$row")
done

# ---- the table -------------------------------------------------------------------------
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
{
  echo "# W10, scripts/bench --http: examples/http_server (Release), loopback, server threads"
  echo "# $server_threads, client threads $client_threads, ${seconds} s per run, $runs runs per row; $(date -u '+%Y-%m-%d %H:%M UTC'),"
  echo "# commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)," \
    "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) cores, $(uname -r)"
  echo "# load average (1/5/15 min) before: $load_before; after: $load_after"
  echo "# wheel: asio_wheel::timed_stream; beast: beast::tcp_stream (Boost $(sed -nE 's/^#define BOOST_LIB_VERSION "(.*)"/\1/p' /usr/include/boost/version.hpp 2>/dev/null | tr _ .))"
  echo "# rss B/conn: server RSS growth at mid-run / connections; cpu us/req: server"
  echo "# utime+stime / requests; h2load runs HTTP/1.1 (--h1)"
  echo
  printf '%-7s %-6s %6s %10s %8s %8s %11s %11s %7s\n' client stream conns req/s p50_ms p99_ms \
    rss_B/conn cpu_us/req errors
  printf '%s\n' "${load_rows[@]}"
  echo
  echo "# every run ($runs per row above, which shows each column's median over them and"
  echo "# the errors summed; the streams took turns going first):"
  printf '%s\n' "${run_rows[@]}"
  echo
  echo "# idle: $idle_conns connections idle after one request each (http_idle_clients) while"
  echo "# wrk -c100 runs; server --idle $idle, wheel tick 1 ms. reap_*: client side, from the"
  echo "# response to the close; over_ms: reap_max - idle; late_ms: the server's own worst"
  echo "# delay from its idle deadline to the close; early: closes before the idle time;"
  echo "# reaped: of the connections that became idle; failed: connections that failed"
  echo "# before that (connect, request or response), so had no idle deadline to reap."
  printf '%-6s %10s %10s %15s %6s %8s %8s %8s %9s %10s %6s\n' stream req/s B/idle reaped/idle \
    failed reap_p50 reap_p99 reap_max over_ms late_ms early
  printf '%s\n' "${idle_rows[@]}"
} >"$out"
echo
cat "$out"
