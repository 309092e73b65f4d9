# Sourced by the benchmarks that compare with OpenSSH (tests/bench/edge/edge_vs_ssh.sh,
# tests/bench/worker_rpc/ssh_baseline.sh): a throwaway sshd on a loopback port picked at run
# time, with its own host key, client key and authorized_keys in "$work" (set by
# scripts/lib/local_run.sh); nothing of the system's ssh setup is used or changed. `ssh_cmd
# ARGS…` runs on it through a multiplexed master connection (ControlMaster), so each call
# costs one channel, not a handshake; `ssh_master_pid` prints the master's pid (for its CPU).
# Needs root (sshd) and openssh-server; `ssh_loopback_stop` ends both: this file puts it in
# the EXIT trap, before local_run.sh's `cleanup` (a caller that sets its own EXIT trap calls
# both).
SSHD=/usr/sbin/sshd
[[ -x $SSHD ]] || { echo "ssh_loopback: $SSHD missing (apt-get install openssh-server)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "ssh_loopback: needs root (sshd)" >&2; exit 1; }
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/client_key"
cp "$work/client_key.pub" "$work/authorized_keys"
chmod 600 "$work/authorized_keys"
ssh_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/sshd_config" <<CONF
Port $ssh_port
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
ssh_cmd() {
  ssh -F none -p "$ssh_port" -i "$work/client_key" -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes \
    -o ControlMaster=auto -o ControlPath="$work/mux" -o ControlPersist=120 \
    -o HostKeyAlias=bench root@127.0.0.1 "$@"
}
ssh_master_pid() { ssh_cmd -O check 2>&1 | sed -n 's/.*pid=\([0-9]*\).*/\1/p'; }
ssh_loopback_stop() {
  ssh_cmd -O exit 2>/dev/null || true
  [[ -z ${sshd_pid:-} ]] || kill "$sshd_pid" 2>/dev/null || true
}
# The stop goes into the EXIT trap (before local_run.sh's cleanup) before sshd starts: a
# failure from here on (sshd not answering, a benchmark step failing) must not leave it
# running.
trap 'ssh_loopback_stop; cleanup' EXIT
"$SSHD" -D -f "$work/sshd_config" -E "$work/sshd.log" &
sshd_pid=$!
wait_for 20 ssh_cmd true
