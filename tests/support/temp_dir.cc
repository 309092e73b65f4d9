#include "tests/support/temp_dir.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace edge::testing {

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/edge-" + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("TempDir: mkdtemp");
    std::abort();
  }
  path_ = std::filesystem::canonical(tmpl).string();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace edge::testing
