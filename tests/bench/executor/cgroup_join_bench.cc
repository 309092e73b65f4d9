// cgroup_join_bench: what it costs a command's child to join its own cgroup, the way the
// agent's ProcessRunner does it (sandbox/README.md, "What joining costs"): a forked child
// writes "0" to <dir>/cgroup.procs, timed around that write, JOINS times with GAP ms between
// two joins, for each gap given. The kernel's migration lock makes the first writer after a
// quiet moment wait for an RCU grace period unless the host mounted cgroup2 with
// `favordynmods`; back-to-back joins do not wait. Baseline in the same run: the same fork,
// a write of one byte to /dev/null instead, and exit. Prints figures; asserts nothing. Needs a
// writable cgroup directory (root on a v1 `pids` hierarchy or a cgroup2 mount); otherwise it
// says why and exits 0.
//
// Usage: cgroup_join_bench [--joins N] [--gaps MS,MS,...] [--parent DIR] [--json PATH]
//   N joins per gap (default 20); gaps in ms (default 0,200,1000); DIR the cgroup under which
//   the bench makes and removes its own group (default /sys/fs/cgroup/pids, else
//   /sys/fs/cgroup when it is a cgroup2 mount); PATH gets every figure as JSON
//   (tests/bench/bench_report.h, for scripts/bench.sh's results.json).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/bench_report.h"

namespace {

using Clock = std::chrono::steady_clock;

// One child: opens `path` before the clock starts (as the agent opens cgroup.procs before the
// clone), writes "0", reports the write's duration in µs through a pipe. -1 on failure.
double TimedChildWrite(const std::string& path) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    const auto t0 = Clock::now();
    const bool ok = fd >= 0 && ::write(fd, "0", 1) == 1;
    const double us =
        ok ? std::chrono::duration<double, std::micro>(Clock::now() - t0).count() : -1.0;
    (void)!::write(p[1], &us, sizeof us);
    ::_exit(0);
  }
  ::close(p[1]);  // a child that dies before its report gives EOF, not a wait
  double us = -1;
  if (pid < 0 || ::read(p[0], &us, sizeof us) != static_cast<ssize_t>(sizeof us)) us = -1;
  if (pid > 0) ::waitpid(pid, nullptr, 0);
  ::close(p[0]);
  return us;
}

// Whether a cgroup2 mount shows `favordynmods` (the figures mean little without knowing):
// "on", "off", or "unknown" when no cgroup2 mount is visible.
const char* FavorDynmods() {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  bool seen = false;
  while (std::getline(mounts, line)) {
    const size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    seen = true;
    if (line.find("favordynmods", dash) != std::string::npos) return "on";
  }
  return seen ? "off" : "unknown";
}

bool Writable(const std::string& dir) {
  return ::access((dir + "/cgroup.procs").c_str(), W_OK) == 0;
}

// Prints one figure and keeps it for --json.
void Print(nlohmann::json& figures, const char* what, int gap_ms, std::vector<double> us) {
  const edge::bench::Summary s = edge::bench::Summarize(std::move(us));
  std::printf("  %-34s gap %5d ms  median %9.1f  min %9.1f  max %9.1f us (n=%zu)\n", what, gap_ms,
              s.median, s.min, s.max, s.n);
  figures.push_back(edge::bench::FigureJson(
      std::string(what) + ", " + std::to_string(gap_ms) + " ms apart", "us", s));
}

}  // namespace

int main(int argc, char** argv) {
  int joins = 20;
  std::vector<int> gaps = {0, 200, 1000};
  std::string parent;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--joins" && i + 1 < argc) {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      joins = static_cast<int>(std::clamp(n, 0L, 100'000L));
      if (*end != '\0' || n < 1 || n > 100'000) {
        std::fprintf(stderr, "cgroup_join_bench: --joins needs a count 1..100000, got '%s'\n",
                     argv[i]);
        return 2;
      }
    } else if (a == "--gaps" && i + 1 < argc) {
      gaps.clear();
      const std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        const std::string item = list.substr(at, comma - at);
        char* end = nullptr;
        const long ms = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || ms < 0 || ms > 60'000) {
          std::fprintf(stderr,
                       "cgroup_join_bench: --gaps needs milliseconds 0..60000 separated by "
                       "commas, got '%s' in '%s'\n",
                       item.c_str(), list.c_str());
          return 2;
        }
        gaps.push_back(static_cast<int>(ms));
        at = comma + 1;
      }
    } else if (a == "--parent" && i + 1 < argc) {
      parent = argv[++i];
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: cgroup_join_bench [--joins N] [--gaps MS,...] [--parent DIR]\n");
      return 2;
    }
  }
  if (parent.empty()) {
    parent = Writable("/sys/fs/cgroup/pids") ? "/sys/fs/cgroup/pids" : "/sys/fs/cgroup";
  }
  if (!Writable(parent)) {
    std::printf("cgroup_join_bench: skipped: %s/cgroup.procs is not writable (%s)\n",
                parent.c_str(), std::strerror(errno));
    return 0;
  }
  const std::string dir = parent + "/edge-cgroup-join-bench-" + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0) {
    std::printf("cgroup_join_bench: skipped: mkdir %s: %s\n", dir.c_str(), std::strerror(errno));
    return 0;
  }
  std::printf("cgroup_join_bench: %d joins of %s per gap, %u CPUs, cgroup2 favordynmods %s\n",
              joins, dir.c_str(), std::thread::hardware_concurrency(), FavorDynmods());
  bool failed = false;
  nlohmann::json figures = nlohmann::json::array();
  for (int gap : gaps) {
    std::vector<double> join, baseline;
    for (int i = 0; i < joins && !failed; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(gap));
      const double us = TimedChildWrite(dir + "/cgroup.procs");
      if (us < 0) {  // e.g. a container that lets the directory be made but not joined
        std::printf("cgroup_join_bench: skipped: a child could not join %s\n", dir.c_str());
        failed = true;
      }
      join.push_back(us);
    }
    for (int i = 0; i < joins && !failed; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(gap));
      // Baseline: the same child writing one byte to /dev/null instead.
      const double us = TimedChildWrite("/dev/null");
      if (us < 0) {
        std::printf("cgroup_join_bench: skipped: the baseline child could not write /dev/null\n");
        failed = true;
      }
      baseline.push_back(us);
    }
    if (failed) break;
    Print(figures, "join (write 0 to cgroup.procs)", gap, join);
    Print(figures, "baseline (1 byte to /dev/null)", gap, baseline);
  }
  // Every child has exited: the group is empty and goes.
  int tries = 0;
  while (::rmdir(dir.c_str()) != 0 && ++tries < 100)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (tries == 100)
    std::printf("cgroup_join_bench: %s could not be removed: %s\n", dir.c_str(),
                std::strerror(errno));
  if (!edge::bench::WriteFigures(json_path, figures)) {
    std::fprintf(stderr, "cgroup_join_bench: cannot write %s\n", json_path.c_str());
    return 1;
  }
  return 0;  // figures, or why there are none: never a failure of the bench itself
}
