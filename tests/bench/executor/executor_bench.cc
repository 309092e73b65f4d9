// executor_bench: what the Executor costs over doing the same thing by hand, measured in one
// run on this machine. Prints figures; asserts nothing (design.md §8).
//
//   1. Start latency: `/bin/true` run N times — raw fork + execv + waitpid (baseline) versus
//      Executor::Invoke("exec", mode argv) (pidfd, process group, clean env, idempotency row,
//      result). Median and p95 per run.
//   2. Output throughput: `head -c SIZE /dev/zero` — raw pipe read into a discarded buffer
//      (baseline) versus Executor exec streaming to a sink that acks at once, stop-and-wait
//      (32 KiB chunks, the worker and compute doors) and with the edge door's 1 MiB window.
//      MiB/s over R runs, interleaved, and the bench process's peak RSS before and after
//      (output is not buffered).
//
// Usage: executor_bench [--runs N] [--mib M] [--stream-runs R] [--json PATH]
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
#include "tests/bench/bench_report.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double LoadAverage() {
  double load[1] = {0};
  return ::getloadavg(load, 1) == 1 ? load[0] : -1;
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
  int stream_runs = 5;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--mib") == 0) mib = static_cast<size_t>(std::atol(argv[i + 1]));
    if (std::strcmp(argv[i], "--stream-runs") == 0) stream_runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
  }
  if (runs < 1 || mib < 1 || stream_runs < 1) {
    std::fprintf(
        stderr,
        "usage: executor_bench [--runs N>0] [--mib M>0] [--stream-runs R>0] [--json PATH]\n");
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
  auto invoke = [&](nlohmann::json args, edge::sandbox::ChunkSink sink, size_t window = 0) {
    std::promise<edge::sandbox::InvokeResult> p;
    edge::sandbox::InvokeRequest req;
    req.tool = "exec";
    req.args = std::move(args);
    req.collect_output = false;
    req.output_window_bytes = window;
    (*ex)->Invoke(std::move(req), {}, std::move(sink),
                  [&p](edge::sandbox::InvokeResult r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  };
  edge::bench::BenchReport report;

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
  std::printf("start latency, /bin/true, %d runs (load %.2f)\n", runs, LoadAverage());
  report.Add("fork+execv+waitpid /bin/true", "us", raw);
  report.Add("Executor exec /bin/true (argv)", "us", viaex, "fork+execv+waitpid /bin/true");

  // 2. Throughput and memory: the raw pipe and the Executor runs interleaved, so a change of
  // the machine's load shows in both. The sink acks at once (a consumer that keeps up), so the
  // windowed run shows what the read-ahead costs or saves when nothing downstream is slow.
  const long rss_before = PeakRssKb();
  std::vector<double> pipe, stop_and_wait, windowed;
  size_t chunks_saw = 0, chunks_windowed = 0;
  auto stream = [&](size_t window, size_t* chunks) {
    std::atomic<size_t> got{0}, n{0};
    auto t0 = Clock::now();
    auto r = invoke(
        {{"command", "/usr/bin/head"},
         {"mode", "argv"},
         {"args", {"-c", std::to_string(mib) + "M", "/dev/zero"}}},
        [&](edge::sandbox::OutputChunk c, std::function<void()> ack) {
          got += c.data.size();
          ++n;
          ack();
        },
        window);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r.outcome != edge::sandbox::Outcome::kOk || got.load() != mib << 20) {
      std::fprintf(stderr, "stream: outcome %s, %zu bytes\n",
                   std::string(edge::sandbox::OutcomeName(r.outcome)).c_str(), got.load());
      std::exit(1);
    }
    *chunks = n.load();
    return static_cast<double>(mib) / secs;
  };
  for (int i = 0; i < stream_runs; ++i) {
    pipe.push_back(RawPipeMiBs(mib));
    stop_and_wait.push_back(stream(0, &chunks_saw));
    windowed.push_back(stream(1 << 20, &chunks_windowed));
  }
  std::printf("\noutput throughput, %zu MiB of stdout, %d runs each\n", mib, stream_runs);
  report.Add("raw pipe read, 32 KiB reads", "MiB/s", pipe);
  report.Add("Executor exec, stop-and-wait 32 KiB chunks", "MiB/s", stop_and_wait,
             "raw pipe read, 32 KiB reads");
  report.Add("Executor exec, 1 MiB window (edge door)", "MiB/s", windowed,
             "raw pipe read, 32 KiB reads");
  std::printf("  chunks per run: %zu stop-and-wait, %zu with the window (a sink that keeps up)\n",
              chunks_saw, chunks_windowed);
  std::printf("  peak RSS of this process: %ld KiB before, %ld KiB after (output not buffered)\n",
              rss_before, PeakRssKb());

  ex->reset();
  work.reset();
  io.stop();
  t1.join();
  t2.join();
  std::filesystem::remove_all(dir);
  if (!report.Write(json_path)) {
    std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
    return 1;
  }
  return 0;
}
