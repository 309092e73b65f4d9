#include "agent/identity/secret_source.h"

#include <sys/stat.h>

#include "common/atomic_file.h"
#include "common/log.h"

namespace edge::identity {

SecretSource::SecretSource(std::string value, std::string file)
    : file_(std::move(file)), value_(std::move(value)) {
  if (!file_.empty()) {
    // The config read it already; remember the file's identity so a change is noticed.
    struct stat st {};
    if (::stat(file_.c_str(), &st) == 0) {
      ino_ = st.st_ino;
      size_ = st.st_size;
      mtime_ = st.st_mtim;
    }
  }
}

std::string SecretSource::Get() const {
  std::lock_guard lock(mu_);
  if (file_.empty()) return value_;
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) return value_;
  if (st.st_ino == ino_ && st.st_size == size_ && st.st_mtim.tv_sec == mtime_.tv_sec &&
      st.st_mtim.tv_nsec == mtime_.tv_nsec && !value_.empty()) {
    return value_;
  }
  auto content = ReadFile(file_, 1 << 20);
  if (!content) {
    log::Get("identity")
        ->warn("cannot read secret file {}: {} (keeping the previous value)", file_,
               content.error().message);
    return value_;
  }
  std::string s = std::move(*content);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  if (s.empty()) {
    log::Get("identity")->warn("secret file {} is empty (keeping the previous value)", file_);
    return value_;
  }
  log::RegisterSecret(s);
  if (!value_.empty()) log::Get("identity")->info("secret file {} changed: reloaded", file_);
  value_ = std::move(s);
  ino_ = st.st_ino;
  size_ = st.st_size;
  mtime_ = st.st_mtim;
  return value_;
}

}  // namespace edge::identity
