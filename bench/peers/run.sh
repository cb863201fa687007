#!/usr/bin/env bash
# asio_wheel beside the peers that BENCHMARKS.md and issue 13 name, on one machine:
# asio_wheel_bench (asio_wheel only), Netty's HashedWheelTimer (netty_wheel/, Debian's
# libnetty-java 4.1.48 on Java 17), Go's runtime timers (go_timers/, Debian's Go 1.19)
# and a heap-based Go delay queue (go_delay_queue/, S2's peer). The figures those
# documents quote for the peers were measured on another machine. Four programs, so four
# processes; each turn runs them all, one after another, so that a slow spell of a
# shared machine falls on all of them.
#
#   run.sh BENCH_BINARY OUTPUT      (scripts/bench --peers calls it so)
#
# Workloads at N = 1M (W5: 10k): W1 churn and W2 reset in ns per op, W3 the storm in ms
# until all fired, W4 bytes per pending wait, W5 wake-ups per second, S2 push + chained
# take in ns per element. Each program's figure is its median of 5 repetitions (W4: one
# fill; W5: one 5 s window); each program's header comment says what its op is. Netty's
# worker removes a cancelled timeout a tick later, so its W1 and W2 come as the loop's
# wall time and as the CPU time of both of its threads. OUTPUT gets the medians over the
# turns, then every turn's figures. Env: PEERS_TURNS (default 5).
set -euo pipefail
bench=$1
out=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
turns=${PEERS_TURNS:-5}
jar=/usr/share/java/netty-common.jar
[[ -r $jar ]] || { echo "run.sh: $jar missing (Debian package libnetty-java)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The Go programs built once, and the delay queue's own tests run from that build: it
# takes in due order, never early.
(cd "$here/go_timers" && go vet ./... && go build -o "$work/go_timers" .)
(cd "$here/go_delay_queue" && go vet ./... && go test -c -o "$work/go_delay_queue.test" . &&
  "$work/go_delay_queue.test" -test.count 1 >/dev/null)

# Each program's figures as lines: workload implementation metric N value unit note.
ours() {
  "$bench" --only W1,W2,W3,W4,W5,S2 --n 1M --impl wheel --csv '' | awk '
    function note(k,   i, kv, parts, n) { n = split($NF, parts, ";"); for (i = 1; i <= n; ++i) {
      split(parts[i], kv, "="); if (kv[1] == k) return kv[2] } return "" }
    $1 == "W1" && $3 == "cancel"      { print "W1 asio_wheel churn", $4, $6, "ns/op", "min=" $5 }
    $1 == "W2" && $3 == "reset_after" { print "W2 asio_wheel reset_after", $4, $6, "ns/op", "min=" $5 }
    $1 == "W3" && $3 == "fire"        { print "W3 asio_wheel fire", $4, note("total_ms_median"), "ms",
                                        "min=" note("total_ms_min") ";early=" note("early") }
    $1 == "W4" && $3 == "rss"         { print "W4 asio_wheel rss", $4, note("bytes_per_wait"), "B", "timer" }
    $1 == "W4" && $3 == "rss_compact" { print "W4 asio_wheel rss_compact", $4, note("bytes_per_wait"), "B", "compact_timer" }
    $1 == "W5" && $3 == "idle"        { print "W5 asio_wheel idle", $4, note("wakeups_per_s"), "wakeups/s", "-" }
    $1 == "S2" && $3 == "push+take"   { print "S2 asio_wheel push+take", $4, $6, "ns/op", "min=" $5 }'
}
netty() { for w in W1 W2 W3 W4 W5; do java -cp "$jar" "$here/netty_wheel/NettyWheel.java" $w; done; }
go_timers() { for w in W1 W2 W3 W4; do "$work/go_timers" $w; done; }
go_delay_queue() {
  (cd "$here/go_delay_queue" &&
    "$work/go_delay_queue.test" -test.run '^$' -test.bench PushAndTake -test.benchtime 1000000x) |
    awk '/^BenchmarkPushAndTake/ { print "S2 go_delay_queue push+take", $2, $3, "ns/op", "push=" $5 ";take=" $7 }'
}

for ((turn = 1; turn <= turns; ++turn)); do
  { ours; netty; go_timers; go_delay_queue; } | sed "s/^/$turn /" >>"$work/turns"
  echo "run.sh: turn $turn of $turns done" >&2
done

{
  echo "# asio_wheel beside its peers, $(date -u '+%Y-%m-%d %H:%M UTC'); commit" \
    "$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
    "$(java -version 2>&1 | head -n 1); netty $(dpkg-query -W -f='${Version}' libnetty-java);" \
    "$(go version | cut -d' ' -f3)"
  echo "# median over $turns turns (each a program's median of 5 repetitions), and the range"
  printf '%-4s %-16s %-12s %8s %10s %-10s %s\n' id implementation metric N median unit range
  # Grouped by workload, in the order the workloads first come; N as asio_wheel_bench
  # writes it (1M, 10k).
  awk 'function short(n) { return n % 1000000 == 0 ? n / 1000000 "M" : n % 1000 == 0 ? n / 1000 "k" : n }
       { if (!($2 in rank)) rank[$2] = ++ids
         key = $2 " " $3 " " $4
         if (!(key in seen)) { seen[key] = 1; order[++k] = key; size[key] = $5 ~ /^[0-9]+$/ ? short($5) : $5; unit[key] = $7 }
         v[key] = v[key] " " $6 }
       END { for (r = 1; r <= ids; ++r) for (i = 1; i <= k; ++i) {
               split(order[i], f, " "); if (rank[f[1]] == r) print order[i], size[order[i]], unit[order[i]], v[order[i]] } }' "$work/turns" |
    while read -r id impl metric count unit values; do
      sorted=$(tr ' ' '\n' <<<"$values" | grep . | sort -g)
      med=$(awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }' <<<"$sorted")
      printf '%-4s %-16s %-12s %8s %10s %-10s %s-%s\n' "$id" "$impl" "$metric" "$count" "$med" "$unit" \
        "$(head -n 1 <<<"$sorted")" "$(tail -n 1 <<<"$sorted")"
    done
  echo
  echo "# each turn: turn id implementation metric N value unit note"
  cat "$work/turns"
} | tee "$out"
