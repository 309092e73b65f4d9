#!/usr/bin/env bash
# Every benchmark, in one run (issue 14): builds Release with the benchmarks, then runs each
# one, printing every figure beside the baseline it measured in the same run, and writes
#   BUILD/bench/<name>.txt    what each benchmark printed
#   BUILD/bench/results.json  {"machine": …, "benches": {"<name>": {"command": …, "seconds": …,
#                             "figures": [{"name", "unit", "median", "p99", "min", "max", "n"}…]}}}
# Benchmarks print figures; nothing here asserts them. Installs what is missing (the build's
# packages, openssh-server for the ssh baselines, python3 for a free port). Run as root on a
# quiet machine: anything else running on the 2 cores shows in the figures (the load average
# is printed with each benchmark).
# Usage: scripts/bench.sh [--quick] [--runs N] [NAME_REGEX]
#   --quick     small sizes (a smoke run of every benchmark, a minute or two)
#   --runs N    repetitions of the repeated figures (default 30; the executor, dispatch and
#               worker benchmarks repeat 5×N): full sizes in less time (N = 5: about 25 min)
#   NAME_REGEX  run only the benchmarks whose name matches (e.g. 'edge|executor')
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
quick=0
runs_arg=
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --runs)
      [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --runs needs a positive count, got '${2:-}'" >&2; exit 2; }
      runs_arg=$2
      shift
      ;;
    --) shift; break ;;
    -*) echo "bench.sh: unknown option '$1' (usage: bench.sh [--quick] [--runs N] [NAME_REGEX])" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
