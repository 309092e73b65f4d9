// SecretSource: a secret given inline in a config or as a file (`*_file` keys). A file is
// read again when it changes (inode, size or mtime), so a sidecar can rotate it without a
// restart; a file that cannot be read, or is empty, keeps the last value (and says so in the
// log, never the secret). Every value read is registered with the log's redaction. Thread-
// safe.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <mutex>
#include <string>

namespace edge::identity {

class SecretSource {
 public:
  SecretSource() = default;
  SecretSource(std::string value, std::string file);

  // The current value ("" when none).
  std::string Get() const;
  bool configured() const { return !value_.empty() || !file_.empty(); }
  bool from_file() const { return !file_.empty(); }

 private:
  std::string file_;
  mutable std::mutex mu_;
  mutable std::string value_;
  mutable ino_t ino_ = 0;
  mutable off_t size_ = -1;
  mutable timespec mtime_{};
};

}  // namespace edge::identity
