// executor_bench: what the Executor costs over doing the same thing by hand, measured in one
// run on this machine. Prints figures; asserts nothing (design.md §8).
//
//   1. Start latency: `/bin/true` run N times — raw fork + execv + waitpid (baseline) versus
//      Executor::Invoke("exec", mode argv) (pidfd, process group, clean env, idempotency row,
//      result). Median and p95 per run.
//   2. Output throughput: `head -c SIZE /dev/zero` — raw pipe read into a discarded buffer
//      (baseline) versus Executor exec streaming 32 KiB chunks to a sink that acks at once.
//      MiB/s, and the bench process's peak RSS before and after (output is not buffered).
//
// Usage: executor_bench [--runs N] [--mib M]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "sandbox/executor.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

struct Stats {
  double median = 0, p95 = 0;
};
Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 95 / 100)]};
}

long PeakRssKb() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

// Baseline 1: fork + execv + waitpid.
double RawSpawn() {
  auto t0 = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ::execv(argv[0], argv);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return Micros(Clock::now() - t0);
}

// Baseline 2: read a child's stdout through a pipe as fast as possible.
double RawPipeMiBs(size_t mib) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return 0;
  auto t0 = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    std::string count = std::to_string(mib) + "M";
    char* argv[] = {const_cast<char*>("/usr/bin/head"), const_cast<char*>("-c"), count.data(),
                    const_cast<char*>("/dev/zero"), nullptr};
    ::execv(argv[0], argv);
    ::_exit(127);
  }
  ::close(fds[1]);
  std::vector<char> buf(32 * 1024);
  size_t total = 0;
  ssize_t n;
  while ((n = ::read(fds[0], buf.data(), buf.size())) > 0)
    total += static_cast<size_t>(n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(total) / (1 << 20) / secs;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 200;
  size_t mib = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--mib") == 0) mib = static_cast<size_t>(std::atol(argv[i + 1]));
  }
  if (runs < 1 || mib < 1) {
    std::fprintf(stderr, "usage: executor_bench [--runs N>0] [--mib M>0]\n");
    return 2;
  }
  char tmpl[] = "/tmp/edge-bench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);

  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread t1([&] { io.run(); }), t2([&] { io.run(); });
  edge::SystemClock clock;
  edge::sandbox::ExecutorOptions opts;
  opts.data_dir = dir;
  opts.own_id = "bench";
  opts.pids_cgroup_root = "";
  opts.max_output_bytes = (mib + 1) << 20;
  auto ex = edge::sandbox::Executor::Open(io, clock, opts);
  if (!ex) {
    std::fprintf(stderr, "executor: %s\n", ex.error().ToString().c_str());
    return 1;
  }
  auto invoke = [&](nlohmann::json args, edge::sandbox::ChunkSink sink) {
    std::promise<edge::sandbox::InvokeResult> p;
    edge::sandbox::InvokeRequest req;
    req.tool = "exec";
    req.args = std::move(args);
    req.collect_output = false;
    (*ex)->Invoke(std::move(req), {}, std::move(sink),
                  [&p](edge::sandbox::InvokeResult r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  };

  // 1. Start latency.
  std::vector<double> raw, viaex;
  for (int i = 0; i < runs; ++i)
    raw.push_back(RawSpawn());
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    auto r = invoke({{"command", "/bin/true"}, {"mode", "argv"}}, {});
    viaex.push_back(Micros(Clock::now() - t0));
    if (r.outcome != edge::sandbox::Outcome::kOk) {
      std::fprintf(stderr, "exec failed: %s\n", r.error.ToString().c_str());
      return 1;
    }
  }
  Stats a = Summarize(raw), b = Summarize(viaex);
  std::printf("start latency, /bin/true, %d runs\n", runs);
  std::printf("  %-34s median %8.0f us   p95 %8.0f us\n", "fork+execv+waitpid (baseline)", a.median,
              a.p95);
  std::printf("  %-34s median %8.0f us   p95 %8.0f us   (%.2fx baseline median)\n",
              "Executor exec (argv)", b.median, b.p95, b.median / a.median);

  // 2. Throughput and memory.
  const long rss_before = PeakRssKb();
  // The baseline runs before and after (the machine's load may change in between).
  double base_before = RawPipeMiBs(mib);
  std::atomic<size_t> got{0};
  auto t0 = Clock::now();
  auto r = invoke({{"command", "/usr/bin/head"},
                   {"mode", "argv"},
                   {"args", {"-c", std::to_string(mib) + "M", "/dev/zero"}}},
                  [&](edge::sandbox::OutputChunk c, std::function<void()> ack) {
                    got += c.data.size();
                    ack();
                  });
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  double exmibs = static_cast<double>(got.load()) / (1 << 20) / secs;
  double base_after = RawPipeMiBs(mib);
  double base = (base_before + base_after) / 2;
  std::printf("\noutput throughput, %zu MiB of stdout\n", mib);
  std::printf("  %-34s %8.0f MiB/s   (%.0f before, %.0f after the Executor run)\n",
              "raw pipe read (baseline)", base, base_before, base_after);
  std::printf("  %-34s %8.0f MiB/s   (%.2fx baseline; %zu MiB received, outcome %s)\n",
              "Executor exec, 32 KiB chunks, acked", exmibs, exmibs / base, got.load() >> 20,
              std::string(edge::sandbox::OutcomeName(r.outcome)).c_str());
  std::printf("  peak RSS of this process: %ld KiB before, %ld KiB after (output not buffered)\n",
              rss_before, PeakRssKb());

  ex->reset();
  work.reset();
  io.stop();
  t1.join();
  t2.join();
  std::filesystem::remove_all(dir);
  return 0;
}
