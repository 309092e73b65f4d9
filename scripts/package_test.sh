#!/usr/bin/env bash
# The install test (issue 13): packages BUILD_DIR's binaries (stripped, gzip for speed),
# runs lintian on the .debs (no errors allowed), and, for edge-agent and edge-controller in
# turn, checks on this machine what an operator gets:
#   install → the service user and group, /var/lib/<pkg> 0750 owned by it, the config 0640
#   owned by it and registered as a conffile, the binary runs (as the service user too), the
#   man page and completion are there, `systemd-analyze verify` accepts the unit; the agent
#   passes `config check` and enrolls, as its user, against a controller started here, leaving
#   certs/ 0700 and the keystore 0600 owned by it; reinstall (an upgrade) keeps an edited
#   config; remove keeps /var/lib/<pkg> (keys), purge deletes it and the user.
# Also checks the .rpm (rpm -qlp, -qip, --scripts, requires, %config(noreplace)).
# Not checkable here, because no systemd runs as PID 1 in CI: that the unit is enabled but not
# *started* on install, try-restart on upgrade and stop on remove (the scripts call systemctl
# only when /run/systemd/system exists); the enablement symlink itself is checked. Needs root; refuses to
# touch a machine where either package is already installed. Called by scripts/test.sh when
# it runs as root (EDGE_PACKAGE_TEST=0 skips it).
# Usage: scripts/package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: package_test.sh BUILD_DIR}" && pwd)
[[ $(id -u) == 0 ]] || { echo "package_test: needs root" >&2; exit 2; }
for p in edge-agent edge-controller; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
    echo "package_test: $p is installed on this machine; not touching it" >&2; exit 2
  fi
done
"$(dirname "$0")/deps.sh" --packaging >/dev/null
out=$(mktemp -d /tmp/edge-pkgtest-XXXXXX)
ctl_pid=""
trap '[[ -n "$ctl_pid" ]] && kill "$ctl_pid" 2>/dev/null; dpkg -P edge-agent edge-controller >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
check() { local what=$1; shift; "$@" >/dev/null 2>&1 || fail "$what"; echo "  ok: $what"; }

t0=$(date +%s)
(cd "$build" && cpack -G "DEB;RPM" -B "$out" -D CPACK_DEBIAN_COMPRESSION_TYPE=gzip \
  -D CPACK_RPM_COMPRESSION_TYPE=gzip >"$out/cpack.log" 2>&1) || { cat "$out/cpack.log"; fail "cpack"; }
echo "package_test: packages built in $(( $(date +%s) - t0 )) s"
for deb in "$out"/edge-*.deb; do
  # Suppressed, with the reason: no-changelog (not a Debian-archive package; the history is the
  # git log), maintainer-script-calls-systemctl (deb-systemd-helper is used when present;
  # systemctl only for daemon-reload / try-restart, which debhelper snippets also do).
  lintian --fail-on error --suppress-tags no-changelog,debian-changelog-file-missing,maintainer-script-calls-systemctl \
    "$deb" >"$out/lintian.log" 2>&1 || { cat "$out/lintian.log"; fail "lintian errors in $(basename "$deb")"; }
  echo "  ok: lintian $(basename "$deb") ($(grep -c '^W:' "$out/lintian.log" || true) warnings)"
  sed -n 's/^W: /    warning: /p' "$out/lintian.log"
done

# The controller the agent enrolls with: the build's binary, on loopback, in a temp dir.
mkdir -p "$out/ctl"
cat >"$out/ctl/controller.yaml" <<YAML
data_dir: $out/ctl/data
grpc: {listen: 127.0.0.1:0}
log: {level: info}
YAML
"$build/bin/edge-controller" --config "$out/ctl/controller.yaml" serve 2>"$out/ctl/log" &
ctl_pid=$!
for _ in $(seq 100); do grep -q "serving (pid" "$out/ctl/log" && break; sleep 0.2; done
grep -q "serving (pid" "$out/ctl/log" || { cat "$out/ctl/log"; fail "controller did not start"; }

