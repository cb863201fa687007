#!/usr/bin/env bash
# Runs Asio's own timer test, test/system_timer.cpp, against asio_wheel::timer.
#
#   tests/asio_conformance/run.sh [BUILD_DIR]    default BUILD_DIR: build
#
# The test is not copied into this repository: it is taken verbatim, at run time, from
# Debian's source package of Boost (apt-get source --download-only, from a deb-src list
# of its own under the cache directory; the system's apt configuration is not touched).
# substitute.sed then puts asio_wheel::timer in place of boost::asio::system_timer, and
# asio_conformance.hpp maps the test's basic_waitable_timer<clock, traits, executor>
# onto asio_wheel::basic_timer<executor>. The result is compiled against
# BUILD_DIR/libasio_wheel.a (build it first: cmake --build BUILD_DIR) with the same
# BOOST_ASIO_NO_DEPRECATED and sanitizer settings as that build, and run. Asio's test
# sleeps for real: it takes about 35 s.
#
# Environment:
#   ASIO_CONFORMANCE_ASIO=1.81   (default) Boost 1.81's test, from Debian bookworm's
#                                boost1.81, against the system's Boost headers.
#   ASIO_CONFORMANCE_ASIO=1.90   Boost 1.90's test, from Debian sid's boost1.90, against
#                                ../shared/deps/boost-asio-1.90 (ASIO_CONFORMANCE_ASIO_INCLUDE
#                                overrides). The library's sources are compiled here with
#                                those headers, since Asio's class layouts change.
#   ASIO_CONFORMANCE_CACHE       where the extracted test files are kept (default
#                                BUILD_DIR/asio_conformance); a second run downloads nothing.
#   CXX                          the compiler (default g++).
#
# Needs: apt-get and network access to Debian's archive on the first run, tar, xz.
# Last line and exit status:
#   "asio_conformance: 1 passed, 0 failed"              0  the upstream test passed
#   "asio_conformance: 0 passed, 1 failed"              1  it failed, or did not compile
#   "asio_conformance: 0 passed, 0 failed, 1 skipped"   2  it could not be fetched (no
#                                                          network, package gone from Debian)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$root" && realpath -m "${1:-build}")
asio=${ASIO_CONFORMANCE_ASIO:-1.81}
cache=$(realpath -m "${ASIO_CONFORMANCE_CACHE:-$build/asio_conformance}")
cxx=${CXX:-g++}

say() { printf 'asio_conformance: %s\n' "$*"; }
fail() {
  say "$*" >&2
  say "0 passed, 1 failed"
  exit 1
}
skip() {
  say "cannot fetch the upstream test: $*" >&2
  say "0 passed, 0 failed, 1 skipped"
  exit 2
}

case $asio in
  1.81) suite=bookworm package=boost1.81 asio_include="" ;;
  1.90)
    suite=sid package=boost1.90
    asio_include=${ASIO_CONFORMANCE_ASIO_INCLUDE:-$root/../shared/deps/boost-asio-1.90/include}
    [[ -f $asio_include/boost/asio/version.hpp ]] ||
      fail "no Boost.Asio 1.90 headers in $asio_include (set ASIO_CONFORMANCE_ASIO_INCLUDE)"
    ;;
  *) fail "ASIO_CONFORMANCE_ASIO=$asio: expected 1.81 or 1.90" ;;
esac

work=$cache/$package
upstream=$work/upstream # test/system_timer.cpp and test/unit_test.hpp, verbatim
mkdir -p "$work"

