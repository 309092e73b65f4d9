#include "tests/bench/fleet/proc_stats.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace edge::bench {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value (in kB) of a "Key:   123 kB" line, 0 when absent.
int64_t KbField(const std::string& text, const char* key) {
  auto pos = text.find(std::string("\n") + key);
  if (pos == std::string::npos) {
    if (text.rfind(key, 0) != 0) return 0;
    pos = 0;
  } else {
    pos += 1;
  }
  pos += std::strlen(key);
  return std::strtoll(text.c_str() + pos, nullptr, 10);
}

}  // namespace

ProcSample ProcSample::Take(pid_t pid) {
  ProcSample s;
  s.at = std::chrono::steady_clock::now();
  const std::string base = "/proc/" + std::to_string(pid);
  const std::string stat = Slurp(base + "/stat");
  // Fields after the command name (which may contain spaces) start after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  // Field 3 (state) is the first here; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && (fields >> f); ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  s.cpu_seconds = static_cast<double>(utime + stime) / ticks;
  const std::string rollup = Slurp(base + "/smaps_rollup");
  s.rss_kb = KbField(rollup, "Rss:");
  s.pss_kb = KbField(rollup, "Pss:");
  s.threads = KbField(Slurp(base + "/status"), "Threads:");
  if (DIR* d = ::opendir((base + "/fd").c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++s.fds;
    ::closedir(d);
  }
  s.ok = !rollup.empty();
  return s;
}

double CpuPercent(const ProcSample& from, const ProcSample& to) {
  const double wall = std::chrono::duration<double>(to.at - from.at).count();
  if (wall <= 0) return 0;
  return 100.0 * (to.cpu_seconds - from.cpu_seconds) / wall;
}

double LoadAverage1() {
  double load = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

}  // namespace edge::bench
