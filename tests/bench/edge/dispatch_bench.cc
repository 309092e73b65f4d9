// Dispatch latency and throughput benchmark (issue 14 item 2): a real edge-controller and one
// real enrolled edge-agent on loopback (the integration harness), driven in-process through
// the controller's admin API on its unix socket — one gRPC channel, the callback API, so that
// many calls are in flight from the bench's one thread and gRPC's own threads. No CLI process
// is started on the measured path. Beside each figure, in the same run on the same machine:
//
//   A  a unary admin round trip (AdminService.Status) on the same channel;
//   B  fork/exec/wait of /bin/true in the bench process (posix_spawn + waitpid, stdio on
//      /dev/null), one at a time, and per second with 1, 16 and 256 children in flight (one
//      thread keeps that many spawned and reaps whichever ends first; on a 2-core machine the
//      parallel rates mostly show how much the kernel overlaps, not more work);
//   C  Invoke exec /bin/true (mode argv: the agent execs /bin/true itself, the same work as
//      B; --mode shell runs it under /bin/sh -c) at concurrency 1, and the ratio of its median
//      to median(A) + median(B);
//   D  commands per second with 16 and 256 Invokes in flight (the agent's
//      edge.max_concurrent_commands is set to 256), and the ratio to B's per-second figure at
//      the same number in flight and back to back;
//   E  the CLI's start-up: `edge-controller --version` (no call) and `edge-controller nodes`
//      (one admin call), fork/exec/wait from the bench.
//
// Latencies are median, p99, min and max over the runs. The load average is printed before
// and after: figures taken on a loaded machine are unreliable, the same-run ratios less so.
// Figures are printed (and with --json PATH written as JSON), never asserted.
//
// Usage: dispatch_bench [--runs N] [--commands M] [--levels 16,256] [--mode argv|shell]
//                       [--cli-runs K] [--json PATH]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "admin.grpc.pb.h"
#include "tests/integration/controller_fixture.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
namespace apb = edge::admin::v1;
using edge::testing::ControllerFixture;
using edge::testing::TempDir;
using nlohmann::json;

double MillisSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// Latency samples in ms: median, p99, min, max, mean.
struct Summary {
  size_t n = 0;
  double median = 0, p99 = 0, min = 0, max = 0, mean = 0;
};
Summary Summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double p) {
    return v[std::min(v.size() - 1,
                      static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
  };
  s.n = v.size();
  s.median = at(0.5);
  s.p99 = at(0.99);
  s.min = v.front();
  s.max = v.back();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return s;
}
json ToJson(const Summary& s) {
  return {{"n", s.n},        {"median_ms", s.median}, {"p99_ms", s.p99},
          {"min_ms", s.min}, {"max_ms", s.max},       {"mean_ms", s.mean}};
}

// ---- baseline B: fork/exec/wait -----------------------------------------------------------

// posix_spawn of argv with stdio on /dev/null.
class Spawner {
 public:
  explicit Spawner(std::vector<std::string> argv) : argv_(std::move(argv)) {
    posix_spawn_file_actions_init(&fa_);
    posix_spawn_file_actions_addopen(&fa_, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa_, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa_, 2, "/dev/null", O_WRONLY, 0);
    for (auto& a : argv_)
      ptrs_.push_back(a.data());
    ptrs_.push_back(nullptr);
  }
  ~Spawner() { posix_spawn_file_actions_destroy(&fa_); }
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  pid_t Spawn() {
    pid_t pid = -1;
    if (posix_spawn(&pid, ptrs_[0], &fa_, nullptr, ptrs_.data(), environ) != 0) return -1;
    return pid;
  }
  // One fork/exec/wait; its wall time in ms (negative when it failed).
  double Once() {
    const auto t0 = SteadyClock::now();
    pid_t pid = Spawn();
    if (pid < 0) return -1;
    int st = 0;
    ::waitpid(pid, &st, 0);
    const double ms = MillisSince(t0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? ms : -1;
  }
  // `total` runs with `in_flight` children alive at a time (one thread spawns, reaps any);
  // runs per second.
  double PerSecond(int total, int in_flight) {
    const auto t0 = SteadyClock::now();
    int started = 0, running = 0;
    while (started < total || running > 0) {
      while (running < in_flight && started < total) {
        if (Spawn() < 0) return 0;
        ++started;
        ++running;
      }
      int st = 0;
      if (::waitpid(-1, &st, 0) > 0) --running;
    }
    return total / (MillisSince(t0) / 1000.0);
  }

 private:
  std::vector<std::string> argv_;
  std::vector<char*> ptrs_;
  posix_spawn_file_actions_t fa_;
};

// ---- admin API calls ----------------------------------------------------------------------

// One AdminService.Status on the callback API; blocks until it ends. ms, negative on error.
double StatusOnce(apb::AdminService::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  apb::StatusRequest req;
  apb::StatusResponse resp;
  std::promise<bool> done;
  const auto t0 = SteadyClock::now();
  stub.async()->Status(&ctx, &req, &resp, [&](grpc::Status st) { done.set_value(st.ok()); });
  const bool ok = done.get_future().get();
  const double ms = MillisSince(t0);
  return ok ? ms : -1;
}

// One Invoke call as a callback-API read reactor: reads accepted, chunks and the result;
// reports once, when gRPC is done with it, then deletes itself.
class InvokeCall final : public grpc::ClientReadReactor<apb::InvokeEvent> {
 public:
  // ok: the call ended OK with outcome "ok" and exit code 0.
  using Done = std::function<void(bool ok, double ms, const std::string& why)>;

  static void Start(apb::AdminService::Stub& stub, const apb::InvokeRequest& req, Done done) {
    auto* call = new InvokeCall(std::move(done));
    call->req_ = req;
    call->ctx_.set_deadline(std::chrono::system_clock::now() + 120s);
    call->t0_ = SteadyClock::now();
    stub.async()->Invoke(&call->ctx_, &call->req_, call);
    call->StartRead(&call->ev_);
    call->StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    if (ev_.has_result()) {
      result_ok_ = ev_.result().outcome() == "ok" && ev_.result().exit_code() == 0;
      if (!result_ok_)
        why_ = ev_.result().outcome() + " " + ev_.result().code() + " " + ev_.result().message();
    }
    StartRead(&ev_);
  }
  void OnDone(const grpc::Status& st) override {
    const double ms = MillisSince(t0_);
    if (!st.ok()) why_ = "status " + std::to_string(st.error_code()) + ": " + st.error_message();
    done_(st.ok() && result_ok_, ms, why_);
    delete this;
  }

 private:
  explicit InvokeCall(Done done) : done_(std::move(done)) {}
  Done done_;
  grpc::ClientContext ctx_;
  apb::InvokeRequest req_;
  apb::InvokeEvent ev_;
  SteadyClock::time_point t0_;
  bool result_ok_ = false;
  std::string why_;
};

struct LevelResult {
  int in_flight = 0;
  int commands = 0;
  int failed = 0;
  std::string first_failure;
  double per_second = 0;
  Summary latency;
};

// `total` Invokes with `in_flight` of them running at a time: each one that ends starts the
// next (from gRPC's callback thread).
LevelResult RunInvokes(apb::AdminService::Stub& stub, const apb::InvokeRequest& req, int total,
                       int in_flight) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int started = 0, finished = 0, failed = 0;
    std::string first_failure;
    std::vector<double> lat;
  };
  auto state = std::make_shared<State>();
  state->lat.reserve(static_cast<size_t>(total));
  std::function<void()> start_one;
  start_one = [&stub, &req, state, total, &start_one] {
    InvokeCall::Start(stub, req,
                      [&start_one, state, total](bool ok, double ms, const std::string& why) {
                        bool more = false;
                        {
                          std::lock_guard lock(state->mu);
                          state->lat.push_back(ms);
                          if (!ok && state->failed++ == 0) state->first_failure = why;
                          ++state->finished;
                          if (state->started < total) {
                            ++state->started;
                            more = true;
                          }
                          if (state->finished == total) state->cv.notify_all();
                        }
                        if (more) start_one();
                      });
  };
  const auto t0 = SteadyClock::now();
  const int first = std::min(in_flight, total);
  {
    std::lock_guard lock(state->mu);
    state->started = first;
  }
  for (int i = 0; i < first; ++i)
    start_one();
  std::unique_lock lock(state->mu);
  state->cv.wait(lock, [&] { return state->finished == total; });
  LevelResult r;
  r.in_flight = in_flight;
  r.commands = total;
  r.failed = state->failed;
  r.first_failure = state->first_failure;
  r.per_second = total / (MillisSince(t0) / 1000.0);
  r.latency = Summarize(state->lat);
  return r;
}

