#include "tests/support/build_paths.h"

#include <cstdlib>

namespace edge::testing {

std::string BinDir() {
  const char* d = std::getenv("EDGE_BIN_DIR");
  return d != nullptr ? d : EDGE_BIN_DIR;
}

std::string SourceDir() {
  const char* d = std::getenv("EDGE_SOURCE_DIR");
  return d != nullptr ? d : EDGE_SOURCE_DIR;
}

}  // namespace edge::testing
