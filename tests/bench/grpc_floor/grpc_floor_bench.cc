// grpc_floor_bench: what gRPC 1.51 and OpenSSL cost a process before any code of ours runs
// (issue 14, targets 3 and 4) — the floor under the idle agent's threads, memory and
// wake-ups, and under the controller's memory per connected node — measured on this machine
// with the gRPC this build links (Debian's), in one run.
//
// It makes a throwaway CA and two certificates (with the controller's CA code), then starts
// itself as two kinds of process:
//   server   a gRPC server with mTLS as the controller configures it (client certificate
//            required and verified, TLS records of kControllerTlsFrameBytes, and
//            SSL_MODE_RELEASE_BUFFERS through the same SSL_new the controller binary exports:
//            controller/ssl_release_buffers.cc), one callback generic service that holds
//            every bidi call open and reads whatever comes — nothing else;
//   client   N mTLS channels (each its own TCP connection, as N agents would have), one bidi
//            call open on each, driven either by the callback API (as the agent) or by one
//            completion queue on the process's main thread (`--api cq`: no callback
//            threads of gRPC's), and nothing else.
// Then it reports:
//   - one idle client of each API over WINDOW seconds: threads (and their names), RSS, PSS,
//     CPU % and wake-ups a minute (voluntary + involuntary context switches of all its
//     threads), beside the target of issue 14 item 3;
//   - the server's RSS and PSS with no connection, then after 1/2 N and N clients have each
//     opened their call: KiB per connection, and what 10 000 would hold beside the 1 GiB of
//     item 4.
// The agent's own figures come from tests/bench/idle/idle_agent.sh, the controller's from
// fleet_bench; this is what is left when everything of ours is taken away.
//
// Usage: grpc_floor_bench [--window SECONDS] [--connections N] [--json PATH]
// Prints figures; asserts nothing (design.md §8).
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/identity/certificate_authority.h"
#include "controller/controller.h"
#include "tests/bench/bench_report.h"
#include "tests/bench/fleet/proc_stats.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "grpc_floor_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) Die("cannot write " + tmp.string());
  }
  fs::rename(tmp, p);
}

// The controller's kind of certificates, from the product's own CA code.
void MakeCerts(const fs::path& dir) {
  const auto now = std::chrono::system_clock::now();
  auto ca = edge::identity::CertificateAuthority::Create("grpc-floor-ca", now);
  if (!ca) Die("CA: " + ca.error().ToString());
  auto server = ca->IssueServerCert({"localhost"}, now);
  auto client = ca->IssueNodeCert("floor-node", now);
  if (!server || !client) Die("certificates");
  WriteFile(dir / "ca.pem", ca->cert_pem());
  WriteFile(dir / "server.pem", server->cert_pem + ca->cert_pem());
  WriteFile(dir / "server.key", server->key_pem);
  WriteFile(dir / "client.pem", client->cert_pem);
  WriteFile(dir / "client.key", client->key_pem);
}

// --- the server: one generic service that holds every call open -----------------------------

class HoldingReactor : public grpc::ServerGenericBidiReactor {
 public:
  HoldingReactor() {
    StartSendInitialMetadata();
    StartRead(&in_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    in_.Clear();
    StartRead(&in_);
  }
  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer in_;
};

class HoldingService : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new HoldingReactor;
  }
};

sigset_t TermSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// GRPC_FLOOR_SERVER_ARGS="name=int,name=int": integer channel arguments for the server on
// top of the controller's, to measure what one changes in the floor (an A/B of a setting
// before the controller takes it).
void AddServerArguments(grpc::ServerBuilder& builder) {
  const char* env = std::getenv("GRPC_FLOOR_SERVER_ARGS");
  std::stringstream list(env != nullptr ? env : "");
  std::string item;
  while (std::getline(list, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) Die("GRPC_FLOOR_SERVER_ARGS: not name=int: " + item);
    char* end = nullptr;
    const long value = std::strtol(item.c_str() + eq + 1, &end, 10);
    if (end == item.c_str() + eq + 1 || *end != '\0') {
      Die("GRPC_FLOOR_SERVER_ARGS: not an integer: " + item);
    }
    builder.AddChannelArgument(item.substr(0, eq), static_cast<int>(value));
    std::fprintf(stderr, "grpc_floor_bench: server argument %s\n", item.c_str());
  }
}

