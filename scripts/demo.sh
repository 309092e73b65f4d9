#!/usr/bin/env bash
# The demo command: installs what is missing, builds Release, and runs the whole story on
# this machine — a controller, a join token, an agent that enrolls with it (mTLS identity
# stored, token removed from its config), attests and opens the edge stream; the operator
# invokes tools on the node through the controller and sees their output streamed back;
# then a clean stop of both.
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

source "$root/scripts/lib/local_run.sh" edge-demo

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

cat >"$work/controller.yaml" <<YAML
data_dir: $work/controller
grpc:
  listen: 127.0.0.1:0
admin:
  socket: $work/controller/admin.sock
YAML
step "edge-controller serve"
"$CTL" --config "$work/controller.yaml" serve 2>"$work/controller.log" &
ctl_pid=$!
wait_for 20 "$CTL" --config "$work/controller.yaml" status
"$CTL" --config "$work/controller.yaml" status

step "edge-controller token create --node demo-node-1"
token_json=$("$CTL" --config "$work/controller.yaml" token create --node demo-node-1 --ttl 15m --format json)
token=$(printf '%s' "$token_json" | sed -n 's/.*"join_token":"\([^"]*\)".*/\1/p')
printf '%s\n' "$token_json" | sed 's/"join_token":"[^"]*"/"join_token":"<secret, not shown>"/'
cat >"$work/agent.yaml" <<YAML
# demo agent
node_id: demo-node-1
data_dir: $work/agent
controller:
  join_token: "$token"
# Believe only user tokens signed by this controller (it publishes its key on start).
security:
  user_token_issuers:
    edge-controller: $work/controller/ca/token.pub.pem
# What commands may run here: everything, as the agent's user (a real host names narrower
# contexts with run_as and limits).
security_contexts:
  default:
    allowed_tools: ["*"]
log:
  level: info
YAML

step "edge-agent run (enrolls first: the config has a join token and there is no keystore)"
"$AGENT" --config "$work/agent.yaml" run 2>"$work/agent.log" &
agent_pid=$!
wait_for 20 "$AGENT" --config "$work/agent.yaml" status
"$AGENT" --config "$work/agent.yaml" status
echo
ls -l "$work/agent/certs"
openssl pkcs12 -in "$work/agent/certs/node.p12" -passin "file:$work/agent/certs/node.p12.pass" -info -noout 2>&1 | head -3
echo "agent.yaml after enrollment (join_token removed):"
sed 's/^/  /' "$work/agent.yaml"

step "edge-controller nodes (the agent attested and holds the edge stream)"
connected() { "$CTL" --config "$work/controller.yaml" nodes --format json | grep -q '"connected":true'; }
wait_for 30 connected
"$CTL" --config "$work/controller.yaml" nodes
"$CTL" --config "$work/controller.yaml" token list --all

step "edge-controller invoke --node demo-node-1 --tool exec (output streamed from the node)"
"$CTL" --config "$work/controller.yaml" invoke --node demo-node-1 --tool exec \
  --arg 'command=echo "hello from $(hostname) as $(id -un)"; uname -sr; for i in 1 2 3; do echo "tick $i"; sleep 0.2; done' &&
  echo "exit code: 0"

step "edge-controller invoke --tool sysinfo / file.write + file.read"
"$CTL" --config "$work/controller.yaml" invoke --node demo-node-1 --tool sysinfo
"$CTL" --config "$work/controller.yaml" invoke --node demo-node-1 --tool file.write \
  --arg path=notes/hello.txt --arg content="$(printf 'written over the edge stream\n' | base64)"
read_json=$("$CTL" --config "$work/controller.yaml" invoke --node demo-node-1 --tool file.read --arg path=notes/hello.txt)
printf '%s\n' "$read_json"
printf 'content, decoded: %s' "$(printf '%s' "$read_json" | sed -n 's/.*"content": "\([^"]*\)".*/\1/p' | base64 -d)"
echo

step "a command that fails: its exit code comes back to the operator"
set +e
"$CTL" --config "$work/controller.yaml" invoke --node demo-node-1 --tool exec --arg 'command=echo about to fail >&2; exit 7'
echo "exit code: $?"
set -e

step "edge-controller commands"
"$CTL" --config "$work/controller.yaml" commands --node demo-node-1

step "stopping both (SIGTERM)"
kill -TERM "$agent_pid"; wait "$agent_pid"; echo "edge-agent exited with $?"; agent_pid=""
kill -TERM "$ctl_pid"; wait "$ctl_pid"; echo "edge-controller exited with $?"; ctl_pid=""

step "logs"
sed 's/^/  controller | /' "$work/controller.log"
sed 's/^/  agent      | /' "$work/agent.log"
printf '\ndemo: ok\n'
