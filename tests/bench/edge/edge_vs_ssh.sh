#!/usr/bin/env bash
# The edge stream beside OpenSSH (issue 14 items 1 and 2), in one run on one machine:
#   round trip   `edge-controller invoke --tool exec --arg command=/bin/true` (CLI start +
#                admin call + controller + ConnectEdge + agent + fork/exec + result) beside
#                `ssh host true` over a multiplexed master, `edge-controller nodes` (CLI start
#                + one admin call), `edge-controller --version` (CLI start alone) and local
#                `sh -c true`;
#   streaming    MIB MiB of stdout (`head -c MIB M /dev/zero`) streamed back into /dev/null
#                through `invoke` beside `ssh host head -c …` and a local pipe, RUNS times
#                each: MiB/s, and the CPU each path's processes spent per GiB — the operator's
#                CLI beside the ssh client + its mux master (the process that decrypts), and
#                the agent's and controller's beside sshd's session process.
# Figures are printed (median, p99, min, max) and, with BENCH_JSON=FILE, appended to FILE as
# JSON lines; never asserted. Needs root and openssh-server (scripts/bench.sh installs it).
# Usage: tests/bench/edge/edge_vs_ssh.sh BIN_DIR [RUNS] [MIB]
set -euo pipefail
bin=${1:?usage: edge_vs_ssh.sh BIN_DIR [RUNS] [MIB]}
runs=${2:-20}
mib=${3:-1024}
AGENT=$(realpath "$bin/edge-agent")
CTL=$(realpath "$bin/edge-controller")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../../scripts/lib/local_run.sh" edge-vs-ssh
source "$here/../../../scripts/lib/bench_stats.sh"
source "$here/../../../scripts/lib/local_pair.sh"
bench_json=${BENCH_JSON:-}
source "$here/../../../scripts/lib/ssh_loopback.sh"

start_pair "$CTL" "$AGENT" bench-node "sandbox:
  max_output_bytes: $(((mib + 1) << 20))"

# time_us CMD…: runs CMD with its output dropped and prints the wall time in microseconds.
time_us() {
  local t0
  t0=$(now_us)
  "$@" >/dev/null 2>"$work/last.err" || { echo "bench: '$*' failed: $(cat "$work/last.err")" >&2; exit 1; }
  echo $(($(now_us) - t0))
}
ms_samples() { for ((i = 0; i < runs; i++)); do time_us "$@"; done | awk '{ print $1 / 1000 }'; }

echo "edge stream vs ssh: $runs runs each, $mib MiB streams ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "round trip (ms)"
ms_samples /bin/sh -c true | stats_line "local sh -c true (fork/exec/wait)" ms
ms_samples "$CTL" --version | stats_line "edge-controller --version (CLI start alone)" ms
ms_samples ctl nodes | stats_line "edge-controller nodes (CLI start + admin call)" ms
ms_samples ssh_cmd true | stats_line "ssh host true (multiplexed master)" ms
ms_samples ctl invoke --node bench-node --tool exec --arg command=/bin/true |
  stats_line "edge-controller invoke exec /bin/true" ms

# One streaming run: prints "MiB/s cli_cpu_s agent_cpu_s controller_cpu_s" (or for ssh:
# "MiB/s client_cpu_s master_cpu_s sshd_cpu_s").
TIMEFORMAT='%R %U %S'
stream_edge() {
  local a0 c0 t
  a0=$(cpu_ticks "$agent_pid"); c0=$(cpu_ticks "$ctl_pid")
  t=$({ time ctl invoke --node bench-node --tool exec --arg "command=head -c ${mib}M /dev/zero" \
          --deadline 600s >/dev/null 2>"$work/last.err"; } 2>&1) ||
    { echo "bench: invoke stream failed: $(cat "$work/last.err")" >&2; exit 1; }
  awk -v t="$t" -v mib="$mib" -v a=$(($(cpu_ticks "$agent_pid") - a0)) \
      -v c=$(($(cpu_ticks "$ctl_pid") - c0)) -v hz="$clk_tck" \
      'BEGIN { split(t, f, " "); printf "%.2f %.4f %.4f %.4f\n", mib / f[1], f[2] + f[3], a / hz, c / hz }'
}
sshd_ticks() {  # CPU of every sshd process but the listener (the session's)
  local sum=0 p
  for p in $(pgrep -x sshd || true); do [[ $p == "$sshd_pid" ]] || sum=$((sum + $(cpu_ticks "$p"))); done
  echo $sum
}
stream_ssh() {
  local m m0 s0 t
  m=$(ssh_master_pid); m0=$(cpu_ticks "$m"); s0=$(sshd_ticks)
  t=$({ time ssh_cmd "head -c ${mib}M /dev/zero" >/dev/null; } 2>&1)
  awk -v t="$t" -v mib="$mib" -v m=$(($(cpu_ticks "$m") - m0)) -v s=$(($(sshd_ticks) - s0)) \
      -v hz="$clk_tck" \
      'BEGIN { split(t, f, " "); printf "%.2f %.4f %.4f %.4f\n", mib / f[1], f[2] + f[3], m / hz, s / hz }'
}
stream_pipe() {
  local t
  t=$({ time head -c "${mib}M" /dev/zero | cat >/dev/null; } 2>&1)
  awk -v t="$t" -v mib="$mib" 'BEGIN { split(t, f, " "); printf "%.2f\n", mib / f[1] }'
}
for ((i = 0; i < runs; i++)); do stream_edge; done >"$work/edge.txt"
for ((i = 0; i < runs; i++)); do stream_ssh; done >"$work/ssh.txt"
for ((i = 0; i < runs; i++)); do stream_pipe; done >"$work/pipe.txt"
per_gib() { awk -v col="$1" -v mib="$mib" '{ print $col * 1024 / mib }' "$2"; }
echo "streaming $mib MiB into /dev/null (MiB/s)"
awk '{ print $1 }' "$work/pipe.txt" | stats_line "local pipe (head | cat)" MiB/s
awk '{ print $1 }' "$work/ssh.txt" | stats_line "ssh host head -c" MiB/s
awk '{ print $1 }' "$work/edge.txt" | stats_line "edge-controller invoke exec head -c" MiB/s
echo "CPU seconds per GiB streamed"
per_gib 2 "$work/ssh.txt" | stats_line "ssh client" s/GiB
per_gib 3 "$work/ssh.txt" | stats_line "ssh mux master (decrypts)" s/GiB
awk -v mib="$mib" '{ print ($2 + $3) * 1024 / mib }' "$work/ssh.txt" |
  stats_line "ssh client + master" s/GiB
per_gib 4 "$work/ssh.txt" | stats_line "sshd (session)" s/GiB
per_gib 2 "$work/edge.txt" | stats_line "edge-controller invoke (operator CLI)" s/GiB
per_gib 4 "$work/edge.txt" | stats_line "edge-controller serve" s/GiB
per_gib 3 "$work/edge.txt" | stats_line "edge-agent" s/GiB
echo -n "  agent after the runs: "
awk '/^VmRSS|^VmHWM|^Threads/ { printf "%s %s  ", $1, $2 }' "/proc/$agent_pid/status"
echo
