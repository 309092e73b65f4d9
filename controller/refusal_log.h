// Rate-limited logging of refused calls (issue 15 #7: 2000 bogus ExchangeJoinToken calls
// wrote 406 KB of log in 0.29 s). At most `per_interval` lines per key (a peer address) per
// interval; further lines are counted, and "suppressed K similar lines from KEY" is written
// with the first line of the key's next interval, or by the next call of any key once the
// interval is over. Monotonic time from the injected Clock. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/log.h"

namespace edge::controller {

class RefusalLog {
 public:
  RefusalLog(Clock& clock, size_t per_interval,
             std::chrono::milliseconds interval = std::chrono::minutes(1))
      : clock_(clock), per_interval_(per_interval), interval_(interval) {}

  // Writes `line` (already escaped) at warn level to `logger`, unless `key` is over its limit.
  void Warn(const std::shared_ptr<spdlog::logger>& logger, const std::string& key,
            const std::string& line) {
    std::lock_guard lock(mu_);
    const auto now = clock_.Monotonic();
    Sweep(logger, now, key);
    auto [it, fresh] = keys_.try_emplace(key, Window{now, 0, 0});
    Window& w = it->second;
    if (!fresh && now - w.start >= interval_) {
      Summarise(logger, key, w);
      w = Window{now, 0, 0};
    }
    if (w.emitted < per_interval_) {
      ++w.emitted;
      logger->warn("{}", line);
    } else {
      ++w.suppressed;
    }
  }

 private:
  struct Window {
    Clock::MonoTime start;
    size_t emitted;
    size_t suppressed;
  };
  void Summarise(const std::shared_ptr<spdlog::logger>& logger, const std::string& key,
                 const Window& w) {
    if (w.suppressed == 0) return;
    logger->warn("suppressed {} similar lines from {} (at most {} per {} s)", w.suppressed,
                 log::Escape(key), per_interval_,
                 std::chrono::duration_cast<std::chrono::seconds>(interval_).count());
  }
  // Closes the finished windows of other keys (summarising them), so memory stays bounded
  // by the keys active within one interval.
  void Sweep(const std::shared_ptr<spdlog::logger>& logger, Clock::MonoTime now,
             const std::string& except) {
    for (auto it = keys_.begin(); it != keys_.end();) {
      if (it->first != except && now - it->second.start >= interval_) {
        Summarise(logger, it->first, it->second);
        it = keys_.erase(it);
      } else {
        ++it;
      }
    }
  }

  Clock& clock_;
  const size_t per_interval_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::map<std::string, Window> keys_;
};

}  // namespace edge::controller