int RunServer(const fs::path& dir) {
  const sigset_t term = TermSignals();
  pthread_sigmask(SIG_BLOCK, &term, nullptr);  // before gRPC's threads inherit the mask
  grpc::SslServerCredentialsOptions opts(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = ReadFile(dir / "ca.pem");
  opts.pem_key_cert_pairs.push_back({ReadFile(dir / "server.key"), ReadFile(dir / "server.pem")});
  HoldingService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(opts), &port);
  builder.AddChannelArgument(GRPC_ARG_TSI_MAX_FRAME_SIZE,
                             edge::controller::kControllerTlsFrameBytes);
  AddServerArguments(builder);
  builder.RegisterCallbackGenericService(&service);
  auto server = builder.BuildAndStart();
  if (!server || port == 0) Die("server: cannot listen on loopback");
  WriteFile(dir / "port", std::to_string(port));
  int sig = 0;
  sigwait(&term, &sig);
  server->Shutdown(std::chrono::system_clock::now() + 1s);
  return 0;
}

// --- the client: N channels, one open bidi call on each --------------------------------------

std::shared_ptr<grpc::Channel> MakeChannel(const fs::path& dir, const std::string& target,
                                           int index) {
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = ReadFile(dir / "ca.pem");
  opts.pem_private_key = ReadFile(dir / "client.key");
  opts.pem_cert_chain = ReadFile(dir / "client.pem");
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  // A distinct argument per channel: gRPC shares one connection among channels whose
  // arguments are equal, and each simulated agent must have its own.
  args.SetInt("grpc_floor_bench.channel", index);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(opts), args);
}

constexpr const char* kMethod = "/grpc_floor.Hold/Hold";

class HoldingCall : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  HoldingCall(grpc::GenericStub& stub, std::atomic<int>& opened) : opened_(opened) {
    stub.PrepareBidiStreamingCall(&ctx_, kMethod, grpc::StubOptions(), this);
    StartRead(&in_);
    StartCall();
  }
  void OnReadInitialMetadataDone(bool ok) override {
    if (ok) opened_.fetch_add(1);
  }
  void OnReadDone(bool ok) override {
    if (ok) StartRead(&in_);
  }
  void OnDone(const grpc::Status&) override {}
  void Cancel() { ctx_.TryCancel(); }

 private:
  std::atomic<int>& opened_;
  grpc::ClientContext ctx_;
  grpc::ByteBuffer in_;
};

int RunClient(const fs::path& dir, const std::string& api, int n, const std::string& ready) {
  const std::string target = "127.0.0.1:" + ReadFile(dir / "port");
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < n; ++i)
    channels.push_back(MakeChannel(dir, target, i));
  if (api == "callback") {
    std::atomic<int> opened{0};
    std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
    std::vector<std::unique_ptr<HoldingCall>> calls;
    for (int i = 0; i < n; ++i) {
      stubs.push_back(std::make_unique<grpc::GenericStub>(channels[static_cast<size_t>(i)]));
      calls.push_back(std::make_unique<HoldingCall>(*stubs.back(), opened));
    }
    while (opened.load() < n)
      std::this_thread::sleep_for(10ms);
    WriteFile(ready, "ok");
    for (;;)
      pause();  // the orchestrator ends a client with SIGKILL
  }
  // One completion queue, driven by this thread alone: every event of every call comes here.
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::GenericClientAsyncReaderWriter>> streams;
  std::vector<grpc::ByteBuffer> in(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    stubs.push_back(std::make_unique<grpc::GenericStub>(channels[static_cast<size_t>(i)]));
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stubs.back()->PrepareCall(contexts.back().get(), kMethod, &cq));
    // Tags: 2i = started, 2i+1 = initial metadata read.
    streams.back()->StartCall(reinterpret_cast<void*>(static_cast<intptr_t>(2 * i)));
    streams.back()->ReadInitialMetadata(reinterpret_cast<void*>(static_cast<intptr_t>(2 * i + 1)));
  }
  int opened = 0;
  void* tag = nullptr;
  bool ok = false;
  // Blocks until an event: an idle connection wakes this thread only for what gRPC does. The
  // orchestrator ends a client with SIGKILL.
  while (cq.Next(&tag, &ok)) {
    if (ok && reinterpret_cast<intptr_t>(tag) % 2 == 1 && ++opened == n) WriteFile(ready, "ok");
  }
  return 0;
}

