// SmallDisk: a real "disk full" for fault tests (issue 16) — a tmpfs of a given size mounted
// on a fresh temp directory, inside a mount namespace private to this test process
// (unshare(CLONE_NEWNS); child processes the test starts inherit it, nothing outside sees
// it). Writes past the size fail with ENOSPC, as on a full disk. Needs root (CAP_SYS_ADMIN),
// which CI has; elsewhere `available()` is false and `why_not()` says why, for GTEST_SKIP.
// Unmounted (lazily) when destroyed.
#pragma once

#include <cstddef>
#include <string>

#include "tests/support/temp_dir.h"

namespace edge::testing {

class SmallDisk {
 public:
  explicit SmallDisk(size_t bytes);
  ~SmallDisk();
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  bool available() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }
  const std::string& path() const { return dir_.path(); }
  std::string operator/(const std::string& rel) const { return dir_ / rel; }

  // Takes every free byte with a filler file (path()/.filler); Free() gives them back.
  void Fill();
  void Free();

 private:
  TempDir dir_{"small-disk"};
  std::string why_not_;
  bool mounted_ = false;
};

}  // namespace edge::testing
