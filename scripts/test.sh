#!/usr/bin/env bash
# The test command: installs what is missing, builds everything with AddressSanitizer +
# UBSan, and runs the whole suite (unit, integration with the real binaries, fuzz replays),
# then, as root, the package install test (scripts/package_test.sh).
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
tested=$(date +%s)
# The install test (issue 13): the .deb/.rpm of this build installed, upgraded, removed and
# purged on this machine. Only as root; EDGE_PACKAGE_TEST=0 skips it on a machine that must
# not have packages installed.
if [[ $(id -u) == 0 && "${EDGE_PACKAGE_TEST:-1}" != 0 ]]; then
  "$root/scripts/package_test.sh" "$build"
fi
echo "test.sh: build $((built - start)) s, tests $((tested - built)) s, install test $(( $(date +%s) - tested )) s"
