#include "sandbox/run_as.h"

#include <grp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace edge::sandbox {
namespace {

// The raw calls: per thread (glibc's wrappers would switch every thread of the process).
long SetGroupsThread(const std::vector<gid_t>& groups) {
  return ::syscall(SYS_setgroups, groups.size(), groups.data());
}

// setfsuid/setfsgid return the previous value and cannot report failure directly: the
// value is read back with a second call that changes nothing (-1 is never a valid id).
bool SetFsUid(uid_t uid) {
  ::syscall(SYS_setfsuid, uid);
  return static_cast<uid_t>(::syscall(SYS_setfsuid, static_cast<uid_t>(-1))) == uid;
}
bool SetFsGid(gid_t gid) {
  ::syscall(SYS_setfsgid, gid);
  return static_cast<gid_t>(::syscall(SYS_setfsgid, static_cast<gid_t>(-1))) == gid;
}

}  // namespace

Result<std::optional<RunAs>> ResolveRunAs(const std::string& user) {
  if (user.empty()) return std::optional<RunAs>{};
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  const bool numeric = user.find_first_not_of("0123456789") == std::string::npos;
  const int rc = numeric ? ::getpwuid_r(static_cast<uid_t>(std::strtoul(user.c_str(), nullptr, 10)),
                                        &pw, buf.data(), buf.size(), &found)
                         : ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    return MakeError(ErrorCode::kNotFound, "run_as user '" + user + "' not found");
  }
  RunAs out;
  out.uid = pw.pw_uid;
  out.gid = pw.pw_gid;
  if (::geteuid() != 0) {
    if (out.uid != ::geteuid()) {
      return MakeError(ErrorCode::kPermissionDenied,
                       "run_as user '" + user +
                           "' needs the agent to run as root (it runs as uid " +
                           std::to_string(::geteuid()) + ")");
    }
    return std::optional<RunAs>{};  // already that user: nothing to change
  }
  int ngroups = 64;
  out.groups.resize(ngroups);
  if (::getgrouplist(pw.pw_name, pw.pw_gid, out.groups.data(), &ngroups) < 0) {
    out.groups.resize(ngroups);
    ::getgrouplist(pw.pw_name, pw.pw_gid, out.groups.data(), &ngroups);
  }
  out.groups.resize(ngroups > 0 ? ngroups : 0);
  return std::optional<RunAs>(std::move(out));
}

Result<std::unique_ptr<ThreadFsCredentials>> ThreadFsCredentials::Switch(const RunAs& user) {
  std::unique_ptr<ThreadFsCredentials> c(new ThreadFsCredentials());
  c->old_fsuid_ = static_cast<uid_t>(::syscall(SYS_setfsuid, static_cast<uid_t>(-1)));
  c->old_fsgid_ = static_cast<gid_t>(::syscall(SYS_setfsgid, static_cast<gid_t>(-1)));
  const int n = ::getgroups(0, nullptr);
  c->old_groups_.resize(n > 0 ? n : 0);
  if (n > 0 && ::getgroups(n, c->old_groups_.data()) != n) c->old_groups_.clear();
  auto fail = [&](const char* what) -> Result<std::unique_ptr<ThreadFsCredentials>> {
    const int e = errno;
    SetFsUid(c->old_fsuid_);
    SetFsGid(c->old_fsgid_);
    SetGroupsThread(c->old_groups_);
    c.reset();
    return MakeError(ErrorCode::kInternal,
                     std::string("switching the file-system identity to uid ") +
                         std::to_string(user.uid) + ": " + what + " failed: " + std::strerror(e));
  };
  // Groups and gid first: after fsuid leaves 0 the thread may no longer change them.
  if (SetGroupsThread(user.groups) != 0) return fail("setgroups");
  if (!SetFsGid(user.gid)) return fail("setfsgid");
  if (!SetFsUid(user.uid)) return fail("setfsuid");
  return c;
}

ThreadFsCredentials::~ThreadFsCredentials() {
  SetFsUid(old_fsuid_);
  SetFsGid(old_fsgid_);
  SetGroupsThread(old_groups_);
}

}  // namespace edge::sandbox
