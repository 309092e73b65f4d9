#include "sandbox/output_tail.h"

namespace edge::sandbox {

void OutputTail::Add(std::string_view data) {
  if (limit_ != 0 && data.size() >= limit_ && kept_.size() + data.size() > 2 * limit_) {
    // What Trim would keep of kept_ + data lies inside `data`: copy that alone, not the whole
    // chunk first.
    kept_.assign(data.substr(TailStart(data)));
    cut_ = true;
    return;
  }
  kept_.append(data);
  if (limit_ != 0 && kept_.size() > 2 * limit_) Trim();
}

const std::string& OutputTail::Finish() {
  Trim();
  return kept_;
}

size_t OutputTail::TailStart(std::string_view s) const {
  size_t start = s.size() - limit_;
  for (int i = 0;
       i < 3 && start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80; ++i)
    ++start;
  return start;
}

void OutputTail::Trim() {
  if (limit_ == 0 || kept_.size() <= limit_) return;
  kept_.erase(0, TailStart(kept_));
  cut_ = true;
}

}  // namespace edge::sandbox
