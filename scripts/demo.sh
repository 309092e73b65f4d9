#!/usr/bin/env bash
# The demo command: installs what is missing, builds Release, and runs the whole story on
# this machine — a controller, an agent, both healthy, then a clean stop of both.
# Everything lives in a temp directory on loopback; nothing is installed system-wide.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/deps.sh

build="${EDGE_DEMO_BUILD_DIR:-$root/build-release}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEDGE_BUILD_TESTS=OFF \
  -DEDGE_BUILD_FUZZERS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target edge-agent edge-controller
AGENT="$build/bin/edge-agent"
CTL="$build/bin/edge-controller"

work=$(mktemp -d /tmp/edge-demo-XXXXXX)
ctl_pid="" agent_pid=""
cleanup() {
  [[ -n "$agent_pid" ]] && kill "$agent_pid" 2>/dev/null || true
  [[ -n "$ctl_pid" ]] && kill "$ctl_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
wait_for() {  # wait_for SECONDS CMD...
  local secs=$1; shift
  for ((i = 0; i < secs * 10; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  "$@"
}

cat >"$work/controller.yaml" <<YAML
data_dir: $work/controller
grpc:
  listen: 127.0.0.1:0
admin:
  socket: $work/controller/admin.sock
YAML
cat >"$work/agent.yaml" <<YAML
node_id: demo-node-1
data_dir: $work/agent
YAML

step "edge-controller serve"
"$CTL" --config "$work/controller.yaml" serve 2>"$work/controller.log" &
ctl_pid=$!
wait_for 20 "$CTL" --config "$work/controller.yaml" status
"$CTL" --config "$work/controller.yaml" status

step "edge-agent run"
"$AGENT" --config "$work/agent.yaml" run 2>"$work/agent.log" &
agent_pid=$!
wait_for 20 "$AGENT" --config "$work/agent.yaml" status
"$AGENT" --config "$work/agent.yaml" status

step "stopping both (SIGTERM)"
kill -TERM "$agent_pid"; wait "$agent_pid"; echo "edge-agent exited with $?"; agent_pid=""
kill -TERM "$ctl_pid"; wait "$ctl_pid"; echo "edge-controller exited with $?"; ctl_pid=""

step "logs"
sed 's/^/  controller | /' "$work/controller.log"
sed 's/^/  agent      | /' "$work/agent.log"
printf '\ndemo: ok\n'
