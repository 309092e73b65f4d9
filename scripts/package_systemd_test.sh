#!/usr/bin/env bash
# The service life cycle under a real systemd (issue 13): what scripts/package_test.sh cannot
# check where no systemd runs as PID 1 (CI's container). Boots this machine's own root in a
# throwaway container (systemd-nspawn, an overlay whose upper layer is a tmpfs, so nothing
# installed inside survives), installs BUILD_DIR's .debs there and checks, through systemctl:
#   - install enables edge-agent but does not start it;
#   - after enrollment `systemctl start` returns only once the agent said READY (Type=notify)
#     and the controller sees the node; `systemctl reload` keeps the same process;
#   - an upgrade restarts a running agent (new MainPID) and leaves a stopped one stopped;
#   - remove stops it (no process left in its cgroup), purge removes its state;
#   - the controller's unit starts, serves and stops on remove.
# The controller the agent enrolls with is BUILD_DIR's binary on a loopback port of the host
# (the container shares the host's network). Needs root and systemd-container (installed when
# missing). Prints one line a check; exits non-zero on the first failure.
# Usage: scripts/package_systemd_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: package_systemd_test.sh BUILD_DIR}" && pwd)
[[ $(id -u) == 0 ]] || { echo "package_systemd_test: needs root" >&2; exit 2; }
"$(dirname "$0")/deps.sh" --packaging >/dev/null
if ! command -v systemd-nspawn >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q systemd-container
fi

out=$(mktemp -d /tmp/edge-systemd-XXXXXX)
ovl="$out/ovl"
mkdir -p "$ovl/upper" "$ovl/root"
nspawn_pid="" ctl_pid=""
cleanup() {
  [[ -n "$nspawn_pid" ]] && { kill "$nspawn_pid" 2>/dev/null; wait "$nspawn_pid" 2>/dev/null || true; }
  [[ -n "$ctl_pid" ]] && kill "$ctl_pid" 2>/dev/null
  mountpoint -q "$ovl/root" && umount "$ovl/root"
  mountpoint -q "$ovl/upper" && umount "$ovl/upper"
  rm -rf "$out"
}
trap cleanup EXIT
fail() { echo "package_systemd_test: FAIL: $*" >&2; exit 1; }
ok() { echo "  ok: $*"; }

t0=$(date +%s)
(cd "$build" && cpack -G DEB -B "$out/pkg" -D CPACK_DEBIAN_COMPRESSION_TYPE=gzip >"$out/cpack.log" 2>&1) ||
  { cat "$out/cpack.log"; fail "cpack"; }
agent_deb=$(ls "$out"/pkg/edge-agent_*.deb)
ctl_deb=$(ls "$out"/pkg/edge-controller_*.deb)

# The controller, on the host, on a loopback port picked by the kernel.
mkdir -p "$out/ctl"
printf 'data_dir: %s\ngrpc: {listen: 127.0.0.1:0}\nlog: {level: info}\n' "$out/ctl/data" >"$out/ctl/controller.yaml"
"$build/bin/edge-controller" --config "$out/ctl/controller.yaml" serve 2>"$out/ctl/log" &
ctl_pid=$!
ctl() { "$build/bin/edge-controller" --config "$out/ctl/controller.yaml" "$@"; }
for _ in $(seq 100); do grep -q "serving (pid" "$out/ctl/log" && break; sleep 0.2; done
grep -q "serving (pid" "$out/ctl/log" || { cat "$out/ctl/log"; fail "controller did not start"; }

# This machine's root, read-only below a tmpfs: the container can install and purge freely.
mount -t tmpfs tmpfs "$ovl/upper"
mkdir -p "$ovl/upper/u" "$ovl/upper/w"
mount -t overlay overlay -o "lowerdir=/,upperdir=$ovl/upper/u,workdir=$ovl/upper/w" "$ovl/root"
mkdir -p "$ovl/root/var/cache/edge-pkgtest"
cp "$agent_deb" "$ctl_deb" "$ovl/root/var/cache/edge-pkgtest/"
systemd-nspawn -q --register=no --link-journal=no --keep-unit -D "$ovl/root" -M edge-pkgtest -b \
  >"$out/boot.log" 2>&1 </dev/null &
nspawn_pid=$!
leader=""
for _ in $(seq 200); do
  leader=$(pgrep -P "$nspawn_pid" -x systemd || true)
  [[ -n $leader ]] && break
  sleep 0.1
done
[[ -n $leader ]] || { cat "$out/boot.log"; fail "the container's systemd did not start"; }
inside() { nsenter --target "$leader" --mount --uts --ipc --pid -- "$@"; }
for _ in $(seq 300); do
  state=$(inside systemctl is-system-running 2>/dev/null || true)
  [[ $state == running || $state == degraded ]] && break
  sleep 0.2
done
[[ $state == running || $state == degraded ]] || { tail -20 "$out/boot.log"; fail "the container did not boot ($state)"; }
ok "container booted with systemd as PID 1 ($state) in $(( $(date +%s) - t0 )) s"

expect() {  # expect WHAT WANT CMD...: CMD's output (trimmed) must be WANT
  local what=$1 want=$2 got; shift 2
  got=$("$@" 2>/dev/null || true)
  [[ $got == "$want" ]] || fail "$what: got '$got', want '$want'"
  ok "$what"
}
main_pid() { inside systemctl show -p MainPID --value "$1"; }

