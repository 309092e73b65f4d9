#!/usr/bin/env bash
# The fleet page's browser test (ctest: fleet_page_browser). Installs what is missing —
# Debian's chromium (apt-get; never a browser download), Node.js and npm when there is no
# `node`/`npm`, and playwright-core at a pinned version from the npm registry into
# BUILD_DIR/tests/browser/npm — then runs fleet_page_test.mjs against BUILD_DIR/bin.
# Screenshots (desktop and phone size) go to BUILD_DIR/tests/browser/screenshots, with the
# daemons' logs there too when the test fails.
# Usage: tests/browser/run.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
# The version the machines' Debian chromium was checked with; bump both together.
playwright_version=1.64.1
modules="$build/tests/browser/npm"
out="$build/tests/browser/screenshots"

as_root() {
  if [[ $(id -u) == 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "run.sh: needs root (or sudo) to run: $*" >&2
    return 1
  fi
}

need=()
[[ -x /usr/bin/chromium ]] || need+=(chromium)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if ((${#need[@]})); then
  echo "run.sh: installing ${need[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get -o DPkg::Lock::Timeout=600 update -qq
  as_root apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}"
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
if ((node_major < 18)); then
  echo "run.sh: node $(node --version) is too old: playwright-core needs 18 or later" >&2
  exit 1
fi

have=$(node -p "try { require('$modules/node_modules/playwright-core/package.json').version } catch { '' }")
if [[ "$have" != "$playwright_version" ]]; then
  echo "run.sh: installing playwright-core@$playwright_version into $modules"
  mkdir -p "$modules"
  [[ -f "$modules/package.json" ]] ||
    echo '{"name": "edge-fleet-page-browser-test", "private": true}' >"$modules/package.json"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$modules" --no-audit --no-fund \
    --loglevel=error --save-exact "playwright-core@$playwright_version"
fi

rm -rf "$out"
exec node "$here/fleet_page_test.mjs" --bin-dir "$build/bin" --modules "$modules" --out-dir "$out"
