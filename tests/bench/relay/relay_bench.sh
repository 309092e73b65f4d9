#!/usr/bin/env bash
# Relay benchmark (issue 12): frames/s through the operator session relay from one session's
# process to 1 and to SOCKETS WebSockets, and the latency from the process's output line to
# the socket, beside a raw WebSocket (echo and server push) on the same http::Server,
# measured in the same run on the same machine. Figures are printed, never asserted.
#
# It starts the real edge-controller (HTTP on a loopback port picked at run time, read from
# its log), enrolls an edge-agent whose interactive tools are `relay_bench emit` (burst:
# LINES lines as fast as possible; paced: LINES/10 lines at 500/s), mints a user token, and
# runs `relay_bench baseline` and `relay_bench relay` (see relay_bench.cc for what each
# figure means). The controller's edge_api.limits.max_buffer_size is raised so that a whole
# burst fits each socket's queue (half the buffer): the default 4 MiB with drop_oldest would
# drop frames of a slow socket and the figures would count fewer frames; FRAMES_DROPPED and
# missing frames are reported anyway.
#
# Usage: tests/bench/relay/relay_bench.sh BIN_DIR [LINES] [SOCKETS]
#   BIN_DIR holds edge-agent, edge-controller and relay_bench (a Release build for figures);
#   LINES (default 20000) per burst, SOCKETS (default 50) for the fan-out runs.
#   BENCH_JSON=FILE: each run's frames/s and latency are also appended to FILE as JSON lines.
set -euo pipefail
bin=${1:?usage: relay_bench.sh BIN_DIR [LINES] [SOCKETS]}
lines=${2:-20000}
many=${3:-50}
bytes=100
rate=500
paced=$((lines / 10 > 20 ? lines / 10 : 20))
# ~330-byte frames: 1 KiB a line, doubled (each socket's queue is half the buffer).
buffer=$((lines * 2048 > 4194304 ? lines * 2048 : 4194304))
AGENT=$(realpath "$bin/edge-agent")
CTL=$(realpath "$bin/edge-controller")
BENCH=$(realpath "$bin/relay_bench")

source "$(dirname "$0")/../../../scripts/lib/local_run.sh" relay-bench
source "$(dirname "$0")/../../../scripts/lib/bench_stats.sh"

cat >"$work/controller.yaml" <<YAML
data_dir: $work/controller
grpc:
  listen: 127.0.0.1:0
http:
  listen: 127.0.0.1:0
admin:
  socket: $work/controller/admin.sock
edge_api:
  limits:
    max_buffer_size: $buffer
log:
  level: info
YAML
ctl() { "$CTL" --config "$work/controller.yaml" "$@"; }
"$CTL" --config "$work/controller.yaml" serve 2>"$work/controller.log" &
ctl_pid=$!
wait_for 30 ctl status
http_port() { sed -n 's/.*HTTP on [^ ]* (port \([0-9]*\).*/\1/p' "$work/controller.log" | head -1; }
has_port() { [[ -n "$(http_port)" ]]; }
wait_for 30 has_port
port=$(http_port)
[[ -n "$port" ]] || { echo "relay_bench.sh: no HTTP port in the controller's log" >&2; exit 1; }

join=$(ctl token create --node bench-node --format json |
  sed -n 's/.*"join_token":"\([^"]*\)".*/\1/p')
cat >"$work/agent.yaml" <<YAML
node_id: bench-node
data_dir: $work/agent
controller:
  join_token: "$join"
log:
  level: warn
tools:
  burst:
    command: ["$BENCH", emit, --lines, "$lines", --bytes, "$bytes"]
    interactive: true
  paced:
    command: ["$BENCH", emit, --lines, "$paced", --rate, "$rate", --bytes, "$bytes"]
    interactive: true
