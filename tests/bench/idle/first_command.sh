#!/usr/bin/env bash
# The first command after a quiet spell (issue 14 item 3): an idle agent drops the code pages
# it does not run and its database caches (agent/daemon/memory_trim.h), so the next command
# faults them back. Starts the real edge-controller and an enrolled edge-agent on loopback,
# runs three commands, then ROUNDS times: waits IDLE seconds (the release happens after the
# first quiet liveness interval, 60 s), and times six `edge-controller invoke --tool exec
# /bin/true` one after another from the shell (CLI start-up included), with the agent's page
# faults over the six. Prints figures; asserts nothing. Run it for two builds one after the
# other to compare.
#
# Usage: tests/bench/idle/first_command.sh BIN_DIR [ROUNDS] [IDLE]
#   BIN_DIR holds edge-agent and edge-controller; ROUNDS (default 2); IDLE seconds (150).
#   Environment: AGENT_USER, AGENT_ENV (tests/bench/idle/lib.sh).
set -euo pipefail
bin=${1:?usage: first_command.sh BIN_DIR [ROUNDS] [IDLE]}
rounds=${2:-2}
idle=${3:-150}
source "$(dirname "$0")/../../../scripts/lib/local_run.sh" first-command
source "$(dirname "$0")/lib.sh"
start_idle_pair "$bin" fc-node
for _ in 1 2 3; do ctl invoke --node fc-node --tool exec --arg command=/bin/true >/dev/null; done
for ((round = 1; round <= rounds; round++)); do
  sleep "$idle"
  f0=$(page_faults "$agent_pid")
  line="round $round, after ${idle} s idle: invoke round trips"
  for _ in 1 2 3 4 5 6; do
    t0=$(date +%s%N)
    ctl invoke --node fc-node --tool exec --arg command=/bin/true >/dev/null
    t1=$(date +%s%N)
    line="$line $(((t1 - t0) / 1000)) us"
  done
  echo "$line; agent page faults $(($(page_faults "$agent_pid") - f0))"
done
