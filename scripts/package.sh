#!/usr/bin/env bash
# Builds the .deb and .rpm of edge-agent and edge-controller from a Release build, then runs
# lintian on the .debs and prints what each package holds. Installs what it needs
# (scripts/deps.sh --packaging: dpkg-dev, rpm, lintian, file, systemd).
# Usage: scripts/package.sh [BUILD_DIR]   (default build-release; packages land in it)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/deps.sh --packaging
build="${1:-$root/build-release}"
# EDGE_STATIC_GRPC: the shipped binaries link gRPC, protobuf and Abseil statically, which
# halves every CLI command's start-up (docs/performance.md, stop 29); the packages' Depends
# come from dpkg-shlibdeps / rpm's find-requires, so they shrink accordingly.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEDGE_BUILD_TESTS=OFF \
  -DEDGE_BUILD_FUZZERS=OFF -DEDGE_PACKAGING=ON -DEDGE_STATIC_GRPC=ON >/dev/null
cmake --build "$build" -j "${EDGE_JOBS:-$(nproc)}"
(cd "$build" && cpack -G "DEB;RPM" >/dev/null)
for deb in "$build"/edge-*.deb; do
  echo "== $(basename "$deb")"
  dpkg-deb -f "$deb" Package Version Architecture Depends
  lintian --no-tag-display-limit --suppress-tags \
    no-copyright-file,no-changelog,debian-changelog-file-missing,unstripped-binary-or-object,extended-description-line-too-long,maintainer-script-calls-systemctl \
    "$deb" || true
done
for rpm in "$build"/edge-*.rpm; do
  echo "== $(basename "$rpm")"
  rpm -qp --qf '%{NAME} %{VERSION}-%{RELEASE} %{ARCH}\n' "$rpm"
  rpm -qp --requires "$rpm" | grep -v '^rpmlib' | tr '\n' ' '; echo
done
ls -la "$build"/edge-*.deb "$build"/edge-*.rpm
