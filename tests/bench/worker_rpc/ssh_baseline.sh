#!/usr/bin/env bash
# The OpenSSH baseline for worker_rpc_bench (issue 10), in the same run on the same machine: a
# throwaway sshd on a loopback port (its own host key, client key and authorized_keys in a
# temp dir; nothing of the system's ssh setup is used or changed) and a client with a
# multiplexed master connection (ControlMaster), so each call costs one channel, not a
# handshake. Prints:
#   - `ssh host true` round trip (median, p95) over the master;
#   - `ssh host 'head -c SIZE /dev/zero' > /dev/null`: MiB/s.
# Figures are printed, never asserted. Needs root (sshd) and openssh-server.
# Usage: tests/bench/worker_rpc/ssh_baseline.sh [RUNS] [MIB]
set -euo pipefail
runs=${1:-50}
mib=${2:-1024}
SSHD=/usr/sbin/sshd
[[ -x $SSHD ]] || { echo "ssh_baseline: $SSHD missing (apt-get install openssh-server)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "ssh_baseline: needs root (sshd)" >&2; exit 1; }

source "$(dirname "$0")/../../../scripts/lib/local_run.sh" ssh-bench
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/client_key"
cp "$work/client_key.pub" "$work/authorized_keys"
chmod 600 "$work/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $work/host_key
PidFile $work/sshd.pid
AuthorizedKeysFile $work/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
LogLevel ERROR
CONF
"$SSHD" -D -f "$work/sshd_config" -E "$work/sshd.log" &
sshd_pid=$!
trap 'kill $sshd_pid 2>/dev/null || true; ssh_cmd -O exit host 2>/dev/null || true; cleanup' EXIT
ssh_cmd() {
  ssh -F none -p "$port" -i "$work/client_key" -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes \
    -o ControlMaster=auto -o ControlPath="$work/mux" -o ControlPersist=60 \
    -o HostKeyAlias=bench root@127.0.0.1 "$@"
}
wait_for 20 ssh_cmd true
now_us() { echo $(( $(date +%s%N) / 1000 )); }
for ((i = 0; i < runs; i++)); do
  t0=$(now_us); ssh_cmd true; echo $(( $(now_us) - t0 ))
done | sort -n | awk '{ a[NR] = $1 } END { printf "  ssh (multiplexed) true round trip          median %7.2f ms  p95 %7.2f ms  (n=%d)\n", a[int((NR+1)/2)]/1000, a[int(NR*0.95+0.5)]/1000, NR }'
t0=$(now_us)
ssh_cmd "head -c $((mib << 20)) /dev/zero" >/dev/null
t1=$(now_us)
awk -v mib="$mib" -v us=$((t1 - t0)) 'BEGIN { printf "  ssh head -c %d MiB /dev/zero > /dev/null  %8.1f MiB/s (%.2f s)\n", mib, mib / (us / 1e6), us / 1e6 }'
