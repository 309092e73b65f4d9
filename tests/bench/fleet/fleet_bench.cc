// Fleet-scale load generator (issue 14 item 4): one process enrolls N simulated edge agents
// (tests/bench/fleet/sim_node.h: each its own node key, certificate, mTLS channel and
// ConnectEdge stream, speaking the real protocol through the agent's own libraries) against
// one real `edge-controller` it starts itself (temp data_dir, loopback port picked at run
// time), keeps them heartbeating, and prints what the controller costs:
//   1. enrollment: nodes/s and the time of each step;
//   2. steady state over --measure: controller CPU (% of one core, /proc/<pid>/stat), RSS and
//      PSS (smaps_rollup), threads, fds, and heartbeat-handling latency p50/p99 (below);
//   3. --restart: kill -9, restart on the same port, time until all N are connected again and
//      the peak connect rate per second (agents back off as the real agent does);
//   4. --fleet-command: one fleet command (`sysinfo`) to all N nodes, time until every result
//      is in.
// Heartbeat handling: the protocol has no heartbeat ack, so the bench measures, for each
// heartbeat, the time from its sealing on the node (the envelope's timestamp) to the
// moment the controller handled it — NodeInfo.last_heartbeat_epoch_ms is the controller's
// clock taken after the heartbeat's envelope and token were verified (two SQLite reads, one
// Ed25519 and one ES256 verification) and before its SQLite write; same host, same clock.
// It includes transport, queueing behind other streams and the database lock; it excludes
// the heartbeat's own write (its fsync). Sampled with AdminService.ListNodes; the CPU those
// calls cost the controller is measured and taken out of the steady-state figure.
// Figures are printed (and written as JSON with --json), never asserted.
#include <sys/resource.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admin.grpc.pb.h"
#include "agent/edge/result_mapper.h"
#include "common/grpc_lifetime.h"
#include "common/log.h"
#include "config/duration.h"
#include "fleet_admin.grpc.pb.h"
#include "sandbox/sysinfo.h"
#include "tests/bench/fleet/proc_stats.h"
#include "tests/bench/fleet/sim_node.h"
#include "tests/bench/fleet/work_pool.h"
#include "tests/integration/controller_fixture.h"

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace apb = edge::admin::v1;
using edge::bench::FleetContext;
using edge::bench::FleetCounters;
using edge::bench::ProcSample;
using edge::bench::SimNode;
using nlohmann::json;

struct Options {
  int nodes = 1000;
  milliseconds heartbeat = 30s;
  milliseconds measure = 60s;
  int enroll_concurrency = 8;
  bool restart = false;
  bool fleet_command = false;
  milliseconds reconnect_timeout = 600s;
  std::string bin_dir;
  std::string json_path;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "fleet_bench: %s\n"
               "usage: fleet_bench [--nodes N] [--heartbeat 30s] [--measure 60s]\n"
               "                   [--enroll-concurrency K] [--restart] [--fleet-command]\n"
               "                   [--reconnect-timeout 10m] [--bin-dir DIR] [--json PATH]\n",
               why);
  std::exit(2);
}

Options ParseFlags(int argc, char** argv) {
  Options o;
  auto duration = [](const char* v) {
    auto d = edge::config::ParseDuration(v);
    if (!d || d->count() <= 0) Usage("bad duration");
    return *d;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) Usage(("missing value for " + f).c_str());
      return argv[++i];
    };
    if (f == "--nodes") {
      o.nodes = std::atoi(value());
    } else if (f == "--heartbeat") {
      o.heartbeat = duration(value());
    } else if (f == "--measure") {
      o.measure = duration(value());
    } else if (f == "--enroll-concurrency") {
      o.enroll_concurrency = std::atoi(value());
    } else if (f == "--restart") {
      o.restart = true;
    } else if (f == "--fleet-command") {
      o.fleet_command = true;
    } else if (f == "--reconnect-timeout") {
      o.reconnect_timeout = duration(value());
    } else if (f == "--bin-dir") {
      o.bin_dir = value();
    } else if (f == "--json") {
      o.json_path = value();
    } else {
      Usage(("unknown flag " + f).c_str());
    }
  }
  if (o.nodes < 1 || o.nodes > 100000) Usage("--nodes must be 1..100000");
  if (o.enroll_concurrency < 1 || o.enroll_concurrency > 256) Usage("--enroll-concurrency 1..256");
  if (o.heartbeat < 1s) Usage("--heartbeat must be at least 1s (the controller counts seconds)");
  return o;
}

