#!/usr/bin/env bash
# The install test (issue 13): packages BUILD_DIR's binaries (stripped, gzip for speed) and,
# for edge-agent and edge-controller in turn, checks on this machine what an operator gets:
#   install → the service user and group, /var/lib/<pkg> 0750 owned by it, the config 0640
#   owned by it and registered as a conffile, the binary runs, the man page and completion are
#   there, `systemd-analyze verify` accepts the unit; reinstall (an upgrade) keeps an edited
#   config; remove keeps /var/lib/<pkg> (keys), purge deletes it and the user.
# Also checks the .rpm's file list, %config(noreplace) and scriptlets. Needs root; refuses to
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
trap 'dpkg -P edge-agent edge-controller >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
check() { local what=$1; shift; "$@" >/dev/null 2>&1 || fail "$what"; echo "  ok: $what"; }

t0=$(date +%s)
(cd "$build" && cpack -G "DEB;RPM" -B "$out" -D CPACK_DEBIAN_COMPRESSION_TYPE=gzip \
  -D CPACK_RPM_COMPRESSION_TYPE=gzip >"$out/cpack.log" 2>&1) || { cat "$out/cpack.log"; fail "cpack"; }
echo "package_test: packages built in $(( $(date +%s) - t0 )) s"

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
  dpkg -P "$pkg" >/dev/null 2>&1 || fail "dpkg -P $pkg"
  check "purge deletes /var/lib/$pkg" test ! -e /var/lib/$pkg
  check "purge deletes the user" sh -c "! getent passwd $pkg"
  echo "== $(basename "$rpm")"
  check "rpm holds the binary and unit" sh -c "rpm -qpl '$rpm' | grep -qx /usr/bin/$pkg && rpm -qpl '$rpm' | grep -qx /usr/lib/systemd/system/$pkg.service"
  check "rpm config noreplace" sh -c "rpm -qp --configfiles '$rpm' | grep -qx /etc/$pkg/$conf"
  check "rpm scriptlets create the user" sh -c "rpm -qp --scripts '$rpm' | grep -q 'useradd --system'"
  check "rpm automatic requires" sh -c "rpm -qp --requires '$rpm' | grep -q 'libc.so.6'"
done
echo "package_test: all checks passed in $(( $(date +%s) - t0 )) s"
