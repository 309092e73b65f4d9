#!/usr/bin/env bash
# Edge-stream benchmark: the operator's round trip `edge-controller invoke --tool exec` (CLI →
# admin socket → controller → ConnectEdge → agent → Executor → process → result back),
# measured beside baselines taken in the same run on the same machine:
#   - local fork/exec of the same command (`/bin/sh -c true`), what the work itself costs;
#   - `edge-controller nodes`, the CLI process start + one admin-socket call, no node involved;
#   - bulk output: `head -c M MiB /dev/zero` locally into /dev/null vs. streamed back from the
#     node through the controller into /dev/null.
# It also prints the agent's RSS (VmRSS, VmHWM) before and after. Figures are printed, never
# asserted. Usage: tests/bench/edge/invoke_roundtrip.sh BIN_DIR [RUNS] [MIB]
#   BIN_DIR holds edge-agent and edge-controller (a Release build for meaningful figures).
set -euo pipefail
bin=${1:?usage: invoke_roundtrip.sh BIN_DIR [RUNS] [MIB]}
runs=${2:-50}
mib=${3:-32}
AGENT="$bin/edge-agent"
CTL="$bin/edge-controller"

source "$(dirname "$0")/../../../scripts/lib/local_run.sh" edge-bench
source "$(dirname "$0")/../../../scripts/lib/local_pair.sh"
now_us() { echo $(( $(date +%s%N) / 1000 )); }
# stats NAME < microsecond samples: median, p95, mean in ms
stats() {
  sort -n | awk -v name="$1" '{ a[NR] = $1; s += $1 }
    END { if (NR == 0) exit; m = a[int((NR + 1) / 2)]; p = a[int(NR * 0.95 + 0.5)]; if (p == "") p = a[NR];
          printf "  %-44s median %7.2f ms  p95 %7.2f ms  mean %7.2f ms  (n=%d)\n", name, m / 1000, p / 1000, s / NR / 1000, NR }'
}
time_runs() {  # time_runs NAME CMD...: runs CMD $runs times, prints stats
  local name=$1; shift
  for ((i = 0; i < runs; i++)); do
    local t0; t0=$(now_us)
    "$@" >/dev/null 2>"$work/last.err" || { echo "bench: '$*' failed: $(cat "$work/last.err")" >&2; exit 1; }
    echo $(( $(now_us) - t0 ))
  done | stats "$name"
}
rss() { awk '/^VmRSS|^VmHWM/ { printf "%s %s kB  ", $1, $2 }' "/proc/$1/status"; echo; }

start_pair "$CTL" "$AGENT" bench-node

echo "edge stream round trip, $runs runs each ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
echo -n "  agent at start:  "; rss "$agent_pid"
time_runs "baseline: /bin/sh -c /bin/true (local fork/exec)" /bin/sh -c /bin/true
time_runs "baseline: edge-controller nodes (CLI + admin)" \
  "$CTL" --config "$work/controller.yaml" nodes
time_runs "edge-controller invoke exec /bin/true" \
  "$CTL" --config "$work/controller.yaml" invoke --node bench-node --tool exec --arg command=/bin/true

echo "bulk output, $mib MiB of zeros into /dev/null"
t0=$(now_us); head -c "${mib}M" /dev/zero >/dev/null; t1=$(now_us)
awk -v us=$((t1 - t0)) -v mib="$mib" 'BEGIN { printf "  %-44s %8.1f MiB/s\n", "baseline: local head -c", mib / (us / 1e6) }'
t0=$(now_us)
"$CTL" --config "$work/controller.yaml" invoke --node bench-node --tool exec \
  --arg "command=head -c ${mib}M /dev/zero" --deadline 300s >/dev/null
t1=$(now_us)
awk -v us=$((t1 - t0)) -v mib="$mib" 'BEGIN { printf "  %-44s %8.1f MiB/s\n", "streamed back through the edge stream", mib / (us / 1e6) }'
echo -n "  agent at end:    "; rss "$agent_pid"
