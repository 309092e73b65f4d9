#include "tests/support/small_disk.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace edge::testing {

SmallDisk::SmallDisk(size_t bytes) {
  // Once per process: a private copy of the mount table, so the tmpfs is this test's alone.
  static const std::string unshared = [] {
    if (::unshare(CLONE_NEWNS) != 0)
      return std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return std::string("make / private: ") + std::strerror(errno);
    }
    return std::string();
  }();
  if (!unshared.empty()) {
    why_not_ = unshared;
    return;
  }
  const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
  if (::mount("tmpfs", path().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    why_not_ = std::string("mount tmpfs: ") + std::strerror(errno);
    return;
  }
  mounted_ = true;
}

SmallDisk::~SmallDisk() {
  if (mounted_) ::umount2(path().c_str(), MNT_DETACH);
}

void SmallDisk::Fill() {
  const std::string filler = dir_ / ".filler";
  int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  std::vector<char> block(4096, 'f');
  for (size_t size = block.size(); size > 0;) {
    if (::write(fd, block.data(), size) < 0) {
      if (errno != ENOSPC) break;
      size /= 2;  // the last partial page
    }
  }
  ::close(fd);
}

void SmallDisk::Free() {
  ::unlink((dir_ / ".filler").c_str());
}

}  // namespace edge::testing