// --- the orchestrator ---------------------------------------------------------------------

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) {
    Die("cannot start " + args[1]);
  }
  return pid;
}

void WaitForFile(const fs::path& p, pid_t owner, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!fs::exists(p)) {
    int status = 0;
    if (waitpid(owner, &status, WNOHANG) == owner) Die(p.filename().string() + ": process ended");
    if (std::chrono::steady_clock::now() > until) Die("timed out waiting for " + p.string());
    std::this_thread::sleep_for(20ms);
  }
}

void Stop(pid_t pid, int sig) {
  kill(pid, sig);
  int status = 0;
  waitpid(pid, &status, 0);
}

// Voluntary + involuntary context switches over every thread of `pid`.
int64_t ContextSwitches(pid_t pid) {
  int64_t sum = 0;
  const fs::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& t : fs::directory_iterator(tasks, ec)) {
    std::ifstream in(t.path() / "status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.starts_with("voluntary_ctxt_switches:") ||
          line.starts_with("nonvoluntary_ctxt_switches:")) {
        sum += std::atoll(line.substr(line.find(':') + 1).c_str());
      }
    }
  }
  return sum;
}

// "name xCOUNT, …" of the threads of `pid`.
std::string ThreadNames(pid_t pid) {
  std::map<std::string, int> names;
  std::error_code ec;
  for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::string name = ReadFile(t.path() / "comm");
    while (!name.empty() && name.back() == '\n')
      name.pop_back();
    ++names[name];
  }
  std::string out;
  for (const auto& [name, count] : names)
    out += (out.empty() ? "" : ", ") + name + (count > 1 ? " x" + std::to_string(count) : "");
  return out;
}

struct IdleFigures {
  double rss_mib = 0, pss_mib = 0, threads = 0, cpu_percent = 0, wakeups_per_minute = 0;
  std::string names;
};

IdleFigures MeasureIdleClient(const fs::path& dir, const std::string& api, int window) {
  const fs::path ready = dir / ("ready-" + api);
  const pid_t pid = Spawn({"grpc_floor_bench", "client", dir.string(), api, "1", ready.string()});
  WaitForFile(ready, pid, 30s);
  std::this_thread::sleep_for(3s);  // past the connection's first settings and pings
  const auto a = edge::bench::ProcSample::Take(pid);
  const int64_t switches_a = ContextSwitches(pid);
  std::this_thread::sleep_for(std::chrono::seconds(window));
  const auto b = edge::bench::ProcSample::Take(pid);
  const int64_t switches_b = ContextSwitches(pid);
  IdleFigures f;
  f.rss_mib = static_cast<double>(b.rss_kb) / 1024.0;
  f.pss_mib = static_cast<double>(b.pss_kb) / 1024.0;
  f.threads = static_cast<double>(b.threads);
  f.cpu_percent = edge::bench::CpuPercent(a, b);
  f.wakeups_per_minute = static_cast<double>(switches_b - switches_a) * 60.0 / window;
  f.names = ThreadNames(pid);
  Stop(pid, SIGKILL);
  return f;
}

