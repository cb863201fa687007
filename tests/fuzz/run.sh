#!/usr/bin/env bash
# Builds fuzz_wheel with clang (ASan + UBSan + libFuzzer) in build-fuzz/ and fuzzes it.
#   bash tests/fuzz/run.sh [seconds=60] [extra libFuzzer flags...]
# New interesting inputs go to build-fuzz/corpus/fuzz_wheel/ (not the repo); a crash is
# written as build-fuzz/crash-*; replay it with: build-fuzz/tests/fuzz/fuzz_wheel FILE.
# To keep a finding as a regression seed, copy it into tests/fuzz/corpus/fuzz_wheel/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds=${1:-60}
shift || true
generator=()
[[ -f build-fuzz/CMakeCache.txt ]] || generator=(-G Ninja)
cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link \
  -DASIO_WHEEL_SANITIZE=address -DASIO_WHEEL_BUILD_FUZZ=ON \
  -DASIO_WHEEL_BUILD_EXAMPLES=OFF -DASIO_WHEEL_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j "${ASIO_WHEEL_JOBS:-2}" --target asio_wheel_fuzz
mkdir -p build-fuzz/corpus/fuzz_wheel
exec build-fuzz/tests/fuzz/fuzz_wheel -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix=build-fuzz/ "$@" build-fuzz/corpus/fuzz_wheel tests/fuzz/corpus/fuzz_wheel