std::vector<int> ParseLevels(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (int n = std::atoi(item.c_str()); n > 0) out.push_back(n);
  return out;
}

void PrintLatency(const char* name, const Summary& s, const std::string& extra = "") {
  std::printf("  %-44s median %7.2f  p99 %7.2f  min %7.2f  max %7.2f ms  (n=%zu)%s\n", name,
              s.median, s.p99, s.min, s.max, s.n, extra.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 200, commands = 2000, cli_runs = 30;
  std::string json_path, mode = "argv", levels_arg = "16,256";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--runs") {
      runs = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--commands") {
      commands = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--levels") {
      levels_arg = value;
    } else if (flag == "--mode") {
      mode = value;
    } else if (flag == "--cli-runs") {
      cli_runs = std::max(0, std::atoi(value.c_str()));
    } else if (flag == "--json") {
      json_path = value;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const std::vector<int> levels = ParseLevels(levels_arg);

  TempDir dir;
  ControllerFixture ctl(dir, "ctl", "log:\n  level: warn\n");
  auto [token_id, token] = ctl.CreateToken("bench-node");
  edge::testing::WriteText(
      dir / "agent.yaml",
      "node_id: bench-node\ndata_dir: " + (dir / "agent") + "\ncontroller:\n  join_token: \"" +
          token +
          "\"\nedge:\n  max_concurrent_commands: 256\nsandbox:\n  max_concurrent: 512\n"
          "log:\n  level: warn\n");
  edge::testing::ChildProcess agent(
      {edge::testing::AgentBin(), "--config", dir / "agent.yaml", "run"}, dir.path());

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel("unix:" + ctl.data_dir() + "/admin.sock",
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = apb::AdminService::NewStub(channel);
  const bool connected = edge::testing::WaitUntil(
      [&] {
        apb::ListNodesResponse r;
        grpc::ClientContext ctx;
        if (!stub->ListNodes(&ctx, {}, &r).ok()) return false;
        for (const auto& n : r.nodes())
          if (n.node_id() == "bench-node" && n.connected()) return true;
        return false;
      },
      60s);
  if (!connected) {
    std::fprintf(stderr, "the agent did not connect: %s\n", agent.Stderr().c_str());
    return 1;
  }

  apb::InvokeRequest req;
  req.set_node_id("bench-node");
  req.set_tool("exec");
  req.set_args_json(json{{"command", "/bin/true"}, {"mode", mode}}.dump());
  req.set_deadline_ms(60'000);

  const std::string load_before = LoadAverage();
  std::printf(
      "dispatch benchmark: %d runs at concurrency 1, %d commands per level, exec "
      "/bin/true (mode %s)\n  %ld CPUs, load average before: %s\n",
      runs, commands, mode.c_str(), sysconf(_SC_NPROCESSORS_ONLN), load_before.c_str());
#if defined(__SANITIZE_ADDRESS__)
  std::printf("  (a sanitizer build: use a Release build for meaningful figures)\n");
#endif

  // Warm-up: the channel, the agent's and controller's threads and caches.
  for (int i = 0; i < 5; ++i)
    StatusOnce(*stub);
  RunInvokes(*stub, req, std::min(commands, 50), 4);

  // A: unary admin round trip.
  std::vector<double> a_ms;
  for (int i = 0; i < runs; ++i)
    if (double ms = StatusOnce(*stub); ms >= 0) a_ms.push_back(ms);
  const Summary a = Summarize(a_ms);

  // B: fork/exec/wait of /bin/true.
  Spawner spawn_true({"/bin/true"});
  std::vector<double> b_ms;
  for (int i = 0; i < runs; ++i)
    if (double ms = spawn_true.Once(); ms >= 0) b_ms.push_back(ms);
  const Summary b = Summarize(b_ms);
  std::vector<std::pair<int, double>> b_rate;  // in flight → per second
  for (int k : std::vector<int>{1, 16, 256})
    b_rate.emplace_back(k, spawn_true.PerSecond(std::max(commands, 200), k));
  auto fork_rate = [&](int k) {
    for (auto& [n, r] : b_rate)
      if (n == k) return r;
    return spawn_true.PerSecond(std::max(commands, 200), k);
  };

  // C: Invoke at concurrency 1, one after the other.
  LevelResult c = RunInvokes(*stub, req, runs, 1);

  // D: commands per second at each level.
  std::vector<LevelResult> d;
  for (int k : levels)
    d.push_back(RunInvokes(*stub, req, commands, k));

  // E: the CLI's start-up.
  Summary cli_version, cli_nodes;
  if (cli_runs > 0) {
    Spawner version({edge::testing::ControllerBin(), "--version"});
    Spawner nodes({edge::testing::ControllerBin(), "--config", ctl.config_path(), "nodes"});
    std::vector<double> v, n;
    for (int i = 0; i < cli_runs; ++i) {
      if (double ms = version.Once(); ms >= 0) v.push_back(ms);
      if (double ms = nodes.Once(); ms >= 0) n.push_back(ms);
    }
    cli_version = Summarize(v);
    cli_nodes = Summarize(n);
  }
  const std::string load_after = LoadAverage();

  // The table.
  const double a_plus_b = a.median + b.median;
  const double b_rate1 = fork_rate(1);
  std::printf("\n  %-44s %s\n", "", "(latencies in ms)");
  PrintLatency("A  admin Status round trip (unary)", a);
  PrintLatency("B  fork/exec/wait /bin/true", b);
  char buf[256];
  std::snprintf(buf, sizeof buf, "   ratio to A+B (%.2f ms): %.2f", a_plus_b,
                c.latency.median / a_plus_b);
  PrintLatency("C  Invoke exec /bin/true, concurrency 1", c.latency, buf);
  if (c.failed > 0)
    std::printf("     %d failed, the first: %s\n", c.failed, c.first_failure.c_str());
  std::printf("\n  %-44s %9s %s\n", "", "per s", "ratio to B");
  for (auto& [k, r] : b_rate) {
    std::printf("  %-44s %9.0f\n",
                ("B  fork/exec/wait, " + std::to_string(k) + " in flight").c_str(), r);
  }
  for (const auto& lv : d) {
    const double same = fork_rate(lv.in_flight);
    std::printf("  %-44s %9.0f %5.2f (same in flight)  %5.2f (B back to back)  failed %d\n",
                ("D  Invoke, " + std::to_string(lv.in_flight) + " in flight").c_str(),
                lv.per_second, lv.per_second / same, lv.per_second / b_rate1, lv.failed);
    PrintLatency("     its latency", lv.latency);
    if (lv.failed > 0) std::printf("     the first failure: %s\n", lv.first_failure.c_str());
  }
  if (cli_runs > 0) {
    std::printf("\n");
    PrintLatency("E  edge-controller --version (no call)", cli_version);
    PrintLatency("E  edge-controller nodes (one admin call)", cli_nodes);
  }
  std::printf("\n  load average after: %s\n", load_after.c_str());

  if (!json_path.empty()) {
    json j = {{"runs", runs},
              {"commands_per_level", commands},
              {"mode", mode},
              {"cpus", sysconf(_SC_NPROCESSORS_ONLN)},
              {"load_average_before", load_before},
              {"load_average_after", load_after},
              {"admin_status", ToJson(a)},
              {"fork_exec_true", ToJson(b)},
              {"invoke_concurrency_1", ToJson(c.latency)},
              {"invoke_concurrency_1_failed", c.failed},
              {"invoke_ratio_to_a_plus_b", c.latency.median / a_plus_b}};
    for (auto& [k, r] : b_rate)
      j["fork_exec_per_second"][std::to_string(k)] = r;
    for (const auto& lv : d) {
      j["invoke_levels"].push_back(
          {{"in_flight", lv.in_flight},
           {"commands", lv.commands},
           {"per_second", lv.per_second},
           {"ratio_to_fork_same_in_flight", lv.per_second / fork_rate(lv.in_flight)},
           {"ratio_to_fork_back_to_back", lv.per_second / b_rate1},
           {"failed", lv.failed},
           {"latency", ToJson(lv.latency)}});
    }
    if (cli_runs > 0) {
      j["cli_version"] = ToJson(cli_version);
      j["cli_nodes"] = ToJson(cli_nodes);
    }
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  const bool failed = c.failed > 0 || std::any_of(d.begin(), d.end(), [](const LevelResult& l) {
                        return l.failed > 0;
                      });
  return failed ? 1 : 0;
}
