#!/usr/bin/env bash
# Disk syncs per edge command (issue 14 target 2): starts one controller and one enrolled agent
# on loopback, runs `edge-controller invoke --tool exec --arg command=/bin/true` N times with
# strace counting the fdatasync and fsync calls of each process, and prints the counts per
# command. The count does not depend on the machine's load or disk, unlike the latency each
# sync costs (median 3.2 ms on the stop-26 machine; docs/performance.md). Figures are printed,
# never asserted. Needs strace (Debian's).
# Usage: tests/bench/edge/sync_count.sh BIN_DIR [N]
set -euo pipefail
bin=${1:?usage: sync_count.sh BIN_DIR [N]}
n=${2:-100}
command -v strace >/dev/null || { echo "sync_count: needs strace (apt-get install strace)" >&2; exit 2; }
source "$(dirname "$0")/../../../scripts/lib/local_run.sh" edge-sync-count
source "$(dirname "$0")/../../../scripts/lib/local_pair.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"  # a sanitizer build's figures are the same
start_pair "$bin/edge-controller" "$bin/edge-agent" sync-01
ctl invoke --node sync-01 --tool exec --arg command=/bin/true >/dev/null  # the first syncs of each file
strace -f -qq -c -e trace=fdatasync,fsync -o "$work/controller.strace" -p "$ctl_pid" &
s_ctl=$!
strace -f -qq -c -e trace=fdatasync,fsync -o "$work/agent.strace" -p "$agent_pid" &
s_agent=$!
sleep 1
for ((i = 0; i < n; i++)); do
  ctl invoke --node sync-01 --tool exec --arg command=/bin/true >/dev/null
done
sleep 1
kill -INT "$s_ctl" "$s_agent"
wait "$s_ctl" "$s_agent" 2>/dev/null || true
# per_command NAME FILE: the syncs in an strace -c summary, per command (printed, and a JSON
# line in $BENCH_JSON when set, as scripts/lib/bench_stats.sh writes them).
per_command() {
  awk -v name="$1" -v n="$n" -v json="${BENCH_JSON:-}" '$NF == "fdatasync" || $NF == "fsync" { s += $4 }
    END {
      printf "  %-12s %5d syncs for %d commands: %.2f per command\n", name, s, n, s / n
      if (json != "")
        printf "{\"name\":\"%s syncs per command\",\"unit\":\"syncs\",\"median\":%.4f,\"n\":%d}\n", name, s / n, n >> json
    }' "$2"
}
echo "disk syncs per \`invoke exec /bin/true\` ($n commands):"
per_command controller "$work/controller.strace"
per_command agent "$work/agent.strace"
