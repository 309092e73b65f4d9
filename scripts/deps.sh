#!/usr/bin/env bash
# Installs the Debian bookworm packages the project needs to build and test, and only
# those that are missing. `apt-get update` runs only when something must be installed.
# Usage: scripts/deps.sh [--packaging]
set -euo pipefail

pkgs=(
  g++ make cmake ninja-build pkg-config ccache git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  libssl-dev openssl
  libboost1.74-dev libboost-filesystem1.74-dev libboost-system1.74-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libsqlite3-dev sqlite3
  googletest libgtest-dev libgmock-dev
  clang-format bubblewrap procps iproute2 passwd
)
# The fleet page's browser test (tests/browser/): Debian's chromium, and Node.js with npm
# unless a `node` and `npm` are already on the PATH (from another Debian repository, say,
# whose nodejs bundles npm and conflicts with Debian's npm package). playwright-core comes
# from the npm registry when the test runs (tests/browser/run.sh).
pkgs+=(chromium)
command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)
if [[ "${1:-}" == "--packaging" ]]; then
  pkgs+=(dpkg-dev rpm file lintian systemd adduser)
fi

missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "deps: run as root (or install sudo): missing ${missing[*]}" >&2; exit 2; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
