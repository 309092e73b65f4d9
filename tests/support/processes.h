// Looking at real processes from a test through /proc and /sys/fs/cgroup: whether one is gone,
// which live in a process group, how many of a process's threads bear a name, and which
// command cgroups an agent's pid names.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace edge::testing {

// A process is gone when /proc has no entry for it or it is a zombie.
bool ProcessGone(pid_t pid);
// Live (non-zombie) processes whose process group is `pgid`.
std::vector<pid_t> GroupMembers(pid_t pgid);
// The threads named `name` of process `pid`, this process's when 0 (/proc/PID/task/*/comm).
int ThreadsNamed(const std::string& name, pid_t pid = 0);
// The command cgroups named after an edge-agent of pid `pid` ("<pid>-<n>-<tag>" under
// <root>/edge-agent, sandbox/process_runner.h), in the cgroup v1 pids hierarchy and in the
// cgroup v2 directory an agent started by this process would use; whichever agent of that
// pid made them (pids wrap: the caller tells its own apart by tag or by time).
std::vector<std::string> CommandCgroupsNamedAfter(pid_t pid);

}  // namespace edge::testing
