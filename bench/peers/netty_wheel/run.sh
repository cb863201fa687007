#!/usr/bin/env bash
# W1 to W5 beside Netty: asio_wheel_bench (asio_wheel only) and NettyWheel.java
# (Netty's HashedWheelTimer, Debian's libnetty-java 4.1.48 on Java 17), the same
# workloads at N = 1M, in turns on one machine. Issue 13's title is "overtake Netty on
# expiry storms and memory", and BENCHMARKS.md's W1 target is "below Netty's total CPU";
# the peer figures those quote were measured on another machine. Two programs, so two
# processes; the turns alternate so that a slow spell of a shared machine falls on both.
#
#   run.sh BENCH_BINARY OUTPUT      (scripts/bench --netty calls it so)
#
# Per turn: ns per op for W1 and W2 (asio_wheel: the loop, which is all its work, in one
# thread; W2 its reset_after. Netty: the loop's wall time and the CPU time of both of its
# threads, since its worker takes each cancelled timeout out a tick later; W2 a cancel and
# a new timeout, as Netty moves no timeout), ms until all of W3's 1M fired (asio_wheel
# schedules and fires in one thread; Netty fires in its worker while the caller
# schedules), W4's bytes per pending wait (asio_wheel's resident set, default and compact
# timer; Netty's resident set and its heap after a GC), and W5's wake-ups per second with
# 10k timeouts pending. Medians of 5 repetitions each, except W4 (one fill) and W5 (one
# 5 s window). The summary is the median over the turns. Env: NETTY_TURNS (default 5).
set -euo pipefail
bench=$1
out=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
turns=${NETTY_TURNS:-5}
jar=/usr/share/java/netty-common.jar
[[ -r $jar ]] || { echo "run.sh: $jar missing (Debian package libnetty-java)" >&2; exit 1; }
netty() { java -cp "$jar" "$here/NettyWheel.java" "$@"; }

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
columns=(wheel_w1 netty_w1_wall netty_w1_cpu wheel_w2 netty_w2_wall netty_w2_cpu wheel_w3_ms netty_w3_ms
  wheel_w4 compact_w4 netty_w4_rss netty_w4_heap wheel_w5 netty_w5)
declare -A all

{
  echo "# W1 to W5 beside Netty's HashedWheelTimer, N = 1M (W5: 10k); $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown);" \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
    "$(java -version 2>&1 | head -n 1); netty $(dpkg-query -W -f='${Version}' libnetty-java 2>/dev/null)"
  echo "# W1, W2 ns/op; W3 ms until all fired; W4 bytes per pending wait; W5 wake-ups per second"
  printf '%-4s' turn; printf ' %s' "${columns[@]}"; echo
  for ((turn = 1; turn <= turns; ++turn)); do
    ours=$("$bench" --only W1,W2,W3,W4,W5 --n 1M --impl wheel --csv '')
    theirs=$(netty W1; netty W2; netty W3; netty W4; netty W5)
    # asio_wheel: W1's default row (the shard's lock on, as Boost 1.81 runs it), its
    # median column; W3's and W4's figures from their notes.
    note() { awk -v w="$1" -v v="$2" '$1 == w && $3 == v { print $NF }' <<<"$ours" | tr ';' '\n' |
      awk -F= -v k="$3" '$1 == k { print $2 }'; }
    declare -A row=(
      [wheel_w1]=$(awk '$1 == "W1" && $3 == "cancel" { print $6 }' <<<"$ours")
      [netty_w1_wall]=$(awk '$3 == "churn_wall" { print $8 }' <<<"$theirs")
      [netty_w1_cpu]=$(awk '$3 == "churn_cpu" { print $8 }' <<<"$theirs")
      [wheel_w2]=$(awk '$1 == "W2" && $3 == "reset_after" { print $6 }' <<<"$ours")
      [netty_w2_wall]=$(awk '$3 == "reset_wall" { print $8 }' <<<"$theirs")
      [netty_w2_cpu]=$(awk '$3 == "reset_cpu" { print $8 }' <<<"$theirs")
      [wheel_w3_ms]=$(note W3 fire total_ms_median)
      [netty_w3_ms]=$(awk '$3 == "fire" { print $8 }' <<<"$theirs")
      [wheel_w4]=$(note W4 rss bytes_per_wait)
      [compact_w4]=$(note W4 rss_compact bytes_per_wait)
      [netty_w4_rss]=$(awk '$3 == "rss" { print $5 }' <<<"$theirs")
      [netty_w4_heap]=$(awk '$3 == "heap" { print $5 }' <<<"$theirs")
      [wheel_w5]=$(note W5 idle wakeups_per_s)
      [netty_w5]=$(awk '$1 == "W5" { print $5 }' <<<"$theirs")
    )
    printf '%-4s' "$turn"
    for c in "${columns[@]}"; do
      [[ -n ${row[$c]} ]] || { echo; echo "run.sh: no figure for $c in turn $turn" >&2; exit 1; }
      printf " %${#c}s" "${row[$c]}"
      all[$c]+="${row[$c]} "
    done
    echo
    if ! grep -q 'early=0$' <<<"$(awk '$3 == "fire"' <<<"$theirs")"; then
      echo "run.sh: Netty fired early in W3" >&2
    fi
  done
  printf '%-4s' med
  for c in "${columns[@]}"; do printf " %${#c}s" "$(tr ' ' '\n' <<<"${all[$c]}" | grep . | median)"; done
  echo
} | tee "$out"
