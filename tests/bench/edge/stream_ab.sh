#!/usr/bin/env bash
# Two builds of the edge stream, alternately, in one run on one machine: for each round and
# each BIN_DIR, a fresh controller + enrolled agent on loopback (scripts/lib/local_pair.sh),
# one warm-up stream of 64 MiB, then STREAMS streams of MIB MiB of stdout (`head -c … /dev/zero`)
# through `edge-controller invoke` into /dev/null. Prints, per build, MiB/s and the agent's and
# the controller's CPU seconds per GiB (median, p99, min, max over every stream of every
# round; JSON lines with BENCH_JSON=FILE). Rounds alternate A B B A A B …, which spreads a
# change in the machine's load over both builds: that is what makes a difference of a few per
# cent visible on a noisy VM (docs/performance.md, stop 32). Figures are printed, never
# asserted.
# Usage: tests/bench/edge/stream_ab.sh BIN_DIR_A BIN_DIR_B [ROUNDS] [STREAMS] [MIB]
set -euo pipefail
a=${1:?usage: stream_ab.sh BIN_DIR_A BIN_DIR_B [ROUNDS] [STREAMS] [MIB]}
b=${2:?usage: stream_ab.sh BIN_DIR_A BIN_DIR_B [ROUNDS] [STREAMS] [MIB]}
rounds=${3:-4}
streams=${4:-3}
mib=${5:-512}
for d in "$a" "$b"; do
  for exe in edge-controller edge-agent; do
    [[ -x $d/$exe ]] || { echo "stream_ab: $d/$exe is not an executable" >&2; exit 2; }
  done
done
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../../scripts/lib/bench_stats.sh"
bench_json=${BENCH_JSON:-}
out=$(mktemp -d /tmp/stream-ab-XXXXXX)
trap 'rm -rf "$out"' EXIT

# one_round BIN_DIR: a fresh pair, a warm-up, STREAMS streams; prints "MiB/s agent_s ctl_s"
# per stream (CPU seconds per GiB).
one_round() (
  source "$here/../../../scripts/lib/local_run.sh" stream-ab
  source "$here/../../../scripts/lib/local_pair.sh"
  start_pair "$(realpath "$1/edge-controller")" "$(realpath "$1/edge-agent")" bench-node "sandbox:
  max_output_bytes: $(((mib + 1) << 20))" >&2
  ctl invoke --node bench-node --tool exec --arg "command=head -c 64M /dev/zero" >/dev/null
  for ((i = 0; i < streams; i++)); do
    local a0 c0 a1 c1 t0 t1
    a0=$(cpu_ticks "$agent_pid"); c0=$(cpu_ticks "$ctl_pid"); t0=$(now_us)
    ctl invoke --node bench-node --tool exec --arg "command=head -c ${mib}M /dev/zero" \
      --deadline 600s >/dev/null
    t1=$(now_us)
    # Both must still run: cpu_ticks of a dead pid is 0, which would pass for a figure.
    kill -0 "$agent_pid" "$ctl_pid" || { echo "stream_ab: the agent or the controller died" >&2; exit 1; }
    a1=$(cpu_ticks "$agent_pid"); c1=$(cpu_ticks "$ctl_pid")
    awk -v mib="$mib" -v us=$((t1 - t0)) -v a=$((a1 - a0)) -v c=$((c1 - c0)) -v hz="$clk_tck" \
      'BEGIN { printf "%.2f %.4f %.4f\n", mib / (us / 1e6), a / hz * 1024 / mib, c / hz * 1024 / mib }'
  done
)

echo "edge stream A/B: $rounds rounds of $streams streams of $mib MiB each ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "  A = $a"
echo "  B = $b"
for ((r = 0; r < rounds; r++)); do
  if ((r % 2 == 0)); then
    one_round "$a" >>"$out/a.txt"
    one_round "$b" >>"$out/b.txt"
  else
    one_round "$b" >>"$out/b.txt"
    one_round "$a" >>"$out/a.txt"
  fi
done
for side in a b; do
  label=$(tr a-z A-Z <<<"$side")
  awk '{ print $1 }' "$out/$side.txt" | stats_line "$label: invoke exec head -c" MiB/s
  awk '{ print $2 }' "$out/$side.txt" | stats_line "$label: edge-agent CPU" s/GiB
  awk '{ print $3 }' "$out/$side.txt" | stats_line "$label: edge-controller serve CPU" s/GiB
done