double Seconds(Steady::duration d) {
  return std::chrono::duration<double>(d).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

json Dist(const std::vector<double>& v) {
  return {{"n", v.size()},
          {"p50", Percentile(v, 0.50)},
          {"p99", Percentile(v, 0.99)},
          {"max", v.empty() ? 0.0 : *std::max_element(v.begin(), v.end())}};
}

std::string DistText(const std::vector<double>& v, const char* unit) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "p50 %.1f %s  p99 %.1f %s  max %.1f %s  (n=%zu)",
                Percentile(v, 0.50), unit, Percentile(v, 0.99), unit,
                v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()), unit, v.size());
  return buf;
}

json ProcJson(const ProcSample& s) {
  return {{"rss_mib", s.rss_kb / 1024.0},
          {"pss_mib", s.pss_kb / 1024.0},
          {"threads", s.threads},
          {"fds", s.fds}};
}

std::string ProcText(const ProcSample& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "RSS %.1f MiB  PSS %.1f MiB  threads %lld  fds %lld",
                s.rss_kb / 1024.0, s.pss_kb / 1024.0, static_cast<long long>(s.threads),
                static_cast<long long>(s.fds));
  return buf;
}

// Soft RLIMIT_NOFILE up to the hard limit (the controller we start inherits it).
rlim_t RaiseNofile() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  ::getrlimit(RLIMIT_NOFILE, &rl);
  return rl.rlim_cur;
}

std::shared_ptr<grpc::Channel> AdminChannel(const std::string& socket) {
  grpc::ChannelArguments args;  // as controller/admin_server.cc AdminChannel
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args);
}

std::string NodeName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "sim-%05d", i);
  return buf;
}