int RunBench(int window, int connections, const std::string& json_path) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/grpc-floor-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) Die("mkdtemp");
  const fs::path dir = templ;
  MakeCerts(dir);
  const pid_t server = Spawn({"grpc_floor_bench", "server", dir.string()});
  WaitForFile(dir / "port", server, 30s);
  std::printf("grpc_floor_bench: gRPC %s, idle window %d s, %d connections, load %.2f\n",
              grpc::Version().c_str(), window, connections, edge::bench::LoadAverage1());

  edge::bench::BenchReport report;
  std::printf(
      "\nAn idle client: one mTLS channel, one open bidi call, nothing else (target 3: "
      "RSS <= 16 MiB, PSS <= 12 MiB, <= 6 threads, CPU <= 0.05 %%)\n");
  for (const std::string api : {"callback", "cq"}) {
    const IdleFigures f = MeasureIdleClient(dir, api, window);
    const std::string what = api == "callback" ? "callback API" : "one completion queue";
    report.Add(what + ": threads", "", {f.threads});
    report.Add(what + ": RSS", "MiB", {f.rss_mib});
    report.Add(what + ": PSS", "MiB", {f.pss_mib});
    report.Add(what + ": CPU", "%", {f.cpu_percent});
    report.Add(what + ": wake-ups", "/min", {f.wakeups_per_minute});
    std::printf("    threads: %s\n", f.names.c_str());
  }

  std::printf("\nThe server's memory per connection (target 4: 10 000 nodes in 1 GiB)\n");
  std::this_thread::sleep_for(1s);
  const auto s0 = edge::bench::ProcSample::Take(server);
  const int half = connections / 2;
  std::vector<edge::bench::ProcSample> at;
  std::vector<pid_t> clients;
  for (int part = 0; part < 2; ++part) {
    const fs::path ready = dir / ("ready-many-" + std::to_string(part));
    clients.push_back(
        Spawn({"grpc_floor_bench", "client", dir.string(), "callback",
               std::to_string(part == 0 ? half : connections - half), ready.string()}));
    WaitForFile(ready, clients.back(), 300s);
    std::this_thread::sleep_for(3s);
    at.push_back(edge::bench::ProcSample::Take(server));
  }
  for (pid_t c : clients)
    Stop(c, SIGKILL);
  Stop(server, SIGTERM);
  const double mib0 = static_cast<double>(s0.rss_kb) / 1024.0;
  report.Add("server RSS, no connection", "MiB", {mib0});
  report.Add("server PSS, no connection", "MiB", {static_cast<double>(s0.pss_kb) / 1024.0});
  report.Add("server RSS, " + std::to_string(connections) + " connections", "MiB",
             {static_cast<double>(at[1].rss_kb) / 1024.0});
  const double first = static_cast<double>(at[0].rss_kb - s0.rss_kb) / half;
  const double second = static_cast<double>(at[1].rss_kb - at[0].rss_kb) / (connections - half);
  report.Add("RSS per connection, first half", "KiB", {first});
  const auto per = report.Add("RSS per connection, second half", "KiB", {second});
  const double at_10k = (mib0 + per.median * 10000.0 / 1024.0) / 1024.0;
  std::printf("  10 000 connections at the second half's rate: %.2f GiB (target 1 GiB: %.2fx)\n",
              at_10k, at_10k);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return report.Write(json_path) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "server") return RunServer(argv[2]);
  if (argc >= 6 && std::string(argv[1]) == "client") {
    return RunClient(argv[2], argv[3], std::atoi(argv[4]), argv[5]);
  }
  int window = 60;
  int connections = 1000;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--window")
      window = std::atoi(argv[i + 1]);
    else if (flag == "--connections")
      connections = std::atoi(argv[i + 1]);
    else if (flag == "--json")
      json_path = argv[i + 1];
    else
      window = -1;
  }
  if (window < 1 || connections < 2 || (argc % 2) == 0) {
    std::fprintf(
        stderr, "usage: grpc_floor_bench [--window SECONDS>0] [--connections N>1] [--json PATH]\n");
    return 2;
  }
  return RunBench(window, connections, json_path);
}
