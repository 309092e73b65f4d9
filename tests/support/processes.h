// Looking at real processes from a test through /proc: whether one is gone, which live in a
// process group, and how many of this process's threads bear a name.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace edge::testing {

// A process is gone when /proc has no entry for it or it is a zombie.
bool ProcessGone(pid_t pid);
// Live (non-zombie) processes whose process group is `pgid`.
std::vector<pid_t> GroupMembers(pid_t pgid);
// This process's threads named `name` (/proc/self/task/*/comm).
int ThreadsNamed(const std::string& name);

}  // namespace edge::testing