(($# <= 1)) || { echo "bench.sh: one NAME_REGEX at most, and the options before it; got: $*" >&2; exit 2; }
only="${1:-.}"

scripts/deps.sh
need=()
for p in openssh-server openssh-client python3 procps strace; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == "install ok installed" ]] || need+=("$p")
done
if ((${#need[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

build="${EDGE_BENCH_BUILD_DIR:-$root/build-release}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEDGE_BUILD_BENCHES=ON \
  -DEDGE_BUILD_TESTS=ON -DEDGE_BUILD_FUZZERS=OFF >/dev/null
mapfile -t bench_targets < <(ninja -C "$build" -t targets all | sed -n 's/^\([a-z0-9_]*_bench\): .*/\1/p' | sort -u)
cmake --build "$build" -j "${EDGE_JOBS:-$(nproc)}" --target edge-agent edge-controller "${bench_targets[@]}"
bin="$build/bin"
out="$build/bench"
rm -rf "$out"
mkdir -p "$out"

if ((quick)); then
  runs=5 mib=64 fleet_nodes=50 rpc_mib=16 file_mib=16 relay_lines=500 calls=50
  idle_args=(20 200) grpc_floor_args=(--window 5 --connections 50)
else
  runs=30 mib=1024 fleet_nodes=1000 rpc_mib=1024 file_mib=256 relay_lines=20000 calls=2000
  idle_args=(300 10000) grpc_floor_args=(--window 120 --connections 1000)
fi
runs=${runs_arg:-$runs}

# run NAME CMD…: runs one benchmark (when NAME matches), its output shown and kept; its JSON
# lines (BENCH_JSON, for the scripts) or JSON file (--json, for the C++ benchmarks) kept.
run() {
  local name=$1; shift
  [[ "$name" =~ $only ]] || return 0
  echo
  echo "=== $name: $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
  local t0=$SECONDS rc=0
  BENCH_JSON="$out/$name.jsonl" "$@" 2>&1 | tee "$out/$name.txt" || rc=$?
  echo "$name $((SECONDS - t0)) $rc $*" >>"$out/ran.txt"
  ((rc == 0)) || echo "=== $name FAILED (exit $rc): see $out/$name.txt"
}
have() { [[ -x "$bin/$1" ]]; }

have cgroup_join_bench && run cgroup_join "$bin/cgroup_join_bench" --joins "$runs" --json "$out/cgroup_join.json"
have executor_bench && run executor "$bin/executor_bench" --runs "$((runs * 5))" --mib "$mib" --json "$out/executor.json"
run edge_vs_ssh "$root/tests/bench/edge/edge_vs_ssh.sh" "$bin" "$runs" "$mib"
have stream_floor_bench && run stream_floor "$bin/stream_floor_bench" --mib "$mib" --runs 3 --json "$out/stream_floor.json"
have dispatch_bench && run dispatch "$bin/dispatch_bench" --runs "$((runs * 5))" --commands "$calls" --cli-runs "$runs" --json "$out/dispatch.json"
have dispatch_floor_bench && run dispatch_floor "$bin/dispatch_floor_bench" --commands "$((calls * 2))" --runs 5 --json "$out/dispatch_floor.json"
run sync_count "$root/tests/bench/edge/sync_count.sh" "$bin" "$calls"
[[ -x "$root/tests/bench/idle/idle_agent.sh" ]] &&
  run idle "$root/tests/bench/idle/idle_agent.sh" "$bin" "${idle_args[@]}"
have grpc_floor_bench && run grpc_floor "$bin/grpc_floor_bench" "${grpc_floor_args[@]}" --json "$out/grpc_floor.json"
have fleet_bench && run fleet "$bin/fleet_bench" --bin-dir "$bin" --nodes "$fleet_nodes" --heartbeat 30s --measure 60s --restart --fleet-command --json "$out/fleet.json"
# As many streams as ssh_baseline.sh times (at most 5), so the two medians compare.
have worker_rpc_bench && run worker_rpc "$bin/worker_rpc_bench" --runs "$((runs * 5))" --stream-runs "$((runs < 5 ? runs : 5))" --mib "$rpc_mib" --file-mib "$file_mib" --json "$out/worker_rpc.json"
run worker_rpc_ssh "$root/tests/bench/worker_rpc/ssh_baseline.sh" "$runs" "$rpc_mib"
# exec_stream's floor on this machine, beside ssh's rate on the same command just measured.
ssh_mibs=$(sed -n "s/.*(exec_stream's command) *median *\([0-9.]*\).*/\1/p" "$out/worker_rpc_ssh.txt" 2>/dev/null || true)
have exec_stream_floor_bench && run exec_stream_floor "$bin/exec_stream_floor_bench" --mib "$rpc_mib" --runs "$((runs < 5 ? runs : 5))" ${ssh_mibs:+--ssh-mibs "$ssh_mibs"} --json "$out/exec_stream_floor.json"
have json_text_bench && run json_text "$bin/json_text_bench" --runs "$runs" --mib "$file_mib" --json "$out/json_text.json"
have compute_bench && run compute "$bin/compute_bench" --calls "$calls" --json "$out/compute.json"
have relay_bench && run relay "$root/tests/bench/relay/relay_bench.sh" "$bin" "$relay_lines"

# results.json: every benchmark's figures (its JSON lines, or its --json file as is).
{
  printf '{"machine":{"cpus":%d,"kernel":"%s","date":"%s","commit":"%s","quick":%s,"runs":%d},"benches":{' \
    "$(nproc)" "$(uname -r)" "$(date -u +%FT%TZ)" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$( ((quick)) && echo true || echo false)" "$runs"
  first=1
  while read -r name secs rc cmd; do
    ((first)) || printf ','
    first=0
    figures="[]"
    if [[ -s "$out/$name.json" ]]; then
      figures=$(cat "$out/$name.json")
    elif [[ -s "$out/$name.jsonl" ]]; then
      figures="[$(paste -sd, "$out/$name.jsonl")]"
    fi
    cmd=${cmd//\\/\\\\}
    printf '"%s":{"command":"%s","seconds":%d,"exit":%d,"figures":%s}' "$name" "${cmd//\"/\\\"}" "$secs" "$rc" "$figures"
  done < <(cat "$out/ran.txt" 2>/dev/null || true)  # no file: nothing matched NAME_REGEX
  printf '}}\n'
} >"$out/results.json"
echo
echo "bench: figures in $out/*.txt, all of them in $out/results.json"
