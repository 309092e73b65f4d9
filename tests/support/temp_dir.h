// TempDir: a fresh directory under /tmp for one test, removed with everything in it when the
// TempDir goes. Its path is canonical (no symlinks), so tests can compare paths the code
// under test resolves.
#pragma once

#include <string>

namespace edge::testing {

class TempDir {
 public:
  // `prefix` names the test area in /tmp ("edge-<prefix>-XXXXXX"); aborts when no directory
  // can be made (nothing a test could do without one).
  explicit TempDir(const std::string& prefix = "test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

}  // namespace edge::testing
