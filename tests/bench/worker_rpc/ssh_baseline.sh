#!/usr/bin/env bash
# The OpenSSH baseline for worker_rpc_bench (issue 10, issue 14 target 5), in the same run on
# the same machine: a throwaway sshd on a loopback port and a client with a multiplexed master
# connection (scripts/lib/ssh_loopback.sh), so each call costs one channel, not a handshake.
# Prints (median, p99, min, max over RUNS, and JSON lines with BENCH_JSON=FILE):
#   - `ssh host true` round trip over the master;
#   - `ssh host 'yes … | head -c SIZE' > /dev/null`: MiB/s. This is the command
#     worker_rpc_bench streams through exec_stream (text: NUL bytes would cost 6 bytes each as
#     JSON), so the two figures compare the same producer;
#   - `ssh host 'head -c SIZE /dev/zero' > /dev/null`: MiB/s, ssh's best case (one process
#     writing large blocks), the figure earlier stops compared with;
#   - the local pipe of the text command (`yes … | head -c SIZE | cat`): the most any
#     transport of that command can reach here.
# Figures are printed, never asserted. Needs root (sshd) and openssh-server.
# Usage: tests/bench/worker_rpc/ssh_baseline.sh [RUNS] [MIB]
set -euo pipefail
runs=${1:-50}
mib=${2:-1024}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../../scripts/lib/local_run.sh" ssh-bench
source "$here/../../../scripts/lib/bench_stats.sh"
bench_json=${BENCH_JSON:-}
source "$here/../../../scripts/lib/ssh_loopback.sh"

# The same command as TextCommand() in worker_rpc_bench.cc.
text_cmd="yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c $((mib << 20))"
zero_cmd="head -c $((mib << 20)) /dev/zero"
# mibs CMD…: runs CMD with its output dropped, prints MiB/s.
mibs() {
  local t0
  t0=$(now_us)
  "$@" >/dev/null 2>"$work/last.err" || { echo "bench: '$*' failed: $(cat "$work/last.err")" >&2; exit 1; }
  awk -v mib="$mib" -v us=$(($(now_us) - t0)) 'BEGIN { printf "%.2f\n", mib / (us / 1e6) }'
}
ssh_cmd true  # the master, before anything is timed
stream_runs=$((runs < 5 ? runs : 5))
echo "ssh baseline for the worker door: $runs round trips, $stream_runs streams of $mib MiB each ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
for ((i = 0; i < runs; i++)); do
  t0=$(now_us); ssh_cmd true; echo $(($(now_us) - t0))
done | awk '{ print $1 / 1000 }' | stats_line "ssh host true (multiplexed master)" ms
# Interleaved, so a change in the machine's load touches every figure alike.
# (Each figure is assigned first: a failing `mibs` inside an echo's $(…) would not stop the
# script, and an empty sample would pass for a figure.)
for ((i = 0; i < stream_runs; i++)); do
  text=$(mibs ssh_cmd "$text_cmd")
  zero=$(mibs ssh_cmd "$zero_cmd")
  pipe=$(mibs bash -c "$text_cmd | cat")
  printf 'text %s\nzero %s\npipe %s\n' "$text" "$zero" "$pipe"
done >"$work/streams.txt"
awk '$1 == "text" { print $2 }' "$work/streams.txt" |
  stats_line "ssh host 'yes ... | head -c' (exec_stream's command)" MiB/s
awk '$1 == "zero" { print $2 }' "$work/streams.txt" | stats_line "ssh host 'head -c ... /dev/zero'" MiB/s
awk '$1 == "pipe" { print $2 }' "$work/streams.txt" | stats_line "local 'yes ... | head -c | cat'" MiB/s
