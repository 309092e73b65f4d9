#include "common/thread_name.h"

#include <pthread.h>

namespace edge {

void NameThisThread(std::string_view name) {
  const std::string cut(name.substr(0, 15));  // the kernel's limit (TASK_COMM_LEN - 1)
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

ScopedThreadName::ScopedThreadName(std::string_view name) {
  char buf[16] = {};
  if (pthread_getname_np(pthread_self(), buf, sizeof buf) == 0) previous_ = buf;
  NameThisThread(name);
}

ScopedThreadName::~ScopedThreadName() {
  if (!previous_.empty()) NameThisThread(previous_);
}

}  // namespace edge
