# Sourced by scripts/demo.sh and tests/bench/edge/invoke_roundtrip.sh: a temp dir for one
# local controller + agent run, removed (and both processes stopped) on exit, and wait_for.
# Usage: source scripts/lib/local_run.sh PREFIX   → sets $work; set $ctl_pid/$agent_pid.
work=$(mktemp -d "/tmp/${1:-edge-run}-XXXXXX")
ctl_pid="" agent_pid=""
cleanup() {
  [[ -n "$agent_pid" ]] && kill "$agent_pid" 2>/dev/null || true
  [[ -n "$ctl_pid" ]] && kill "$ctl_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

wait_for() {  # wait_for SECONDS CMD...: retries CMD every 0.1 s, then once more loudly
  local secs=$1; shift
  for ((i = 0; i < secs * 10; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  "$@"
}
