// Compute member benchmark (issue 11): processor calls per second through one member running
// a trivial tool (`cat`: the request back as the new entity), at 1 and 64 calls in flight,
// with p50 / p99 dispatch latency; beside it, in the same run on the same machine, fork/exec
// of the same `cat` per second (what the work itself costs). The calls go through the real
// path: admin socket → edge-controller (ComputeHub) → startStreaming over TLS → edge-agent →
// Executor → process → response back. Figures are printed, never asserted.
// Usage: compute_bench [--calls N] (default 2000 per concurrency level).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "compute_admin.grpc.pb.h"
#include "tests/bench/bench_report.h"
#include "tests/integration/controller_fixture.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace apb = edge::admin::v1;
using edge::testing::ControllerFixture;
using edge::testing::TempDir;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// fork/exec/wait of `cat </dev/null >/dev/null`, `n` times; calls per second.
double ForkExecPerSecond(int n) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  char* argv[] = {const_cast<char*>("cat"), nullptr};
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    pid_t pid = 0;
    if (posix_spawnp(&pid, "cat", &fa, nullptr, argv, environ) != 0) return 0;
    int st = 0;
    waitpid(pid, &st, 0);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  posix_spawn_file_actions_destroy(&fa);
  return n / secs;
}

struct Figures {
  double per_second = 0, p50_ms = 0, p99_ms = 0;
  int failed = 0;
};

Figures Run(apb::ComputeAdmin::Stub& stub, int calls, int in_flight) {
  std::atomic<int> next{0}, failed{0};
  std::vector<std::vector<double>> lat(in_flight);
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < in_flight; ++t) {
    threads.emplace_back([&, t] {
      while (next.fetch_add(1) < calls) {
        apb::DispatchComputeRequest req;
        req.set_tenant_id("bench");
        req.set_name("cat");
        req.set_entity_json(R"({"n":1,"text":"hello"})");
        req.set_member_wait_ms(-1);
        apb::DispatchComputeResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 60s);
        const auto s = Clock::now();
        auto st = stub.DispatchCompute(&ctx, req, &resp);
        lat[t].push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        if (!st.ok() || !resp.error_code().empty() || !resp.success()) {
          // The first few say why (a benchmark that hides its failures measures nothing).
          if (failed.fetch_add(1) < 3) {
            std::fprintf(stderr, "  call failed: %s %s | %s %s | success %d %s\n",
                         st.ok() ? "OK" : std::to_string(st.error_code()).c_str(),
                         st.error_message().c_str(), resp.error_code().c_str(),
                         resp.message().c_str(), resp.success() ? 1 : 0,
                         resp.response_json().substr(0, 300).c_str());
          }
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (const auto& v : lat)
    all.insert(all.end(), v.begin(), v.end());
  return Figures{calls / secs, Percentile(all, 0.50), Percentile(all, 0.99), failed.load()};
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 2000;
  std::string json_path;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
  }
  TempDir dir;
  ControllerFixture ctl(dir, "ctl", "log:\n  level: warn\n");
  auto tok = ctl.Cli({"compute", "token", "create", "--tenant", "bench", "--role", "ROLE_M2M"});
  if (tok.exit_code != 0) {
    std::fprintf(stderr, "token create failed: %s\n", tok.err.c_str());
    return 1;
  }
  edge::testing::WriteText(dir / "compute.token", tok.out);
  edge::testing::WriteText(
      dir / "agent.yaml",
      "node_id: bench-member\ndata_dir: " + (dir / "agent") +
          "\nedge:\n  enabled: false\nsandbox:\n  max_concurrent: 256\nlog:\n  level: warn\n"
          "tools:\n  cat: { command: [\"cat\"] }\ncompute:\n  enabled: true\n  address: " +
          ctl.advertise() + "\n  tls: { mode: tls, ca_file: " + ctl.data_dir() +
          "/ca/ca.crt }\n  token_file: " + (dir / "compute.token") +
          "\n  tags: [bench]\n  legal_entity_id: bench\n  max_concurrent_calls: 128\n"
          "  processors:\n    cat: { tool: cat, timeout: 30s }\n");
  edge::testing::ChildProcess agent(
      {edge::testing::AgentBin(), "--config", dir / "agent.yaml", "run"}, dir.path());
  auto channel = grpc::CreateChannel("unix:" + ctl.data_dir() + "/admin.sock",
                                     grpc::InsecureChannelCredentials());
  auto stub = apb::ComputeAdmin::NewStub(channel);
  const bool joined = edge::testing::WaitUntil(
      [&] {
        apb::ListComputeMembersResponse r;
        grpc::ClientContext ctx;
        return stub->ListComputeMembers(&ctx, {}, &r).ok() && r.members_size() == 1;
      },
      60s);
  if (!joined) {
    std::fprintf(stderr, "the member did not join: %s\n", agent.Stderr().c_str());
    return 1;
  }
  std::printf("compute member benchmark: %d processor calls per level, tool `cat`\n", calls);
#if defined(__SANITIZE_ADDRESS__)
  std::printf(
      "  (a sanitizer build: forking the ASan-instrumented agent dominates each call; use a "
      "Release build for meaningful figures)\n");
#endif
  Run(*stub, std::min(calls, 50), 4);  // warm-up
  const double fork_rate = ForkExecPerSecond(calls);
  std::printf("  %-34s %9.0f /s\n", "fork/exec `cat` (baseline)", fork_rate);
  namespace eb = edge::bench;
  nlohmann::json figures = nlohmann::json::array();
  figures.push_back(eb::FigureJson("fork/exec `cat`", "/s", eb::Summarize({fork_rate})));
  for (int in_flight : {1, 64}) {
    Figures f = Run(*stub, calls, in_flight);
    const std::string name = "dispatch, " + std::to_string(in_flight) + " in flight";
    std::printf("  %-34s %9.0f calls/s  p50 %7.2f ms  p99 %7.2f ms  failed %d\n", name.c_str(),
                f.per_second, f.p50_ms, f.p99_ms, f.failed);
    auto rate = eb::FigureJson(name, "calls/s", eb::Summarize({f.per_second}));
    rate["baseline"] = "fork/exec `cat`";
    rate["ratio"] = fork_rate > 0 ? f.per_second / fork_rate : 0.0;
    figures.push_back(std::move(rate));
    figures.push_back(eb::FigureJson(name + ": latency p50", "ms", eb::Summarize({f.p50_ms})));
    figures.push_back(eb::FigureJson(name + ": latency p99", "ms", eb::Summarize({f.p99_ms})));
  }
  if (!eb::WriteFigures(json_path, figures)) {
    std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
    return 1;
  }
  return 0;
}
