#include "sandbox/output_tail.h"

#include "common/utf8.h"

namespace edge::sandbox {

void OutputTail::Add(std::string_view data) {
  if (limit_ != 0 && data.size() >= limit_ && kept_.size() + data.size() > 2 * limit_) {
    // What Trim would keep of kept_ + data lies inside `data`: copy that alone, not the whole
    // chunk first.
    kept_.assign(data.substr(Utf8TailStart(data, limit_)));
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

void OutputTail::Trim() {
  if (limit_ == 0 || kept_.size() <= limit_) return;
  kept_.erase(0, Utf8TailStart(kept_, limit_));
  cut_ = true;
}

}  // namespace edge::sandbox