# --- 1. Asio's test, from Debian's source package ----------------------------------------
if [[ ! -f $upstream/system_timer.cpp || ! -f $upstream/unit_test.hpp ]]; then
  command -v apt-get >/dev/null || skip "apt-get is needed to fetch Boost's source package"
  if ! command -v xz >/dev/null; then
    ((EUID == 0)) || skip "xz is needed to unpack Boost's source (apt-get install xz-utils)"
    apt-get install -y -qq xz-utils >/dev/null
  fi
  started=$SECONDS
  apt_dir=$work/apt
  rm -rf "$apt_dir" && mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian %s main\n' \
    "$suite" >"$apt_dir/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=-"
            -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
            -o "APT::Sandbox::User=root")
  say "fetching Debian $suite's source package $package (about 80 MB)"
  apt-get "${apt_opts[@]}" -qq update || skip "apt-get update of the deb-src list failed"
  (cd "$apt_dir" && apt-get "${apt_opts[@]}" -qq source --download-only "$package") ||
    skip "apt-get source --download-only $package failed"
  orig=$(find "$apt_dir" -maxdepth 1 -name "${package}_*.orig.tar.*" | head -n 1)
  [[ -n $orig ]] || skip "no ${package}_*.orig.tar.* was downloaded"
  mkdir -p "$apt_dir/src"
  tar -xf "$orig" -C "$apt_dir/src" --wildcards \
    '*/libs/asio/test/system_timer.cpp' '*/libs/asio/test/unit_test.hpp' ||
    fail "libs/asio/test/system_timer.cpp is not in $(basename "$orig")"
  mkdir -p "$upstream"
  find "$apt_dir/src" -path '*/libs/asio/test/*' -type f -exec cp {} "$upstream/" \;
  [[ -f $upstream/system_timer.cpp && -f $upstream/unit_test.hpp ]] ||
    fail "the upstream test files were not extracted"
  printf '%s\n' "$(basename "$orig")" >"$upstream/SOURCE"
  rm -rf "$apt_dir"
  say "fetched and unpacked in $((SECONDS - started)) s"
fi
say "upstream test: $(cat "$upstream/SOURCE" 2>/dev/null || echo '?'): libs/asio/test/system_timer.cpp"

# --- 2. asio_wheel::timer in place of system_timer --------------------------------------
test_cpp=$work/system_timer_asio_wheel.cpp
sed -f "$here/substitute.sed" "$upstream/system_timer.cpp" >"$test_cpp"
# Every mention of the timer type must have been replaced, and something must have been.
if grep -nE 'boost::asio::(system_timer|basic_waitable_timer)|<boost/asio/system_timer\.hpp>' "$test_cpp"; then
  fail "substitute.sed left the lines above unchanged: the upstream test changed shape"
fi
replaced=$(grep -c 'asio_wheel::timer' "$test_cpp" || true)
((replaced >= 10)) || fail "only $replaced mentions of asio_wheel::timer after substitution"
diff -u "$upstream/system_timer.cpp" "$test_cpp" >"$work/substitution.diff" || true
say "substituted $replaced mentions of the timer type ($work/substitution.diff)"

# --- 3. Build against the library -------------------------------------------------------
flags=(-std=c++20 -O2 -g -pthread -Wall -Wextra
       -I"$root/include" -I"$here" -I"$upstream")
lib_inputs=()
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" 2>/dev/null | head -n 1; }
no_deprecated=$(cache_value ASIO_WHEEL_NO_DEPRECATED)
sanitize=$(cache_value ASIO_WHEEL_SANITIZE)
[[ ${no_deprecated^^} == ON || ${no_deprecated^^} == TRUE || $no_deprecated == 1 ]] &&
  flags+=(-DBOOST_ASIO_NO_DEPRECATED)
case $sanitize in
  address) flags+=(-fsanitize=address -fsanitize=undefined -fno-sanitize-recover=all -fno-omit-frame-pointer) ;;
  thread) flags+=(-fsanitize=thread -fno-omit-frame-pointer) ;;
esac
if [[ -n $asio_include ]]; then
  flags+=(-isystem "$asio_include")
  objects=$work/objects
  mkdir -p "$objects"
  say "compiling the library's sources against $asio_include"
  for src in "$root"/src/*.cpp; do
    obj=$objects/$(basename "$src" .cpp).o
    "$cxx" "${flags[@]}" -c "$src" -o "$obj" || fail "compiling $src failed"
    lib_inputs+=("$obj")
  done
else
  [[ -f $build/libasio_wheel.a ]] ||
    fail "no $build/libasio_wheel.a: run cmake --build $build first"
  lib_inputs+=("$build/libasio_wheel.a")
fi
binary=$work/system_timer_asio_wheel
say "compiling ${test_cpp#"$root"/} ($cxx ${flags[*]})"
"$cxx" "${flags[@]}" "$test_cpp" "${lib_inputs[@]}" -o "$binary" ||
  fail "the upstream test does not compile against asio_wheel::timer"

# --- 4. Run -----------------------------------------------------------------------------
started=$SECONDS
status=0
"$binary" 2>&1 | tee "$work/output.txt" || status=$?
say "ran in $((SECONDS - started)) s"
if ((status != 0)) || ! grep -q 'No errors detected' "$work/output.txt"; then
  fail "Asio's system_timer test reported errors with asio_wheel::timer (exit status $status)"
fi
say "1 passed, 0 failed"
