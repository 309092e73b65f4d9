// Where a test finds the built binaries and the source tree (example configs, UI assets, fuzz
// corpora): $EDGE_BIN_DIR / $EDGE_SOURCE_DIR when set (to test installed binaries, or from
// ctest), else the build's own. Only build_paths.cc is compiled with the build's paths, so no
// other test source depends on where the checkout is and ccache shares their objects between
// checkouts (scripts/test.sh: a fresh clone in CI reuses a warm cache).
#pragma once

#include <string>

namespace edge::testing {

std::string BinDir();
std::string SourceDir();

}  // namespace edge::testing
