// ProcSample: what the fleet bench reads about a process from /proc at one moment — CPU time
// (utime + stime of /proc/<pid>/stat), RSS and PSS (/proc/<pid>/smaps_rollup), threads
// (/proc/<pid>/status) and open file descriptors (/proc/<pid>/fd). Plain values; Take never
// throws (fields it cannot read stay 0 and `ok` is false).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace edge::bench {

struct ProcSample {
  bool ok = false;
  std::chrono::steady_clock::time_point at{};
  double cpu_seconds = 0;  // utime + stime
  int64_t rss_kb = 0;
  int64_t pss_kb = 0;
  int64_t threads = 0;
  int64_t fds = 0;

  static ProcSample Take(pid_t pid);
};

// CPU used between two samples as a percentage of one core.
double CpuPercent(const ProcSample& from, const ProcSample& to);

// The 1-minute load average of the machine (/proc/loadavg), -1 when unreadable.
double LoadAverage1();

}  // namespace edge::bench
