#!/usr/bin/env bash
# Fuzzing (issue 16 #4): builds every libFuzzer target with Debian's clang (clang-16 and its
# compiler-rt: libFuzzer + ASan + UBSan) and runs each for SECONDS (default 600) on its corpus
# in the tree (tests/fuzz/<group>/corpus[/<target>]). Inputs that add coverage are merged back
# into that corpus (review and commit them); crashes are kept under <build>/fuzz-crashes/.
# Prints one line per target: executions, new corpus entries, crashes.
#
# Usage: scripts/fuzz.sh [seconds-per-target] [target-name-regex]
# The test suite (scripts/test.sh, gcc) replays the same corpora through every target.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds="${1:-600}"
filter="${2:-.}"

scripts/deps.sh
need=()
command -v clang++-16 >/dev/null || need+=(clang-16)
dpkg -s libclang-rt-16-dev >/dev/null 2>&1 || need+=(libclang-rt-16-dev)
if ((${#need[@]})); then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi

build="${EDGE_FUZZ_BUILD_DIR:-$root/build-fuzz}"
# libstdc++ 12 opens <expected> only when __cpp_concepts >= 202002L; clang 16 implements
# what it needs (conditionally trivial special members, P0848) but still advertises 201907L.
# The define opens the header for this build only; the product builds with gcc.
cxxflags="-Wno-macro-redefined -Wno-unknown-warning-option -D__cpp_concepts=202002L"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEDGE_SANITIZE=ON -DEDGE_BUILD_TESTS=ON \
  -DEDGE_BUILD_FUZZERS=ON -DCMAKE_CXX_FLAGS="$cxxflags" >/dev/null

# Each target and its corpus, as CMake registered them (edge_add_fuzzer).
mapfile -t lines < <(grep -E "^[^ ]*(${filter})[^ ]* " "$build/fuzz_targets.txt" || true)
if ((${#lines[@]} == 0)); then
  echo "fuzz.sh: no fuzz target matches \"$filter\"" >&2
  exit 2
fi
names=()
for l in "${lines[@]}"; do names+=("${l%% *}"); done
cmake --build "$build" -j "$(nproc)" --target "${names[@]}"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
mkdir -p "$build/fuzz-crashes" "$build/fuzz-logs"
printf '%-28s %12s %8s %8s  %s\n' TARGET EXECUTIONS NEW CRASHES CORPUS
status=0
for l in "${lines[@]}"; do
  read -r name corpus <<<"$l"
  exe="$build/bin/$name"
  fresh="$build/fuzz-new/$name"
  rm -rf "$fresh" && mkdir -p "$fresh"
  log="$build/fuzz-logs/$name.log"
  before=$(find "$corpus" -type f | wc -l)
  "$exe" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/fuzz-crashes/$name-" "$fresh" "$corpus" >"$log" 2>&1 || true
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  # Keep only what adds coverage to the corpus in the tree.
  "$exe" -merge=1 "$corpus" "$fresh" >>"$log" 2>&1 || true
  added=$(($(find "$corpus" -type f | wc -l) - before))
  crashes=$(find "$build/fuzz-crashes" -name "$name-*" -type f | wc -l)
  ((crashes == 0)) || status=1
  printf '%-28s %12s %8s %8s  %s\n' "$name" "${execs:-?}" "$added" "$crashes" "${corpus#"$root"/}"
done
exit "$status"