echo "== edge-agent under systemd"
inside dpkg -i "/var/cache/edge-pkgtest/$(basename "$agent_deb")" >"$out/install.log" 2>&1 || { cat "$out/install.log"; fail "dpkg -i edge-agent"; }
expect "install enables the unit" enabled inside systemctl is-enabled edge-agent
expect "install does not start it" inactive inside systemctl is-active edge-agent
token=$(ctl token create --node edge-01 --format json | sed -n 's/.*"join_token":"\([^"]*\)".*/\1/p')
[[ -n $token ]] || fail "no join token from the controller"
inside runuser -u edge-agent -- edge-agent enroll --token "$token" --config /etc/edge-agent/agent.yaml \
  >"$out/enroll.log" 2>&1 || { cat "$out/enroll.log"; fail "enroll as edge-agent"; }
ok "enrolled as edge-agent"
inside systemctl start edge-agent || { inside journalctl -u edge-agent --no-pager | tail -30; fail "systemctl start edge-agent"; }
expect "start returns once the agent said READY (Type=notify)" active inside systemctl is-active edge-agent
pid1=$(main_pid edge-agent)
[[ $pid1 -gt 0 ]] || fail "no MainPID"
for _ in $(seq 100); do ctl nodes 2>/dev/null | grep -q "^edge-01 .*healthy *yes" && break; sleep 0.2; done
ctl nodes | grep -q "^edge-01 .*healthy *yes" || { ctl nodes; inside journalctl -u edge-agent --no-pager | tail -30; fail "the controller does not see edge-01 healthy"; }
ok "the controller sees edge-01 healthy over mTLS"
expect "runs as edge-agent" edge-agent inside ps -o user= -p "$pid1"
inside systemctl reload edge-agent || fail "systemctl reload edge-agent"
sleep 1
expect "reload keeps the process (SIGHUP re-reads, does not stop)" "$pid1" main_pid edge-agent
expect "still active after reload" active inside systemctl is-active edge-agent
inside dpkg -i "/var/cache/edge-pkgtest/$(basename "$agent_deb")" >"$out/upgrade.log" 2>&1 || { cat "$out/upgrade.log"; fail "upgrade"; }
pid2=$(main_pid edge-agent)
expect "upgrade restarts a running agent" active inside systemctl is-active edge-agent
[[ $pid2 -gt 0 && $pid2 != "$pid1" ]] || fail "upgrade kept MainPID $pid1 (now $pid2)"
ok "new MainPID after upgrade ($pid1 -> $pid2)"
inside systemctl stop edge-agent
inside dpkg -i "/var/cache/edge-pkgtest/$(basename "$agent_deb")" >"$out/upgrade2.log" 2>&1 || { cat "$out/upgrade2.log"; fail "second upgrade"; }
expect "upgrade leaves a stopped agent stopped" inactive inside systemctl is-active edge-agent
inside systemctl start edge-agent || fail "start before remove"
inside dpkg -r edge-agent >"$out/remove.log" 2>&1 || { cat "$out/remove.log"; fail "dpkg -r edge-agent"; }
expect "remove stops the agent" inactive inside systemctl is-active edge-agent
inside pgrep -u edge-agent >/dev/null 2>&1 && fail "a process of edge-agent survived the remove"
ok "no process of edge-agent left"
expect "remove keeps the keystore" yes inside sh -c 'test -s /var/lib/edge-agent/certs/node.p12 && echo yes'
inside dpkg -P edge-agent >/dev/null 2>&1 || fail "dpkg -P edge-agent"
expect "purge deletes /var/lib/edge-agent" gone inside sh -c 'test -e /var/lib/edge-agent || echo gone'

echo "== edge-controller under systemd"
inside dpkg -i "/var/cache/edge-pkgtest/$(basename "$ctl_deb")" >"$out/install-ctl.log" 2>&1 || { cat "$out/install-ctl.log"; fail "dpkg -i edge-controller"; }
expect "install enables the controller" enabled inside systemctl is-enabled edge-controller
# Its default grpc port may be taken by the host's controller: give it one of its own.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
inside sed -i "s/listen: 0.0.0.0:50056/listen: 127.0.0.1:$port/" /etc/edge-controller/controller.yaml
inside systemctl start edge-controller || { inside journalctl -u edge-controller --no-pager | tail -30; fail "start edge-controller"; }
for _ in $(seq 100); do inside runuser -u edge-controller -- edge-controller --config /etc/edge-controller/controller.yaml status >/dev/null 2>&1 && break; sleep 0.2; done
inside runuser -u edge-controller -- edge-controller --config /etc/edge-controller/controller.yaml status >"$out/ctl-status.log" 2>&1 ||
  { cat "$out/ctl-status.log"; inside journalctl -u edge-controller --no-pager | tail -30; fail "edge-controller status"; }
ok "the controller serves under systemd (status over its admin socket)"
inside dpkg -r edge-controller >/dev/null 2>&1 || fail "dpkg -r edge-controller"
expect "remove stops the controller" inactive inside systemctl is-active edge-controller
inside dpkg -P edge-controller >/dev/null 2>&1 || fail "dpkg -P edge-controller"
echo "package_systemd_test: all checks passed in $(( $(date +%s) - t0 )) s"
