#!/usr/bin/env bash
# The test command: installs what is missing, builds everything with AddressSanitizer +
# UBSan, and runs the whole suite (unit, integration with the real binaries, fuzz replays).
# Usage: scripts/test.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/deps.sh

build="${EDGE_TEST_BUILD_DIR:-$root/build-asan}"
jobs="${EDGE_JOBS:-$(nproc)}"
start=$(date +%s)

cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Debug -DEDGE_SANITIZE=ON -DEDGE_BUILD_TESTS=ON -DEDGE_BUILD_FUZZERS=ON >/dev/null
cmake --build "$build" -j "$jobs"
built=$(date +%s)
echo "test.sh: build took $((built - start)) s"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd "$build"
ctest --output-on-failure --timeout 300 -j "$jobs" "$@"
echo "test.sh: build $((built - start)) s, tests $(( $(date +%s) - built )) s"