YAML
"$AGENT" --config "$work/agent.yaml" run 2>"$work/agent.log" &
agent_pid=$!
connected() { ctl nodes --format json | grep -q '"connected":true'; }
wait_for 60 connected
user=$(ctl user token create --user bench --tenant default --ttl 1h --format json |
  sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
[[ -n "$user" ]] || { echo "relay_bench.sh: no user token" >&2; exit 1; }

results="$work/results"
: >"$results"
fail() { echo "relay_bench.sh: $1 failed; controller log:" >&2; tail -20 "$work/controller.log" >&2; exit 1; }
"$BENCH" baseline --lines "$lines" --paced-lines "$paced" --rate "$rate" --bytes "$bytes" \
  --echo "$paced" --sockets "$many" >>"$results" || fail baseline
for tool in burst paced; do
  n=$lines
  [[ $tool == paced ]] && n=$paced
  for k in 1 "$many"; do
    "$BENCH" relay --port "$port" --token "$user" --node bench-node --tool "$tool" \
      --sockets "$k" --lines "$n" >>"$results" || fail "relay $tool to $k socket(s)"
  done
done

# val NAME SOCKETS KEY: a figure of the result line NAME for SOCKETS sockets.
val() {
  awk -v n="name=$1" -v s="sockets=$2" -v k="$3" '$1 == "result" && $2 == n && $3 == s {
    for (i = 4; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$results"
}
ms() { awk -v us="${1:-0}" 'BEGIN { printf "%.2f", us / 1000 }'; }
lat() { echo "$(ms "$(val "$1" "$2" lat_median_us)") / $(ms "$(val "$1" "$2" lat_p99_us)")"; }
row() { printf "  %-46s %18s %18s\n" "$@"; }

echo "relay benchmark: bursts of $lines lines of $bytes bytes, paced runs of $paced lines at" \
  "$rate/s; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
row "" "raw WebSocket" "relay"
row "frames/s, 1 socket" "$(val raw.burst 1 fps_aggregate)" "$(val relay.burst 1 fps_aggregate)"
row "frames/s, $many sockets, aggregate" "$(val raw.burst "$many" fps_aggregate)" \
  "$(val relay.burst "$many" fps_aggregate)"
row "frames/s, $many sockets, slowest socket" "$(val raw.burst "$many" fps_socket_min)" \
  "$(val relay.burst "$many" fps_socket_min)"
row "latency at $rate/s, 1 socket, median / p99 ms" "$(lat raw.paced 1)" "$(lat relay.paced 1)"
row "latency at $rate/s, $many sockets, median / p99 ms" "$(lat raw.paced "$many")" \
  "$(lat relay.paced "$many")"
row "echo round trip, median / p99 ms" \
  "$(ms "$(val raw.echo 1 rtt_median_us)") / $(ms "$(val raw.echo 1 rtt_p99_us)")" "-"
row "frame bytes (agent.output)" "$(val raw.burst 1 frame_bytes)" "$(val relay.burst 1 frame_bytes)"
dropped=0 missing=0
for name in relay.burst relay.paced; do
  for k in 1 "$many"; do
    dropped=$((dropped + $(val $name "$k" dropped)))
    missing=$((missing + $(val $name "$k" missing)))
  done
done
row "relay FRAMES_DROPPED / frames missing" "" "$dropped / $missing"
echo "raw figures (latency: one-way, frame written → frame read; µs):"
sed 's/^result /  /' "$results"
# With BENCH_JSON=FILE (scripts/bench.sh): per result line, its frames/s (one sample) and its
# latency (one-way, or the echo's round trip) as JSON lines.
if [[ -n "${BENCH_JSON:-}" ]]; then
  bench_json=$BENCH_JSON
  # Each figure as NAME|UNIT|MEDIAN|P99|MIN|MAX|N, then json_line.
  awk '$1 == "result" {
    delete f
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    id = f["name"] ", " f["sockets"] " socket(s)"
    if ("fps_aggregate" in f) {
      v = f["fps_aggregate"]
      print id ": frames/s|frames/s|" v "|" v "|" v "|" v "|1"
    }
    p = ("rtt_median_us" in f) ? "rtt" : "lat"
    if ((p "_median_us") in f)
      print id ": " (p == "rtt" ? "round trip" : "one-way latency") "|us|" f[p "_median_us"] "|" \
        f[p "_p99_us"] "|" f[p "_min_us"] "|" f[p "_max_us"] "|" f["frames"]
  }' "$results" | while IFS='|' read -r name unit med p99 min max n; do
    json_line "$name" "$unit" "$med" "$p99" "$min" "$max" "$n"
  done
fi
