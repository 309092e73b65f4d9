#!/usr/bin/env bash
# Idle-agent benchmark (issue 14 item 3): what a connected, idle edge-agent costs — RSS, PSS,
# threads, CPU % and wake-ups per minute — at start and again once it is idle after COMMANDS
# commands, each figure printed beside the issue's target and beside a trivial idle process
# (`sleep`) sampled over the same window on the same machine. Figures are printed, never
# asserted.
#
# It starts the real edge-controller and an enrolled edge-agent on loopback (gRPC port picked
# at run time, temp dirs, default agent config apart from the join token), waits until the
# node is connected and settled, then samples the agent for SECONDS:
#   RSS, PSS    /proc/PID/smaps_rollup (Rss, Pss), at the end of the window (and the RSS at
#               its start: after the commands, what the agent gave back meanwhile shows);
#   USS         Private_Clean + Private_Dirty of the same: the pages no other process maps,
#               what the system gets back when the agent exits (the idle agent drops the
#               pages of code it does not run, agent/daemon/memory_trim.h: RSS and PSS fall
#               by the shared ones too, which other processes keep resident);
#   page faults minor + major faults of /proc/PID/stat across the window, per minute: what
#               the idle path costs to bring back the code pages it still runs;
#   threads     /proc/PID/status Threads, and each thread's name (/proc/PID/task/*/comm);
#   CPU %       utime+stime of /proc/PID/stat (every thread, the exited ones too; not its
#               children) over the window's wall time;
#   wake-ups    voluntary + involuntary context switches summed over /proc/PID/task/*/status
#               across the window, per minute: each one ends a run of the thread on a CPU, so
#               it counts how often the process was scheduled (a thread that exits during the
#               window takes its count with it; none does once idle). perf is not needed.
# Then COMMANDS `exec /bin/true` commands go through the controller: `edge-controller invoke`
# (CLI → admin socket → controller → edge stream → agent → process → result), PARALLEL
# (default 4) at a time, so the agent sees concurrent commands as it would in use. Each CLI
# call waits for its result (no --detach: detached commands pile up faster than the agent
# takes them and are refused, which would measure the refusal path). After the last one it
# waits SETTLE seconds (default 40: each result's outbox entry is pruned by a timer 30 s after
# its write, so the first 30 s after a burst still have work) and samples the idle window again.
#
# With BENCH_JSON=FILE (scripts/bench.sh), each of the agent's figures is also appended to FILE
# as a JSON line of one sample ({"name", "unit", "median", "p99", "min", "max", "n": 1}).
#
# Usage: tests/bench/idle/idle_agent.sh BIN_DIR [SECONDS] [COMMANDS]
#   BIN_DIR holds edge-agent and edge-controller (a Release build for meaningful figures);
#   SECONDS (default 300) per idle window; COMMANDS (default 10000).
#   Environment: PARALLEL (4), SETTLE (40), AGENT_ENV (extra VAR=VALUE words for the agent),
#   AGENT_USER (run as root: the agent runs as this user, as the packaged unit runs it as
#   edge-agent; what an unprivileged process may ask of the kernel differs).
set -euo pipefail
bin=${1:?usage: idle_agent.sh BIN_DIR [SECONDS] [COMMANDS]}
window=${2:-300}
commands=${3:-10000}
parallel=${PARALLEL:-4}
settle=${SETTLE:-40}

source "$(dirname "$0")/../../../scripts/lib/local_run.sh" idle-bench
sleep_pid=""
trap '[[ -n "$sleep_pid" ]] && kill "$sleep_pid" 2>/dev/null; cleanup' EXIT

source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../../../scripts/lib/bench_stats.sh"
bench_json=${BENCH_JSON:-}
start_idle_pair "$bin" bench-node
sleep infinity &
sleep_pid=$!