int NodeIndex(const std::string& name) {
  if (name.rfind("sim-", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

// The controller's view of the nodes; the CPU and time the call cost are added to `probe`.
struct Probe {
  double cpu_seconds = 0;
  double wall_seconds = 0;
  int calls = 0;
};

std::optional<apb::ListNodesResponse> ListNodes(apb::AdminService::Stub& admin, pid_t ctl_pid,
                                                Probe* probe) {
  const ProcSample before = ProcSample::Take(ctl_pid);
  apb::ListNodesResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 60s);
  auto st = admin.ListNodes(&ctx, {}, &resp);
  const ProcSample after = ProcSample::Take(ctl_pid);
  if (probe != nullptr) {
    probe->cpu_seconds += after.cpu_seconds - before.cpu_seconds;
    probe->wall_seconds += Seconds(after.at - before.at);
    ++probe->calls;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "ListNodes failed: %s\n", st.error_message().c_str());
    return std::nullopt;
  }
  return resp;
}

int CountConnected(const apb::ListNodesResponse& r) {
  int n = 0;
  for (const auto& node : r.nodes())
    n += node.connected() ? 1 : 0;
  return n;
}

// Events per second, counted from `origin_ms` (second 0 = [origin, origin + 1 s)).
std::vector<int64_t> PerSecond(const std::vector<int64_t>& times_ms, int64_t origin_ms) {
  std::vector<int64_t> out;
  for (int64_t t : times_ms) {
    if (t < origin_ms) continue;
    const size_t s = static_cast<size_t>((t - origin_ms) / 1000);
    if (out.size() <= s) out.resize(s + 1, 0);
    ++out[s];
  }
  return out;
}

std::vector<int64_t> Since(FleetCounters& c, std::vector<int64_t> FleetCounters::*field,
                           int64_t from_ms) {
  std::lock_guard lock(c.mu);
  std::vector<int64_t> out;
  for (int64_t t : c.*field)
    if (t >= from_ms) out.push_back(t);
  return out;
}

int64_t NowMs() {
  return edge::ToEpochMillis(std::chrono::system_clock::now());
}

template <typename Pred>
bool WaitFor(Pred pred, milliseconds timeout, milliseconds step = 200ms) {
  const auto end = Steady::now() + timeout;
  while (!pred()) {
    if (Steady::now() >= end) return false;
    std::this_thread::sleep_for(step);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  edge::GrpcShutdownAtExit grpc_lifetime;
  const edge::CallbackQueuePin callback_queue_pin;  // its simulated nodes are callback channels
  const Options opt = ParseFlags(argc, argv);
  edge::log::Init({.level = spdlog::level::warn});
  if (!opt.bin_dir.empty()) ::setenv("EDGE_BIN_DIR", opt.bin_dir.c_str(), 1);
  const rlim_t nofile = RaiseNofile();
  if (nofile < static_cast<rlim_t>(opt.nodes) + 512) {
    std::fprintf(stderr,
                 "warning: RLIMIT_NOFILE is %llu: the controller needs one descriptor per node "
                 "and more; %d nodes will not all connect\n",
                 static_cast<unsigned long long>(nofile), opt.nodes);
  }
  const long hb_secs = static_cast<long>(std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(opt.heartbeat).count()));
  json report;
  report["config"] = {{"nodes", opt.nodes},
                      {"heartbeat_s", hb_secs},
                      {"measure_s", Seconds(opt.measure)},
                      {"enroll_concurrency", opt.enroll_concurrency},
                      {"rlimit_nofile", static_cast<uint64_t>(nofile)},
                      {"cores", std::thread::hardware_concurrency()},
                      {"load_average_1m_at_start", edge::bench::LoadAverage1()}};
  std::printf(
      "fleet bench: %d simulated agents, heartbeat %lds, measure %.0fs, %u cores, "
      "load average %.2f at start\n",
      opt.nodes, hb_secs, Seconds(opt.measure), std::thread::hardware_concurrency(),
      edge::bench::LoadAverage1());
  std::printf(
      "  each node: own Ed25519 key, own certificate (ExchangeJoinToken), own mTLS channel "
      "and TCP connection, own ConnectEdge stream;\n  sysinfo answered from a canned payload "
      "(simulated nodes start no processes)\n");

  edge::testing::TempDir dir("fleet-bench");
  // All simulated agents come from 127.0.0.1, so the per-IP limits that would apply to one
  // site are lifted; the per-node attestation limit stays at its default.
  const std::string ctl_yaml =
      "cluster:\n  heartbeat_interval_secs: " + std::to_string(hb_secs) +
      "\n  stale_threshold_secs: " + std::to_string(std::max<long>(90, 3 * hb_secs)) +
      "\nlimits:\n  exchange_per_minute: 100000\n  exchange_burst: 100000\n"
      "  attest_per_ip_per_minute: 100000\n  unauthenticated_calls: 100000\n"
      "  unauthenticated_calls_per_peer: 100000\n";
  std::unique_ptr<edge::testing::ControllerFixture> ctl;
  try {
    ctl = std::make_unique<edge::testing::ControllerFixture>(dir, "ctl", ctl_yaml);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fleet_bench: %s\n", e.what());
    return 1;
  }
  const std::string admin_socket = ctl->data_dir() + "/admin.sock";
  auto admin = apb::AdminService::NewStub(AdminChannel(admin_socket));
  const ProcSample ctl_idle = ProcSample::Take(ctl->process().pid());

  auto& clock = edge::SystemClock::Instance();
  edge::DefaultRandom random;
  edge::TimerQueue timers(clock);
  edge::ClientCallQueue calls("sim-streams", 2);  // destroyed after the nodes: their streams
  edge::bench::WorkPool pool(4);                  // re-attestations and renewals
  FleetCounters counters;
  edge::sandbox::InvokeResult sysinfo;
  sysinfo.outcome = edge::sandbox::Outcome::kOk;
  sysinfo.payload = edge::sandbox::CollectSysinfo("fleet-bench");
  FleetContext ctx{.clock = clock,
                   .random = random,
                   .timers = timers,
                   .calls = calls,
                   .pool = pool,
                   .counters = counters,
                   .target = ctl->advertise(),
                   .heartbeat = std::chrono::seconds(hb_secs),
                   .sysinfo_result = edge::agentedge::ToEdgeResult(sysinfo, std::nullopt)};
  std::vector<std::unique_ptr<SimNode>> nodes;
  nodes.reserve(opt.nodes);
  for (int i = 0; i < opt.nodes; ++i)
    nodes.push_back(std::make_unique<SimNode>(NodeName(i), ctx));
  int exit_code = 0;

  // ---- 1. enrollment ----
  {
    std::atomic<int> next{0};
    std::atomic<int> failed{0};
    std::mutex mu;
    std::vector<double> mint_ms, exchange_ms, attest_ms, total_ms;
    std::string first_error;
    const ProcSample before = ProcSample::Take(ctl->process().pid());
    const auto t0 = Steady::now();
    std::vector<std::thread> workers;
    for (int w = 0; w < opt.enroll_concurrency; ++w) {
      workers.emplace_back([&] {
        for (int i = next++; i < opt.nodes; i = next++) {
          const auto s = Steady::now();
          apb::CreateJoinTokenRequest req;
          req.set_node_id(NodeName(i));
          apb::CreateJoinTokenResponse tok;
          grpc::ClientContext cctx;
          cctx.set_deadline(std::chrono::system_clock::now() + 60s);
          auto st = admin->CreateJoinToken(&cctx, req, &tok);
          const auto minted = Steady::now();
          edge::Result<SimNode::EnrollTimes> times = edge::MakeError(
              edge::ErrorCode::kUnavailable, "CreateJoinToken: " + st.error_message());
          if (st.ok()) {
            times =
                nodes[i]->Enroll(tok.join_token(), dir / ("nodes/" + NodeName(i)), ctl->ca_pin());
          }
          if (!times) {
            ++failed;
            std::lock_guard lock(mu);
            if (first_error.empty()) first_error = NodeName(i) + ": " + times.error().ToString();
            continue;
          }
          nodes[i]->Start();
          std::lock_guard lock(mu);
          mint_ms.push_back(std::chrono::duration<double, std::milli>(minted - s).count());
          exchange_ms.push_back(static_cast<double>(times->exchange.count()));
          attest_ms.push_back(static_cast<double>(times->attest.count()));
          total_ms.push_back(std::chrono::duration<double, std::milli>(Steady::now() - s).count());
        }
      });
    }
    for (auto& t : workers)
      t.join();
    const double secs = Seconds(Steady::now() - t0);
    const int enrolled = opt.nodes - failed.load();
    const ProcSample after = ProcSample::Take(ctl->process().pid());
    std::printf(
        "\nenrollment (%d at a time: join token over the admin socket, ExchangeJoinToken, "
        "keystore on disk, AttestNode+ChallengeNode):\n",
        opt.enroll_concurrency);
    std::printf(
        "  %d enrolled, %d failed in %.1f s: %.1f nodes/s; controller CPU %.0f %% of a "
        "core; load average %.2f\n",
        enrolled, failed.load(), secs, enrolled / secs, CpuPercent(before, after),
        edge::bench::LoadAverage1());
    std::printf("  token mint   %s\n  exchange     %s\n  attestation  %s\n  whole node   %s\n",
                DistText(mint_ms, "ms").c_str(), DistText(exchange_ms, "ms").c_str(),
                DistText(attest_ms, "ms").c_str(), DistText(total_ms, "ms").c_str());
    if (!first_error.empty()) std::printf("  first failure: %s\n", first_error.c_str());
    report["enrollment"] = {{"enrolled", enrolled},
                            {"failed", failed.load()},
                            {"seconds", secs},
                            {"nodes_per_second", enrolled / secs},
                            {"controller_cpu_percent", CpuPercent(before, after)},
                            {"token_mint_ms", Dist(mint_ms)},
                            {"exchange_ms", Dist(exchange_ms)},
                            {"attest_ms", Dist(attest_ms)},
                            {"node_ms", Dist(total_ms)},
                            {"first_error", first_error},
                            {"load_average_1m", edge::bench::LoadAverage1()}};
    // Every enrolled node connected, as the bench and as the controller see it.
    const bool bench_side = WaitFor([&] { return counters.connected.load() >= enrolled; }, 120s);
    int ctl_connected = 0;
    WaitFor(
        [&] {
          auto r = ListNodes(*admin, ctl->process().pid(), nullptr);
          ctl_connected = r ? CountConnected(*r) : 0;
          return ctl_connected >= enrolled;
        },
        120s, 1s);
    std::printf("  connected: %lld (bench side), %d (controller's ListNodes)%s\n",
                static_cast<long long>(counters.connected.load()), ctl_connected,
                bench_side ? "" : " — not all within 120 s");
    report["enrollment"]["connected_bench"] = counters.connected.load();
    report["enrollment"]["connected_controller"] = ctl_connected;
    if (enrolled == 0) exit_code = 1;
  }

  // ---- 2. steady state ----
  if (exit_code == 0) {
    const pid_t pid = ctl->process().pid();
    std::vector<int64_t> seen(opt.nodes, 0);
    std::vector<double> hb_latency;
    auto sample_latency = [&](const apb::ListNodesResponse& r, bool record) {
      for (const auto& n : r.nodes()) {
        const int i = NodeIndex(n.node_id());
        const int64_t hb = n.last_heartbeat_epoch_ms();
        if (i < 0 || i >= opt.nodes || hb == 0 || seen[i] == hb) continue;
        seen[i] = hb;
        if (!record) continue;
        int64_t sent = -1;
        for (int64_t s : nodes[i]->HeartbeatSends())
          if (s <= hb) sent = s;
        if (sent >= 0 && hb - sent < 60'000) hb_latency.push_back(static_cast<double>(hb - sent));
      }
    };
    Probe probe;
    if (auto r = ListNodes(*admin, pid, nullptr)) sample_latency(*r, false);
    const int64_t hb_before = counters.heartbeats_sent.load();
    const int64_t ended_before = counters.streams_ended.load();
    const ProcSample start = ProcSample::Take(pid);
    const ProcSample self_start = ProcSample::Take(::getpid());
    const auto end = start.at + opt.measure;
    // At most ~10 samples per window, at least one heartbeat interval apart.
    const auto step = std::max<Steady::duration>(opt.heartbeat, opt.measure / 10);
    for (auto next = start.at + step; next < end; next += step) {
      std::this_thread::sleep_until(next);
      if (auto r = ListNodes(*admin, pid, &probe)) sample_latency(*r, true);
    }
    std::this_thread::sleep_until(end);
    const ProcSample stop = ProcSample::Take(pid);
    const ProcSample self_stop = ProcSample::Take(::getpid());
    // The last sample runs after the window: its cost is not in the window's figure.
    if (auto r = ListNodes(*admin, pid, nullptr)) sample_latency(*r, true);
    const double wall = Seconds(stop.at - start.at);
    const double cpu_all = stop.cpu_seconds - start.cpu_seconds;
    const double probe_cpu_in = probe.cpu_seconds;
    const double probe_wall_in = probe.wall_seconds;
    const double cpu_pct = 100.0 * cpu_all / wall;
    const double cpu_pct_excl =
        wall - probe_wall_in > 0 ? 100.0 * (cpu_all - probe_cpu_in) / (wall - probe_wall_in) : 0;
    const int64_t hbs = counters.heartbeats_sent.load() - hb_before;
    const int64_t drops = counters.streams_ended.load() - ended_before;
    std::printf("\nsteady state over %.0f s (%lld connected; load average %.2f):\n", wall,
                static_cast<long long>(counters.connected.load()), edge::bench::LoadAverage1());
    std::printf("  heartbeats sent %.1f /s; streams ended during the window: %lld\n", hbs / wall,
                static_cast<long long>(drops));
    std::printf(
        "  controller CPU %.1f %% of one core (%.1f %% with the bench's %d ListNodes "
        "probes, %.2f s CPU, left in)\n",
        cpu_pct_excl, cpu_pct, probe.calls, probe.cpu_seconds);
    std::printf("  controller %s (idle before enrollment: RSS %.1f MiB)\n", ProcText(stop).c_str(),
                ctl_idle.rss_kb / 1024.0);
    std::printf("  heartbeat handling (sealed on the node → handled by the controller): %s\n",
                DistText(hb_latency, "ms").c_str());
    std::printf("  load generator: CPU %.1f %% of one core, %s\n",
                CpuPercent(self_start, self_stop), ProcText(self_stop).c_str());
    report["steady"] = {{"seconds", wall},
                        {"connected", counters.connected.load()},
                        {"heartbeats_per_second", hbs / wall},
                        {"streams_ended", drops},
                        {"controller_cpu_percent", cpu_pct_excl},
                        {"controller_cpu_percent_with_probes", cpu_pct},
                        {"probe_calls", probe.calls},
                        {"probe_cpu_seconds", probe.cpu_seconds},
                        {"controller", ProcJson(stop)},
                        {"controller_idle_rss_mib", ctl_idle.rss_kb / 1024.0},
                        {"heartbeat_handling_ms", Dist(hb_latency)},
                        {"bench_cpu_percent", CpuPercent(self_start, self_stop)},
                        {"bench", ProcJson(self_stop)},
                        {"load_average_1m", edge::bench::LoadAverage1()}};
  }

  // ---- 3. kill -9 and restart ----
  if (exit_code == 0 && opt.restart) {
    const int64_t want = counters.connected.load();
    const int64_t kill_ms = NowMs();
    const auto kill_at = Steady::now();
    ctl->Kill();
    // Every node sees its stream end (the kernel closed the controller's sockets) before the
    // new controller starts, as with a supervisor's restart.
    const bool all_dropped = WaitFor([&] { return counters.connected.load() == 0; }, 10s, 5ms);
    const auto killed_at = Steady::now();
    try {
      ctl->Restart();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "restart failed: %s\n", e.what());
      return 1;
    }
    const auto up_at = Steady::now();
    const int64_t up_ms = NowMs();
    admin = apb::AdminService::NewStub(AdminChannel(admin_socket));
    const ProcSample up_sample = ProcSample::Take(ctl->process().pid());
    if (!all_dropped) {
      std::printf("  note: %lld streams still looked up 10 s after the kill\n",
                  static_cast<long long>(counters.connected.load()));
    }
    const bool all_bench =
        WaitFor([&] { return counters.connected.load() >= want; }, opt.reconnect_timeout, 100ms);
    int ctl_connected = 0;
    const bool all_ctl = WaitFor(
        [&] {
          auto r = ListNodes(*admin, ctl->process().pid(), nullptr);
          ctl_connected = r ? CountConnected(*r) : 0;
          return ctl_connected >= want;
        },
        all_bench ? 120s : 1s, 1s);
    const auto ctl_all_at = Steady::now();
    const ProcSample after = ProcSample::Take(ctl->process().pid());
    const auto connects = Since(counters, &FleetCounters::connects_ms, kill_ms);
    const auto attempts = Since(counters, &FleetCounters::attempts_ms, kill_ms);
    const auto per_s = PerSecond(connects, kill_ms);
    const auto att_per_s = PerSecond(attempts, kill_ms);
    const int64_t last_connect_ms =
        connects.empty() ? kill_ms : *std::max_element(connects.begin(), connects.end());
    const int64_t peak = per_s.empty() ? 0 : *std::max_element(per_s.begin(), per_s.end());
    const int64_t peak_att =
        att_per_s.empty() ? 0 : *std::max_element(att_per_s.begin(), att_per_s.end());
    std::printf("\nrestart (kill -9, same port; load average %.2f):\n",
                edge::bench::LoadAverage1());
    std::printf(
        "  every stream ended %.2f s after the kill; the new controller answered its admin socket "
        "%.2f s after "
        "the kill\n",
        Seconds(killed_at - kill_at), Seconds(up_at - kill_at));
    std::printf(
        "  all %lld nodes connected again (bench: Hello written) %.1f s after the kill, "
        "%.1f s after the controller was up%s\n",
        static_cast<long long>(want), (last_connect_ms - kill_ms) / 1000.0,
        (last_connect_ms - up_ms) / 1000.0, all_bench ? "" : " — NOT ALL within the timeout");
    std::printf(
        "  controller's ListNodes shows %d connected, %.1f s after the kill (1 s polls)%s\n",
        ctl_connected, Seconds(ctl_all_at - kill_at), all_ctl ? "" : " — not all");
    std::printf(
        "  peak connect rate %lld /s; peak ConnectEdge attempts %lld /s; %zu attempts "
        "for %zu connects\n",
        static_cast<long long>(peak), static_cast<long long>(peak_att), attempts.size(),
        connects.size());
    std::printf("  controller CPU %.0f %% of a core from start to all connected; %s\n",
                CpuPercent(up_sample, after), ProcText(after).c_str());
    if (!all_bench) {
      std::lock_guard lock(counters.mu);
      std::printf("  last stream end: %s\n", counters.last_end_status.c_str());
    }
    report["restart"] = {{"nodes", want},
                         {"controller_up_s", Seconds(up_at - kill_at)},
                         {"all_connected_after_kill_s", (last_connect_ms - kill_ms) / 1000.0},
                         {"all_connected_after_up_s", (last_connect_ms - up_ms) / 1000.0},
                         {"all_connected", all_bench},
                         {"controller_connected", ctl_connected},
                         {"controller_all_connected_after_kill_s", Seconds(ctl_all_at - kill_at)},
                         {"peak_connects_per_second", peak},
                         {"peak_attempts_per_second", peak_att},
                         {"connects_per_second", per_s},
                         {"attempts_per_second", att_per_s},
                         {"attempts", attempts.size()},
                         {"controller_cpu_percent", CpuPercent(up_sample, after)},
                         {"controller", ProcJson(after)},
                         {"load_average_1m", edge::bench::LoadAverage1()}};
    if (!all_bench) exit_code = 1;
  }

  // ---- 4. one fleet command to every node ----
  if (exit_code == 0 && opt.fleet_command) {
    auto fleet = apb::FleetAdmin::NewStub(AdminChannel(admin_socket));
    apb::FleetInvokeRequest req;
    req.set_selector("label:bench=fleet");
    req.set_tool("sysinfo");
    req.set_deadline_ms(60'000);
    grpc::ClientContext cctx;
    cctx.set_deadline(std::chrono::system_clock::now() + 10min);
    const ProcSample before = ProcSample::Take(ctl->process().pid());
    const int64_t t0_ms = NowMs();
    const auto t0 = Steady::now();
    auto reader = fleet->FleetInvoke(&cctx, req);
    apb::FleetInvokeEvent ev;
    double accepted_s = -1;
    double last_s = 0;
    int parts = 0;
    std::map<std::string, int> states;
    std::vector<double> part_ms;
    while (reader->Read(&ev)) {
      if (ev.has_accepted()) {
        accepted_s = Seconds(Steady::now() - t0);
        parts = ev.accepted().parts_size();
      } else if (ev.has_part_result()) {
        last_s = Seconds(Steady::now() - t0);
        ++states[ev.part_result().state()];
        if (ev.part_result().has_duration())
          part_ms.push_back(static_cast<double>(ev.part_result().duration_ms()));
      }
    }
    const auto st = reader->Finish();
    const double total_s = Seconds(Steady::now() - t0);
    const ProcSample after = ProcSample::Take(ctl->process().pid());
    const auto rx = Since(counters, &FleetCounters::invoke_rx_ms, t0_ms);
    const double first_rx =
        rx.empty() ? 0 : (*std::min_element(rx.begin(), rx.end()) - t0_ms) / 1000.0;
    const double last_rx =
        rx.empty() ? 0 : (*std::max_element(rx.begin(), rx.end()) - t0_ms) / 1000.0;
    int results = 0;
    for (const auto& [k, v] : states)
      results += v;
    std::string tally;
    for (const auto& [k, v] : states)
      tally += " " + k + "=" + std::to_string(v);
    std::printf("\nfleet command (sysinfo to every node, one FleetInvoke; load average %.2f):\n",
                edge::bench::LoadAverage1());
    std::printf(
        "  %d parts; accepted (all parts stored) after %.2f s; InvokeTool reached the "
        "nodes from %.2f s to %.2f s\n",
        parts, accepted_s, first_rx, last_rx);
    std::printf("  %d results in after %.2f s (%s), call ended %s after %.2f s\n", results, last_s,
                tally.empty() ? "none" : tally.substr(1).c_str(),
                st.ok() ? "OK" : st.error_message().c_str(), total_s);
    std::printf("  part dispatch → result (controller's duration_ms): %s\n",
                DistText(part_ms, "ms").c_str());
    std::printf("  controller CPU %.0f %% of a core during the command; %s\n",
                CpuPercent(before, after), ProcText(after).c_str());
    report["fleet_command"] = {{"parts", parts},
                               {"accepted_s", accepted_s},
                               {"first_invoke_at_node_s", first_rx},
                               {"last_invoke_at_node_s", last_rx},
                               {"results", results},
                               {"all_results_s", last_s},
                               {"states", states},
                               {"status", st.ok() ? "OK" : st.error_message()},
                               {"part_ms", Dist(part_ms)},
                               {"controller_cpu_percent", CpuPercent(before, after)},
                               {"controller", ProcJson(after)},
                               {"load_average_1m", edge::bench::LoadAverage1()}};
    if (!st.ok() || results != parts) exit_code = 1;
  }

  report["counters"] = {{"streams_opened", counters.streams_opened.load()},
                        {"streams_ended", counters.streams_ended.load()},
                        {"heartbeats_sent", counters.heartbeats_sent.load()},
                        {"invokes_received", counters.invokes_received.load()},
                        {"results_written", counters.results_written.load()},
                        {"reattestations", counters.attestations.load()},
                        {"renewals", counters.renewals.load()},
                        {"errors", counters.errors.load()}};
  if (!opt.json_path.empty()) {
    std::ofstream out(opt.json_path, std::ios::trunc);
    out << report.dump(2) << "\n";
    if (!out) std::fprintf(stderr, "could not write %s\n", opt.json_path.c_str());
  }

  // ---- teardown: every stream over before the nodes go ----
  for (auto& n : nodes)
    n->Stop();
  WaitFor(
      [&] {
        return std::all_of(nodes.begin(), nodes.end(),
                           [](const auto& n) { return n->stream_over(); });
      },
      30s);
  timers.Stop();
  pool.Stop();
  nodes.clear();
  ctl.reset();
  std::fflush(stdout);
  return exit_code;
}
