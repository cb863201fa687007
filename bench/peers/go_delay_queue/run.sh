#!/usr/bin/env bash
# S2 beside Go: asio_wheel::delay_queue (asio_wheel_bench --only S2) and the Go delay
# queue of this directory (BenchmarkPushAndTake), the same workload at N = 1M, in turns
# on one machine: issue 13's target is "at least 2.5x faster than S2's Go DelayQueue on
# the same machine". Two programs, so two processes; the turns alternate so that a slow
# spell of a shared machine falls on both.
#
#   run.sh BENCH_BINARY OUTPUT      (scripts/bench --go-s2 calls it so)
#
# Each turn prints each side's push, take and push + take in ns per element (asio_wheel's: the median of
# its 5 repetitions; Go's: one run of 1M); the summary, the median over the turns of each,
# and Go's median over asio_wheel's. Env: S2_GO_TURNS (default 5).
set -euo pipefail
bench=$1
out=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
turns=${S2_GO_TURNS:-5}

# The Go side's own tests first: it takes in due order, never early.
(cd "$here" && go vet ./... && go test -count 1 ./... >/dev/null)

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

wheel_all=() go_all=()
{
  echo "# S2 push + chained take, N = 1M, ns per element; $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown);" \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
    "$(go version | cut -d' ' -f3)"
  printf '%-5s %11s %11s %11s %11s %11s %11s\n' turn wheel_push wheel_take wheel_sum go_push go_take go_sum
  for ((turn = 1; turn <= turns; ++turn)); do
    # asio_wheel: the median column of S2's push, take_chained and push+take rows.
    s2=$("$bench" --only S2 --csv '')
    row() { awk -v v="$1" '$1 == "S2" && $3 == v { print $6 }' <<<"$s2"; }
    wheel=$(row push+take)
    [[ -n $wheel ]] || { echo "run.sh: no S2 row from $bench" >&2; exit 1; }
    # Go: ns/op is push + take per element (BenchmarkPushAndTake times the two only).
    go_line=$(cd "$here" && go test -run '^$' -bench PushAndTake -benchtime 1000000x -count 1 |
      grep '^BenchmarkPushAndTake')
    go_sum=$(awk '{ print $3 }' <<<"$go_line")
    go_metric() { awk -v unit="$1" '{ for (i = 2; i <= NF; ++i) if ($i == unit) print $(i - 1) }' <<<"$go_line"; }
    printf '%-5s %11s %11s %11s %11s %11s %11s\n' "$turn" "$(row push)" "$(row take_chained)" "$wheel" \
      "$(go_metric push-ns/op)" "$(go_metric take-ns/op)" "$go_sum"
    wheel_all+=("$wheel") go_all+=("$go_sum")
  done
  wheel_median=$(printf '%s\n' "${wheel_all[@]}" | median)
  go_median=$(printf '%s\n' "${go_all[@]}" | median)
  printf 'median over %d turns: asio_wheel %s ns, Go %s ns: asio_wheel %.1fx faster (target >= 2.5x)\n' \
    "$turns" "$wheel_median" "$go_median" "$(awk -v g="$go_median" -v w="$wheel_median" 'BEGIN { print g / w }')"
} | tee "$out"
