#!/bin/sh
# Runs every example in its short self-checking mode; fails if any of them fails.
#
#   tests/examples_smoke.sh BUILD_DIR [--skip NAME]...
#
# --skip NAME: the build left NAME out on purpose (examples/CMakeLists.txt: it needs C++20
# or Boost, and this build is C++17 or standalone); it is reported as skipped, not failed.
#
# Each example is looked up by name under BUILD_DIR (any subdirectory, so it works
# whatever the examples' output directory is) and run under `timeout`, so a hang is a
# failure rather than a stuck build. Exit status: 0 if all passed, 1 otherwise.

set -u

build=${1:?usage: examples_smoke.sh BUILD_DIR [--skip NAME]...}
shift
skipped=" "
while [ $# -gt 0 ]; do
  case $1 in
    --skip) skipped="$skipped${2:?--skip needs a name} "; shift 2 ;;
    *) echo "examples_smoke.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
limit=${EXAMPLES_TIMEOUT:-60}   # seconds per example
failed=""

is_skipped() {
  case $skipped in
    *" $1 "*) return 0 ;;
  esac
  return 1
}

find_exe() {
  find "$build" -type f -name "$1" -perm -u+x 2>/dev/null | head -n 1
}

# run NAME ARGS...: runs the example with ARGS; records a failure.
run() {
  name=$1
  shift
  if is_skipped "$name"; then
    echo "== $name: skipped (not built in this configuration)"
    return
  fi
  exe=$(find_exe "$name")
  if [ -z "$exe" ]; then
    echo "== $name: not built under $build"
    failed="$failed $name"
    return
  fi
  echo "== $name $*"
  if timeout "$limit" "$exe" "$@"; then
    echo "== $name: ok"
  else
    echo "== $name: FAILED (exit $?)"
    failed="$failed $name"
  fi
}

# rejects NAME FLAG ARGS...: bad input must end the example with exit status 2 and a
# message that names FLAG, before it does anything (no value wraps or overflows silently).
rejects() {
  name=$1
  flag=$2
  shift 2
  if is_skipped "$name"; then return; fi
  exe=$(find_exe "$name")
  [ -n "$exe" ] || return # run reports it missing
  err=$(timeout "$limit" "$exe" "$@" 2>&1 >/dev/null </dev/null)
  rc=$?
  if [ $rc -eq 2 ] && printf '%s' "$err" | grep -q -- "$flag"; then
    echo "== $name $*: rejected ($err)"
  else
    echo "== $name $*: FAILED (exit $rc, '$err'; expected exit 2 naming $flag)"
    failed="$failed $name-rejects"
  fi
}

run idle_reaper --self-test --quick
run request_deadline --self-test
run heartbeat --self-test
run order_expiry --self-test
run cooldown --self-test
run http_server --self-test
run http_server --self-test --stream beast

rejects idle_reaper --seed --seed 4294967296
rejects idle_reaper --tick --tick 10000000000000
# A tick longer than the idle timeout; a self-test that would end before any idle
# client could be reaped (it used to run for the whole tick, then fail).
rejects idle_reaper --tick --quick --tick 301
rejects idle_reaper --duration --quick --duration 500
rejects idle_reaper --port --port 99999999999999999999999
rejects idle_reaper --chatty-fraction --chatty-fraction nan
rejects idle_reaper --connections --quick --connections 0
# All of idle_reaper's clients connect from 127.0.0.1 to one server port, each from a
# local port of its own: more than exist (65535), or than the ephemeral range holds, is
# refused up front. (--duration 1: a run wrongly started ends at once, and fails.)
rejects idle_reaper --connections --quick --duration 1 --connections 65536
# (awk, not the shell's read: dash reads a byte at a time, and /proc's sysctl files then
# end after the first byte.)
over_range=$(awk '{ print $2 - $1 + 2 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
if [ -n "$over_range" ]; then
  rejects idle_reaper --connections --quick --duration 1 --connections "$over_range"
fi
rejects request_deadline --deadline server --deadline 9223372036854775807
rejects request_deadline --requests client --port 1 --requests 5,99999999999
rejects request_deadline --max-line server --max-line 14
rejects request_deadline --max-line server --max-line 1048577
rejects heartbeat --period --period 86400001
rejects heartbeat --port --port 65536
rejects heartbeat --missed --self-test --missed 200000 --period 86400000 --jitter 0
rejects heartbeat --clients --clients 10000
rejects order_expiry --random --random 99999999999999999999
# One past what a run may hold in memory (about 600 bytes an order, within 1 GiB).
rejects order_expiry --random --random 1789570
rejects order_expiry --seed --seed 4294967296
rejects http_server --port --port 70000
rejects http_server --tick --self-test --tick 10s

# cooldown again, through real stdin from a pipe: each skill cast, one on cooldown, one
# ready after advancing the manual clock, and EOF quits.
exe=$(find_exe cooldown)
if [ -n "$exe" ] && ! is_skipped cooldown; then
  echo "== cooldown --manual-clock < piped script"
  out=$(printf 'q\nadvance 3\nq\nadvance 11\nqwer\n' | timeout "$limit" "$exe" --manual-clock)
  rc=$?
  printf '%s\n' "$out"
  if [ $rc -eq 0 ] &&
     printf '%s\n' "$out" | grep -q '^\[ *3\.0s\] q on cooldown: 11\.0s left$' &&
     printf '%s\n' "$out" | grep -q '^\[ *14\.0s\] q ready$' &&
     printf '%s\n' "$out" | grep -q '^\[ *14\.0s\] r cast (cooldown 75s)$' &&
     printf '%s\n' "$out" | grep -q 'end of input: bye$'; then
    echo "== cooldown (piped stdin): ok"
  else
    echo "== cooldown (piped stdin): FAILED"
    failed="$failed cooldown-piped"
  fi
fi

if [ -n "$failed" ]; then
  echo "examples failed:$failed"
  exit 1
fi
echo "all examples passed"
