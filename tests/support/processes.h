// Looking at real processes from a test through /proc: whether one is gone, and which live
// in a process group.
#pragma once

#include <sys/types.h>

#include <vector>

namespace edge::testing {

// A process is gone when /proc has no entry for it or it is a zombie.
bool ProcessGone(pid_t pid);
// Live (non-zombie) processes whose process group is `pgid`.
std::vector<pid_t> GroupMembers(pid_t pgid);

}  // namespace edge::testing
