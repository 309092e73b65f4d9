#!/usr/bin/env bash
# The idle agent's CPU, counted exactly (issue 14 item 3): idle_agent.sh reads utime + stime,
# which the kernel samples at its tick (10 ms), so a few ticks decide a figure of 0.02 %.
# This runs `perf stat -e task-clock,page-faults` on the agent of a real enrolled pair for
# WINDOW seconds, SETTLE seconds after start (past the first quiet liveness interval and its
# release), and again SETTLE seconds after COMMANDS commands. Prints figures; asserts
# nothing. Run two builds side by side (two invocations at once) to compare them.
#
# Usage: tests/bench/idle/idle_cpu_perf.sh BIN_DIR [WINDOW] [COMMANDS] [SETTLE]
#   defaults: 240 s, 500 commands, 150 s. Needs perf (Debian: linux-perf).
#   Environment: AGENT_USER, AGENT_ENV (tests/bench/idle/lib.sh).
set -euo pipefail
bin=${1:?usage: idle_cpu_perf.sh BIN_DIR [WINDOW] [COMMANDS] [SETTLE]}
window=${2:-240}
commands=${3:-500}
settle=${4:-150}
source "$(dirname "$0")/../../../scripts/lib/local_run.sh" idle-cpu
source "$(dirname "$0")/lib.sh"
start_idle_pair "$bin" perf-node
measure() {
  perf stat -e task-clock,page-faults -p "$agent_pid" -- sleep "$window" 2>&1 |
    awk -v l="$1" '/task-clock|page-faults/ { printf "%s: %s %s\n", l, $1, $2 }'
  echo "$1: RSS $(kb "$agent_pid" Rss) kB, PSS $(kb "$agent_pid" Pss) kB"
}
sleep "$settle"
measure "idle, ${window} s"
for ((i = 0; i < commands; i++)); do
  ctl invoke --node perf-node --tool exec --arg command=/bin/true >/dev/null
done
sleep "$settle"
measure "after $commands commands, ${window} s"
