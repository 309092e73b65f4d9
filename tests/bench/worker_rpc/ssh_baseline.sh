#!/usr/bin/env bash
# The OpenSSH baseline for worker_rpc_bench (issue 10), in the same run on the same machine: a
# throwaway sshd on a loopback port and a client with a multiplexed master connection
# (scripts/lib/ssh_loopback.sh), so each call costs one channel, not a handshake. Prints:
#   - `ssh host true` round trip (median, p95) over the master;
#   - `ssh host 'head -c SIZE /dev/zero' > /dev/null`: MiB/s.
# Figures are printed, never asserted. Needs root (sshd) and openssh-server.
# Usage: tests/bench/worker_rpc/ssh_baseline.sh [RUNS] [MIB]
set -euo pipefail
runs=${1:-50}
mib=${2:-1024}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../../scripts/lib/local_run.sh" ssh-bench
source "$here/../../../scripts/lib/ssh_loopback.sh"
trap 'ssh_loopback_stop; cleanup' EXIT
now_us() { echo $(( $(date +%s%N) / 1000 )); }
for ((i = 0; i < runs; i++)); do
  t0=$(now_us); ssh_cmd true; echo $(( $(now_us) - t0 ))
done | sort -n | awk '{ a[NR] = $1 } END { printf "  ssh (multiplexed) true round trip          median %7.2f ms  p95 %7.2f ms  (n=%d)\n", a[int((NR+1)/2)]/1000, a[int(NR*0.95+0.5)]/1000, NR }'
t0=$(now_us)
ssh_cmd "head -c $((mib << 20)) /dev/zero" >/dev/null
t1=$(now_us)
awk -v mib="$mib" -v us=$((t1 - t0)) 'BEGIN { printf "  ssh head -c %d MiB /dev/zero > /dev/null  %8.1f MiB/s (%.2f s)\n", mib, mib / (us / 1e6), us / 1e6 }'
