// RunAs: the user a security context's `run_as` names, resolved once per use; and
// ThreadFsCredentials, which makes the CALLING THREAD's file-system identity that user's for
// its lifetime, so that in-process file tools (file.read/write/list/...) get exactly the
// access the user would have: the kernel checks permissions with the thread's fsuid/fsgid and
// supplementary groups, files are created owned by the user, and root's CAP_DAC_OVERRIDE /
// CAP_FOWNER are dropped from the effective set while fsuid != 0 (capabilities(7)).
//
// Linux keeps credentials per thread; glibc broadcasts setuid/setgroups to every thread, so
// the raw system calls are used here on purpose. Only for threads that do nothing else while
// switched (the executor's blocking-work pool). Not copyable; restores on destruction.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace edge::sandbox {

struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// "" = nothing to change (nullopt). A name or a numeric uid; NOT_FOUND naming the user when
// it does not exist; PERMISSION_DENIED when the agent is not root and `user` is not itself
// (nullopt then too when it is itself).
Result<std::optional<RunAs>> ResolveRunAs(const std::string& user);

class ThreadFsCredentials {
 public:
  // Switches the calling thread; INTERNAL naming the call that failed (nothing is left
  // switched then).
  static Result<std::unique_ptr<ThreadFsCredentials>> Switch(const RunAs& user);
  ~ThreadFsCredentials();
  ThreadFsCredentials(const ThreadFsCredentials&) = delete;
  ThreadFsCredentials& operator=(const ThreadFsCredentials&) = delete;

 private:
  ThreadFsCredentials() = default;
  uid_t old_fsuid_ = 0;
  gid_t old_fsgid_ = 0;
  std::vector<gid_t> old_groups_;
};

}  // namespace edge::sandbox
