#!/usr/bin/env bash
# The suite under load (issue 16 #3): runs the whole ctest suite of an existing test build
# (scripts/test.sh's, ASan + UBSan) RUNS times with `stress-ng --cpu 2` beside it, and prints
# one line per run — passed, failed, seconds, the failed tests — then a total. Installs
# stress-ng from Debian when missing. Nothing is rebuilt: build first (scripts/test.sh).
# Usage: scripts/stress_test.sh [runs] [build-dir] [until-epoch-seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"
build="${2:-$(pwd)/build-asan}"
until="${3:-0}"
if ! command -v stress-ng >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng
fi
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
logs="$build/stress-logs"
mkdir -p "$logs"
failed_runs=0
done_runs=0
for ((i = 1; i <= runs; ++i)); do
  if ((until > 0 && $(date +%s) >= until)); then break; fi
  stress-ng --cpu 2 --timeout 0 --quiet &
  hog=$!
  start=$(date +%s)
  rc=0
  (cd "$build" && ctest -j 2 --timeout 300 --output-on-failure) >"$logs/run-$i.log" 2>&1 || rc=$?
  kill "$hog" 2>/dev/null || true
  wait "$hog" 2>/dev/null || true
  secs=$(($(date +%s) - start))
  summary=$(grep -E "tests passed" "$logs/run-$i.log" | tail -n 1 || true)
  failures=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (\(Failed\|Timeout\|SEGFAULT\|Subprocess aborted\|Exception\).*/\1/p' "$logs/run-$i.log" | tr '\n' ' ')
  ((done_runs += 1))
  if ((rc != 0)); then ((failed_runs += 1)); fi
  echo "run $i: rc $rc, ${secs} s, ${summary:-no summary}${failures:+; failed: $failures}"
done
echo "stress: $done_runs runs, $failed_runs with a failure (logs in $logs)"