# Figures of one process (cpu_ticks and clk_tck: scripts/lib/bench_stats.sh).
ctx_switches() {
  cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^(voluntary|nonvoluntary)_ctxt_switches/ { s += $2 } END { print s + 0 }'
}
uss_kb() {
  awk '$1 == "Private_Clean:" || $1 == "Private_Dirty:" { s += $2 } END { print s + 0 }' \
    "/proc/$1/smaps_rollup"
}
threads() { awk '$1 == "Threads:" { print $2 }' "/proc/$1/status"; }
# "tid name switches" for each thread of $1.
per_thread() {
  local t
  for t in /proc/"$1"/task/*; do
    awk -v tid="${t##*/}" -v name="$(cat "$t/comm" 2>/dev/null)" \
      '/^(voluntary|nonvoluntary)_ctxt_switches/ { s += $2 } END { print tid, name, s + 0 }' \
      "$t/status" 2>/dev/null
  done
}
thread_names() {
  cat /proc/"$1"/task/*/comm 2>/dev/null | sort | uniq -c |
    awk '{ n = $1; $1 = ""; sub(/^ /, ""); printf "%s%s x%d", sep, $0, n; sep = ", " }'
  echo
}

# sample LABEL: one window of $window s over the agent and the sleep baseline.
# figure NAME UNIT VALUE: one figure of one sample as a JSON line (json_line), for BENCH_JSON.
figure() { json_line "$1" "$2" "$3" "$3" "$3" "$3" 1; }
sample() {
  local label=$1 t0 t1 a_cpu0 a_cpu1 a_ctx0 a_ctx1 s_cpu0 s_cpu1 s_ctx0 s_ctx1 rss0 a_flt0 a_flt1
  rss0=$(kb "$agent_pid" Rss)
  t0=$(date +%s%N)
  per_thread "$agent_pid" >"$work/threads0"
  a_cpu0=$(cpu_ticks "$agent_pid") a_ctx0=$(ctx_switches "$agent_pid")
  a_flt0=$(page_faults "$agent_pid")
  s_cpu0=$(cpu_ticks "$sleep_pid") s_ctx0=$(ctx_switches "$sleep_pid")
  sleep "$window"
  t1=$(date +%s%N)
  a_cpu1=$(cpu_ticks "$agent_pid") a_ctx1=$(ctx_switches "$agent_pid")
  a_flt1=$(page_faults "$agent_pid")
  per_thread "$agent_pid" >"$work/threads1"
  s_cpu1=$(cpu_ticks "$sleep_pid") s_ctx1=$(ctx_switches "$sleep_pid")
  local secs
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  echo "$label: idle window ${secs} s (load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs)"
  printf "  %-22s %14s %14s %14s\n" "" "edge-agent" "target" "baseline sleep"
  awk -v a="$(kb "$agent_pid" Rss)" -v s="$(kb "$sleep_pid" Rss)" \
    'BEGIN { printf "  %-22s %10.1f MiB %10s MiB %10.1f MiB\n", "RSS", a / 1024, "<= 16", s / 1024 }'
  awk -v a="$rss0" 'BEGIN { printf "  %-22s %10.1f MiB\n", "RSS at window start", a / 1024 }'
  awk -v a="$(kb "$agent_pid" Pss)" -v s="$(kb "$sleep_pid" Pss)" \
    'BEGIN { printf "  %-22s %10.1f MiB %10s MiB %10.1f MiB\n", "PSS", a / 1024, "<= 12", s / 1024 }'
  awk -v a="$(uss_kb "$agent_pid")" -v s="$(uss_kb "$sleep_pid")" \
    'BEGIN { printf "  %-22s %10.1f MiB %14s %10.1f MiB\n", "USS", a / 1024, "-", s / 1024 }'
  printf "  %-22s %14s %14s %14s\n" "threads" "$(threads "$agent_pid")" "<= 6" \
    "$(threads "$sleep_pid")"
  awk -v a=$((a_cpu1 - a_cpu0)) -v s=$((s_cpu1 - s_cpu0)) -v hz="$clk_tck" -v t="$secs" \
    'BEGIN { printf "  %-22s %12.3f %% %12s %% %12.3f %%\n", "CPU", 100 * a / hz / t, "<= 0.05", 100 * s / hz / t }'
  awk -v a=$((a_ctx1 - a_ctx0)) -v s=$((s_ctx1 - s_ctx0)) -v t="$secs" \
    'BEGIN { printf "  %-22s %14.1f %14s %14.1f\n", "wake-ups / min", 60 * a / t, "-", 60 * s / t }'
  awk -v a=$((a_flt1 - a_flt0)) -v t="$secs" \
    'BEGIN { printf "  %-22s %14.1f\n", "page faults / min", 60 * a / t }'
  local tag="idle agent ${label%% (*}"
  figure "$tag: RSS" MiB "$(awk -v a="$(kb "$agent_pid" Rss)" 'BEGIN { print a / 1024 }')"
  figure "$tag: PSS" MiB "$(awk -v a="$(kb "$agent_pid" Pss)" 'BEGIN { print a / 1024 }')"
  figure "$tag: USS" MiB "$(awk -v a="$(uss_kb "$agent_pid")" 'BEGIN { print a / 1024 }')"
  figure "$tag: threads" threads "$(threads "$agent_pid")"
  figure "$tag: CPU" % "$(awk -v a=$((a_cpu1 - a_cpu0)) -v hz="$clk_tck" -v t="$secs" 'BEGIN { print 100 * a / hz / t }')"
  figure "$tag: wake-ups" /min "$(awk -v a=$((a_ctx1 - a_ctx0)) -v t="$secs" 'BEGIN { print 60 * a / t }')"
  figure "$tag: page faults" /min "$(awk -v a=$((a_flt1 - a_flt0)) -v t="$secs" 'BEGIN { print 60 * a / t }')"
  echo "  agent threads: $(thread_names "$agent_pid")"
  echo -n "  wake-ups / min by thread (tid name):"
  awk -v t="$secs" 'NR == FNR { before[$1] = $3; next }
    { n = 60 * ($3 - before[$1]) / t; if (n >= 0.05) printf " %s %s %.1f;", $1, $2, n }' \
    "$work/threads0" "$work/threads1"
  echo
}

# Settled: the first heartbeat and the outbox have had their turn.
sleep "$settle"
sample "at start (connected, idle)"

run_one() { ctl invoke --node bench-node --tool exec --arg command=/bin/true >/dev/null; }
export -f run_one ctl
export pair_ctl work
t0=$(date +%s%N)
if ! seq "$commands" | xargs -P "$parallel" -I{} bash -c run_one 2>"$work/invoke.err"; then
  echo "idle_agent.sh: some commands failed: $(sort "$work/invoke.err" | uniq -c | head -5)" >&2
  exit 1
fi
t1=$(date +%s%N)
awk -v n="$commands" -v p="$parallel" -v ns=$((t1 - t0)) \
  'BEGIN { printf "%d commands (exec /bin/true, %d at a time) in %.1f s: %.1f / s\n", n, p, ns / 1e9, n / (ns / 1e9) }'
sleep "$settle"
sample "after $commands commands (idle again after ${settle} s)"
