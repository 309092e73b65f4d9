# Sourced after scripts/lib/local_run.sh by the benchmarks that need one local controller and
# one enrolled agent on loopback (tests/bench/edge/*.sh): config files in "$work", ports
# picked by the kernel, logs at warn in $work/controller.log and $work/agent.log.
#   start_pair CTL AGENT NODE [AGENT_YAML]  starts both, enrolls NODE, waits until connected;
#                                           AGENT_YAML is appended to the agent's config;
#                                           PAIR_AGENT_ENV (VAR=VALUE words) goes to the agent;
#                                           PAIR_AGENT_USER (root only) runs the agent as that
#                                           user, as the packaged unit does (User=edge-agent),
#                                           with its config and data_dir in $work/agent-home
#   ctl ARGS…                               runs the controller's CLI on that controller
# Sets $ctl_pid and $agent_pid (stopped by local_run.sh's cleanup).
ctl() { "$pair_ctl" --config "$work/controller.yaml" "$@"; }
start_pair() {
  pair_ctl=$1
  local agent=$2 node=$3 extra=${4:-} token
  cat >"$work/controller.yaml" <<YAML
data_dir: $work/controller
grpc:
  listen: 127.0.0.1:0
admin:
  socket: $work/controller/admin.sock
log:
  level: warn
YAML
  "$pair_ctl" --config "$work/controller.yaml" serve 2>"$work/controller.log" &
  ctl_pid=$!
  wait_for 20 ctl status
  token=$(ctl token create --node "$node" --format json | sed -n 's/.*"join_token":"\([^"]*\)".*/\1/p')
  local home=$work as=()
  if [[ -n "${PAIR_AGENT_USER:-}" ]]; then
    # The agent rewrites its config (the token line) in place: its directory must be its own.
    home=$work/agent-home
    mkdir -p "$home"
    chmod 0711 "$work"
    chown "$PAIR_AGENT_USER:" "$home"
    as=(setpriv --reuid="$PAIR_AGENT_USER" --regid="$(id -g "$PAIR_AGENT_USER")" --init-groups)
  fi
  cat >"$home/agent.yaml" <<YAML
node_id: $node
data_dir: $home/agent
controller:
  join_token: "$token"
log:
  level: warn
$extra
YAML
  [[ -n "${PAIR_AGENT_USER:-}" ]] && chown "$PAIR_AGENT_USER:" "$home/agent.yaml"
  # shellcheck disable=SC2086  # PAIR_AGENT_ENV is a list of VAR=VALUE words
  env ${PAIR_AGENT_ENV:-} "${as[@]}" "$agent" --config "$home/agent.yaml" run 2>"$work/agent.log" &
  agent_pid=$!
  pair_connected() { ctl nodes --format json | grep -q '"connected":true'; }
  wait_for 30 pair_connected
}