for pkg in edge-agent edge-controller; do
  conf=agent.yaml; [[ $pkg == edge-controller ]] && conf=controller.yaml
  deb=$(ls "$out"/${pkg}_*.deb); rpm=$(ls "$out"/${pkg}-*.rpm)
  echo "== $(basename "$deb")"
  [[ $(basename "$deb") =~ ^${pkg}_[0-9]+\.[0-9]+\.[0-9]+_[a-z0-9]+\.deb$ ]] || fail "deb file name $(basename "$deb")"
  [[ $(basename "$rpm") =~ ^${pkg}-[0-9]+\.[0-9]+\.[0-9]+-1\.[a-z0-9_]+\.rpm$ ]] || fail "rpm file name $(basename "$rpm")"
  check "conffile registered" sh -c "dpkg-deb -e '$deb' '$out/ctl-$pkg' && grep -qx /etc/$pkg/$conf '$out/ctl-$pkg/conffiles'"
  check "shlibdeps filled Depends" sh -c "dpkg-deb -f '$deb' Depends | grep -q libc6"
  dpkg -i "$deb" >"$out/install.log" 2>&1 || { cat "$out/install.log"; fail "dpkg -i $pkg"; }
  check "user $pkg" getent passwd "$pkg"
  check "group $pkg" getent group "$pkg"
  check "/var/lib/$pkg 0750 $pkg" test "$(stat -c '%a %U %G' /var/lib/$pkg)" = "750 $pkg $pkg"
  check "/etc/$pkg/$conf 0640 $pkg" test "$(stat -c '%a %U %G' /etc/$pkg/$conf)" = "640 $pkg $pkg"
  check "/usr/bin/$pkg --version" /usr/bin/$pkg --version
  check "man page" test -s /usr/share/man/man1/$pkg.1.gz
  check "man page renders" sh -c "zcat /usr/share/man/man1/$pkg.1.gz | grep -q '^.SH SUBCOMMANDS'"
  check "bash completion" test -s /usr/share/bash-completion/completions/$pkg
  check "doc + example config" test -s /usr/share/doc/$pkg/$conf
  check "unit installed" test -s /usr/lib/systemd/system/$pkg.service
  check "unit enabled on install" test -L /etc/systemd/system/multi-user.target.wants/$pkg.service
  check "$pkg --version as $pkg" runuser -u "$pkg" -- /usr/bin/$pkg --version
  if [[ $pkg == edge-agent ]]; then
    check "config check as edge-agent" runuser -u edge-agent -- edge-agent config check --config /etc/edge-agent/agent.yaml
    token=$("$build/bin/edge-controller" --config "$out/ctl/controller.yaml" token create --node edge-01 --format json |
      sed -n 's/.*"join_token":"\([^"]*\)".*/\1/p')
    [[ -n $token ]] || fail "no join token from the controller"
    runuser -u edge-agent -- edge-agent enroll --token "$token" --config /etc/edge-agent/agent.yaml \
      >"$out/enroll.log" 2>&1 || { cat "$out/enroll.log"; fail "enroll as edge-agent"; }
    echo "  ok: enrolled as edge-agent against the test's controller"
    check "certs/ 0700 edge-agent" test "$(stat -c '%a %U' /var/lib/edge-agent/certs)" = "700 edge-agent"
    check "keystore 0600 edge-agent" test "$(stat -c '%a %U' /var/lib/edge-agent/certs/node.p12)" = "600 edge-agent"
    check "keystore password 0600 edge-agent" test "$(stat -c '%a %U' /var/lib/edge-agent/certs/node.p12.pass)" = "600 edge-agent"
  fi
  if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify /usr/lib/systemd/system/$pkg.service >"$out/verify.log" 2>&1 ||
      { cat "$out/verify.log"; fail "systemd-analyze verify $pkg.service"; }
    echo "  ok: systemd-analyze verify"
  fi
  echo "# edited by the operator" >> /etc/$pkg/$conf
  dpkg -i "$deb" >"$out/upgrade.log" 2>&1 || { cat "$out/upgrade.log"; fail "reinstall $pkg"; }
  check "upgrade keeps the edited config" grep -q "edited by the operator" /etc/$pkg/$conf
  echo "secret" > /var/lib/$pkg/keep-me
  dpkg -r "$pkg" >/dev/null 2>&1 || fail "dpkg -r $pkg"
  check "remove drops the binary" test ! -e /usr/bin/$pkg
  check "remove keeps /var/lib/$pkg" test -e /var/lib/$pkg/keep-me
  check "remove keeps the config" test -e /etc/$pkg/$conf
  check "remove masks the unit" test "$(readlink /etc/systemd/system/$pkg.service)" = /dev/null
  if [[ $pkg == edge-agent ]]; then check "remove keeps the keys" test -e /var/lib/edge-agent/certs/node.p12; fi
  dpkg -P "$pkg" >/dev/null 2>&1 || fail "dpkg -P $pkg"
  check "purge deletes /var/lib/$pkg" test ! -e /var/lib/$pkg
  check "purge deletes the user" sh -c "! getent passwd $pkg"
  check "purge drops the enablement" test ! -e /etc/systemd/system/multi-user.target.wants/$pkg.service
  check "purge leaves no mask" test ! -e /etc/systemd/system/$pkg.service
  echo "== $(basename "$rpm")"
  check "rpm -qip" sh -c "rpm -qip '$rpm' | grep -q '^License *: Apache-2.0'"
  check "rpm holds the binary and unit" sh -c "rpm -qlp '$rpm' | grep -qx /usr/bin/$pkg && rpm -qlp '$rpm' | grep -qx /usr/lib/systemd/system/$pkg.service"
  check "rpm config noreplace" sh -c "rpm -qp --configfiles '$rpm' | grep -qx /etc/$pkg/$conf"
  check "rpm scriptlets create the user" sh -c "rpm -q --scripts -p '$rpm' | grep -q 'useradd --system'"
  check "rpm automatic requires" sh -c "rpm -qp --requires '$rpm' | grep -q 'libc.so.6'"
done
echo "package_test: all checks passed in $(( $(date +%s) - t0 )) s"
