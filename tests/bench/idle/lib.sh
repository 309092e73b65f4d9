# Sourced by the idle benchmarks (tests/bench/idle/*.sh) after scripts/lib/local_run.sh: the
# pair they measure and the figures they read of one process.
#   start_idle_pair BIN_DIR NODE  scripts/lib/local_pair.sh's pair of BIN_DIR's edge-controller
#                                 and edge-agent, enrolled as NODE; the agent runs as
#                                 AGENT_USER when set (root only), with AGENT_ENV's VAR=VALUE
#                                 words in its environment
#   kb PID FIELD                  a field of /proc/PID/smaps_rollup, in kB (Rss, Pss)
#   page_faults PID               minor + major page faults of PID so far
source "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/lib/local_pair.sh"
start_idle_pair() {
  PAIR_AGENT_ENV=${AGENT_ENV:-} PAIR_AGENT_USER=${AGENT_USER:-} \
    start_pair "$(realpath "$1/edge-controller")" "$(realpath "$1/edge-agent")" "$2"
}
kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/smaps_rollup"; }
page_faults() { awk '{ print $10 + $12 }' "/proc/$1/stat"; }
