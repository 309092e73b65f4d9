// dispatch_floor_bench: what one `exec /bin/true` through one node costs in CPU because of
// the contract, whatever the implementation (issue 14, target 2: commands per second at 16 in
// flight >= 60 % of fork/exec/wait per second) — each piece measured alone in this process,
// as CPU-microseconds per command, with 16 at a time where they can overlap, beside the
// process itself:
//
//   - the process: posix_spawn + waitpid of /bin/true, 16 in flight (this process's CPU and
//     its children's), and the rate of that: the baseline of target 2;
//   - the invoke token: an ES256 JWT with the controller's claims, minted (controller) and
//     verified (agent) — wire.md: every InvokeTool carries one;
//   - the result's envelope: EnvelopeCodec::SealEvent on the agent and VerifyEvent on the
//     controller (SHA-256 of the inner and an Ed25519 signature);
//   - the durable writes: a synced SQLite commit of one small row (common/SqliteDb, WAL, group
//     commit, 16 writer threads so that syncs are shared) times the three a command makes
//     before its result is safe (the controller's insert and its result, the agent's journal
//     admission; docs/performance.md, stops 26 and 27), plus a relaxed one times the four
//     that need not wait (idempotency record, outbox row, MarkWritten, journal removal);
//   - the two gRPC hops, with this build's gRPC, 16 calls at a time: a unary call on a unix
//     socket without TLS (the operator's Invoke on the admin socket), and one message each way
//     on an open bidi stream over mTLS on loopback TCP (the InvokeTool down, the CommandResult
//     up), both through the callback API as the product uses it, server and client in this
//     process (so both sides' CPU is counted).
//
// Then the same pieces one at a time, as wall-clock time on one command's path (target 2's
// latency: Invoke at concurrency 1 <= 1.5 x (A + B), A a unary round trip, B fork/exec/wait):
// A + B + the token's mint and check + the envelope's seal and check + three synced commits,
// each waiting for its own sync + the edge hop's round. That is the latency floor; its ratio to
// A + B is printed beside the target's 1.5.
//
// The sum is the floor: no implementation of the contract on this machine spends less per
// command, and none of the product's own bookkeeping (its queues, logs, JSON, the journal's
// and outbox's bodies, the status file) is in it. With C cores the floor bounds commands per
// second at C / floor; target 2 asks for 0.6 x the process rate: the bench prints both.
//
// Usage: dispatch_floor_bench [--commands N] [--runs R] [--cores C] [--json PATH]
// Prints figures; asserts nothing (design.md §8).
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/identity/certificate_authority.h"
#include "agent/identity/envelope_codec.h"
#include "agent/identity/jwt.h"
#include "agent/identity/node_key.h"
#include "common/clock.h"
#include "common/sqlite_db.h"
#include "node_cluster.pb.h"
#include "tests/bench/bench_report.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace pb = aegis::cluster::v1;
using namespace std::chrono_literals;

constexpr int kInFlight = 16;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "dispatch_floor_bench: %s\n", what.c_str());
  std::exit(1);
}

// This process's CPU-seconds (every thread), plus its reaped children's when asked.
double ProcessCpu(bool children = false) {
  auto seconds = [](const rusage& u) {
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  double s = seconds(self);
  if (children) {
    rusage kids{};
    getrusage(RUSAGE_CHILDREN, &kids);
    s += seconds(kids);
  }
  return s;
}

// CPU-microseconds per operation of `work`, which performs `ops` of them.
double MicrosPerOp(size_t ops, const std::function<void()>& work, bool children = false) {
  const double c0 = ProcessCpu(children);
  work();
  return (ProcessCpu(children) - c0) * 1e6 / static_cast<double>(ops);
}

// Runs `body(thread_index)` on `threads` threads and waits for all of them.
void OnThreads(int threads, const std::function<void(int)>& body) {
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back(body, t);
  for (auto& t : ts)
    t.join();
}

// --- the process ---------------------------------------------------------------------------

// posix_spawn + waitpid of /bin/true, `in_flight` at a time, `total` in all; returns the
// wall-clock rate and sets `cpu_us` to the CPU per child (this process and the children).
double SpawnRate(size_t total, int in_flight, double* cpu_us) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  char arg0[] = "/bin/true";
  char* argv[] = {arg0, nullptr};
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = ProcessCpu(true);
  size_t started = 0, done = 0;
  int running = 0;
  while (done < total) {
    while (running < in_flight && started < total) {
      pid_t pid = 0;
      if (posix_spawn(&pid, arg0, &fa, nullptr, argv, environ) != 0) Die("posix_spawn");
      ++started;
      ++running;
    }
    int status = 0;
    if (::wait(&status) < 0) Die("wait");
    --running;
    ++done;
  }
  *cpu_us = (ProcessCpu(true) - c0) * 1e6 / static_cast<double>(total);
  posix_spawn_file_actions_destroy(&fa);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(total) / secs;
}

// --- the durable writes ---------------------------------------------------------------------

// CPU-microseconds per commit of one small row, `threads` writers at a time; `wall_us` gets
// the wall-clock time per commit of each writer (its latency).
double CommitMicros(const fs::path& dir, size_t total, edge::Durability durability, int threads,
                    double* wall_us) {
  const fs::path path = dir / ("commits-" + std::to_string(threads) + ".db");
  auto db = edge::SqliteDb::OpenFile(path.string(), {.name = "floor database"});
  if (!db) Die("sqlite: " + db.error().ToString());
  if (auto st = (*db)->Exec("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)"); !st) {
    Die("sqlite: " + st.error().ToString());
  }
  const std::string row(200, 'r');  // a journal or outbox row's order of size
  const size_t per_thread = total / static_cast<size_t>(threads);
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu = MicrosPerOp(per_thread * static_cast<size_t>(threads), [&] {
    OnThreads(threads, [&](int) {
      for (size_t i = 0; i < per_thread; ++i) {
        if (!(*db)->Exec("INSERT INTO t (v) VALUES (?)", {row}, durability)) Die("insert");
      }
    });
  });
  *wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(per_thread);
  return cpu;
}

// --- the gRPC hops --------------------------------------------------------------------------

// Reads one message and answers each with `reply`; a unary call ends after one, a stream
// goes on until the client closes it.
class EchoReactor : public grpc::ServerGenericBidiReactor {
 public:
  EchoReactor(const grpc::ByteBuffer& reply, bool unary) : reply_(reply), unary_(unary) {
    StartRead(&in_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    if (unary_) {
      StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(&reply_);
    }
  }
  void OnWriteDone(bool ok) override {
    if (ok && !unary_) StartRead(&in_);
  }
  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer in_;
  grpc::ByteBuffer reply_;
  bool unary_;
};

class EchoService : public grpc::CallbackGenericService {
 public:
  explicit EchoService(const grpc::ByteBuffer& reply) : reply_(reply) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new EchoReactor(reply_, ctx->method() == "/floor.Admin/Invoke");
  }

 private:
  grpc::ByteBuffer reply_;
};

grpc::ByteBuffer Bytes(size_t n, char fill) {
  const std::string s(n, fill);
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

// One bidi stream that sends `rounds` messages, each after the answer to the one before.
class PingPong : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PingPong(grpc::GenericStub& stub, const grpc::ByteBuffer& msg, size_t rounds)
      : msg_(msg), left_(rounds) {
    stub.PrepareBidiStreamingCall(&ctx_, "/floor.Edge/Connect", grpc::StubOptions(), this);
    StartWrite(&msg_);
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) Die("stream write failed");
    StartRead(&in_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) Die("stream read failed");
    if (--left_ == 0) {
      StartWritesDone();
    } else {
      StartWrite(&msg_);
    }
  }
  void OnDone(const grpc::Status& s) override {
    if (!s.ok()) Die("stream ended: " + s.error_message());
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  grpc::ClientContext ctx_;
  grpc::ByteBuffer msg_, in_;
  size_t left_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

struct Hops {
  double admin_unary_us = 0;  // CPU per call, 16 callers at a time
  double edge_round_us = 0;   // CPU per message each way, 16 streams at a time
  double admin_wall_us = 0;   // one call at a time: its latency
  double edge_wall_us = 0;    // one stream, one message at a time: a round's latency
};

// Wall-clock microseconds per step of `work`, which performs `ops` of them.
double WallMicrosPerOp(size_t ops, const std::function<void()>& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(ops);
}

Hops MeasureHops(const fs::path& dir, size_t total) {
  const auto now = std::chrono::system_clock::now();
  auto ca = edge::identity::CertificateAuthority::Create("floor-ca", now);
  if (!ca) Die("CA: " + ca.error().ToString());
  auto server_cert = ca->IssueServerCert({"localhost"}, now);
  auto node_cert = ca->IssueNodeCert("floor-node", now);
  if (!server_cert || !node_cert) Die("certificates");

  // What crosses each hop, in size: a result (a few hundred bytes) and an InvokeTool (its
  // ES256 token, ids and args: about a kilobyte).
  EchoService service(Bytes(400, 'r'));
  grpc::SslServerCredentialsOptions sopts(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  sopts.pem_root_certs = ca->cert_pem();
  sopts.pem_key_cert_pairs.push_back(
      {server_cert->key_pem, server_cert->cert_pem + ca->cert_pem()});
  const std::string sock = "unix:" + (dir / "admin.sock").string();
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(sopts), &port);
  builder.AddListeningPort(sock, grpc::InsecureServerCredentials());
  builder.RegisterCallbackGenericService(&service);
  auto server = builder.BuildAndStart();
  if (!server || port == 0) Die("gRPC server");

  grpc::SslCredentialsOptions copts;
  copts.pem_root_certs = ca->cert_pem();
  copts.pem_private_key = node_cert->key_pem;
  copts.pem_cert_chain = node_cert->cert_pem;
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto edge_channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                                grpc::SslCredentials(copts), args);
  auto admin_channel = grpc::CreateChannel(sock, grpc::InsecureChannelCredentials());
  if (!edge_channel->WaitForConnected(now + 10s) || !admin_channel->WaitForConnected(now + 10s)) {
    Die("gRPC channels did not connect");
  }
  grpc::GenericStub edge_stub(edge_channel);
  grpc::GenericStub admin_stub(admin_channel);
  const grpc::ByteBuffer invoke = Bytes(1000, 'i');
  const size_t per = total / kInFlight;

  Hops h;
  // The edge hop: 16 streams (as 16 commands in flight share the node's one stream, the
  // messages of 16 streams on one connection), one message each way per command.
  {
    PingPong warm(edge_stub, invoke, 10);
    warm.Wait();
  }
  h.edge_round_us = MicrosPerOp(per * kInFlight, [&] {
    std::vector<std::unique_ptr<PingPong>> streams;
    for (int i = 0; i < kInFlight; ++i)
      streams.push_back(std::make_unique<PingPong>(edge_stub, invoke, per));
    for (auto& s : streams)
      s->Wait();
  });
  auto admin_call = [&] {
    grpc::ClientContext ctx;
    grpc::ByteBuffer reply;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    admin_stub.UnaryCall(&ctx, "/floor.Admin/Invoke", grpc::StubOptions(), &invoke, &reply,
                         [&](grpc::Status st) {
                           std::lock_guard lock(mu);
                           status = std::move(st);
                           done = true;
                           cv.notify_one();
                         });
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
    if (!status.ok()) Die("admin call: " + status.error_message());
  };
  // The admin hop: a unary call per command, 16 callers at a time.
  h.admin_unary_us = MicrosPerOp(per * kInFlight, [&] {
    OnThreads(kInFlight, [&](int) {
      for (size_t i = 0; i < per; ++i)
        admin_call();
    });
  });
  // Latency, one at a time.
  h.edge_wall_us = WallMicrosPerOp(per, [&] {
    PingPong one(edge_stub, invoke, per);
    one.Wait();
  });
  h.admin_wall_us = WallMicrosPerOp(per, [&] {
    for (size_t i = 0; i < per; ++i)
      admin_call();
  });
  server->Shutdown(std::chrono::system_clock::now() + 1s);
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  size_t commands = 4000;
  int runs = 3;
  double cores = 2;
  std::string json_path;
  bool bad = (argc % 2) == 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--commands")
      commands = static_cast<size_t>(std::atol(argv[i + 1]));
    else if (flag == "--runs")
      runs = std::atoi(argv[i + 1]);
    else if (flag == "--cores")
      cores = std::atof(argv[i + 1]);
    else if (flag == "--json")
      json_path = argv[i + 1];
    else
      bad = true;
  }
  if (bad || commands < kInFlight || runs < 1 || cores <= 0) {
    std::fprintf(stderr,
                 "usage: dispatch_floor_bench [--commands N>=16] [--runs R>0] "
                 "[--cores C>0] [--json PATH]\n");
    return 2;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string templ =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/dispatch-floor-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) Die("mkdtemp");
  const fs::path dir = templ;

  // The crypto's inputs, as the product makes them.
  auto token_key = edge::identity::EcSigningKey::Generate();
  auto node_key = edge::identity::NodeKey::Generate();
  if (!token_key || !node_key) Die("keys");
  edge::SystemClock clock;
  const std::string node = "edge-01";
  const std::string stream = "6f1c1c1e-0000-4000-8000-0000000000d1";
  const std::string command = "3b0f9a52-5d1e-4c57-9a61-1f1e0c8b2a77";
  const std::string node_token(600, 't');
  const std::vector<std::string> keys = {node_key->public_key()};
  auto claims = [&] {
    const int64_t iat =
        std::chrono::duration_cast<std::chrono::seconds>(clock.Now().time_since_epoch()).count();
    return nlohmann::json{{"iss", "edge-controller"},
                          {"sub", "operator"},
                          {"aud", "edge-invoke"},
                          {"tid", "default"},
                          {"nid", node},
                          {"cid", command},
                          {"iat", iat},
                          {"exp", iat + 3900},
                          {"jti", "0b5e2a8e-9d0c-4f65-8a43-5a8b1c0d2e3f"},
                          {"roles", nlohmann::json::array({"operator"})}};
  };
  auto sample_token = edge::identity::SignJwtEs256(claims(), *token_key);
  if (!sample_token) Die("JWT");
  pb::EdgeEvent result;
  auto* ok = result.mutable_command_result()->mutable_result()->mutable_ok();
  result.mutable_command_result()->set_command_id(command);
  ok->set_exit_code(0);
  google::protobuf::Struct payload;
  (*payload.mutable_fields())["exit_code"].set_number_value(0);
  (*payload.mutable_fields())["signal"].set_number_value(0);
  ok->mutable_payload()->PackFrom(payload);
  ok->mutable_duration()->set_nanos(1'000'000);
  if (!edge::identity::EnvelopeCodec::SealEvent(result, *node_key, node_token, clock.Now(), node,
                                                stream)) {
    Die("SealEvent");
  }

  std::map<std::string, std::vector<double>> s;
  for (int r = 0; r < runs; ++r) {
    double spawn_us = 0;
    s["spawn_rate"].push_back(SpawnRate(commands, kInFlight, &spawn_us));
    s["spawn"].push_back(spawn_us);
    s["mint"].push_back(MicrosPerOp(commands, [&] {
      for (size_t i = 0; i < commands; ++i)
        if (!edge::identity::SignJwtEs256(claims(), *token_key)) Die("SignJwtEs256");
    }));
    s["verify_token"].push_back(MicrosPerOp(commands, [&] {
      for (size_t i = 0; i < commands; ++i) {
        if (!edge::identity::VerifyJwtEs256(*sample_token, token_key->get(), clock.Now(),
                                            {.audience = "edge-invoke"})) {
          Die("VerifyJwtEs256");
        }
      }
    }));
    s["seal"].push_back(MicrosPerOp(commands, [&] {
      for (size_t i = 0; i < commands; ++i) {
        if (!edge::identity::EnvelopeCodec::SealEvent(result, *node_key, node_token, clock.Now(),
                                                      node, stream)) {
          Die("SealEvent");
        }
      }
    }));
    s["verify_event"].push_back(MicrosPerOp(commands, [&] {
      for (size_t i = 0; i < commands; ++i) {
        if (!edge::identity::EnvelopeCodec::VerifyEvent(result, node, stream, keys, clock.Now())) {
          Die("VerifyEvent");
        }
      }
    }));
    double wall = 0;
    s["synced"].push_back(CommitMicros(dir, commands, edge::Durability::kSynced, kInFlight, &wall));
    s["relaxed"].push_back(
        CommitMicros(dir, commands, edge::Durability::kRelaxed, kInFlight, &wall));
    CommitMicros(dir, commands / 4, edge::Durability::kSynced, 1, &wall);
    s["synced_wall"].push_back(wall);
    double spawn1_cpu = 0;
    s["spawn1_wall"].push_back(1e6 / SpawnRate(commands / 4, 1, &spawn1_cpu));
    const Hops h = MeasureHops(dir, commands);
    s["admin"].push_back(h.admin_unary_us);
    s["edge"].push_back(h.edge_round_us);
    const double contract = s["mint"].back() + s["verify_token"].back() + s["seal"].back() +
                            s["verify_event"].back() + 3 * s["synced"].back() +
                            4 * s["relaxed"].back() + h.admin_unary_us + h.edge_round_us;
    s["contract"].push_back(contract);
    s["floor"].push_back(contract + spawn_us);
    s["ceiling"].push_back(cores * 1e6 / (contract + spawn_us));
    s["target"].push_back(0.6 * s["spawn_rate"].back());
    s["budget"].push_back(cores * 1e6 / (0.6 * s["spawn_rate"].back()) - spawn_us);
    s["over"].push_back(contract / s["budget"].back());
    // Latency at concurrency 1: everything on one command's path runs one after another —
    // the operator's call (A), the process (B), the token, the envelope, three synced commits
    // and the edge hop. Target 2: at most 1.5 x (A + B).
    s["admin_wall"].push_back(h.admin_wall_us);
    s["edge_wall"].push_back(h.edge_wall_us);
    const double a_plus_b = h.admin_wall_us + s["spawn1_wall"].back();
    s["a_plus_b"].push_back(a_plus_b);
    s["latency_floor"].push_back(a_plus_b + s["mint"].back() + s["verify_token"].back() +
                                 s["seal"].back() + s["verify_event"].back() +
                                 3 * s["synced_wall"].back() + h.edge_wall_us);
    s["latency_ratio"].push_back(s["latency_floor"].back() / a_plus_b);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);

  std::printf(
      "dispatch_floor_bench: %zu commands x %d runs, %d in flight, %.0f cores; CPU "
      "microseconds per command (lower is better)\n",
      commands, runs, kInFlight, cores);
  edge::bench::BenchReport report;
  report.Add("fork/exec/wait of /bin/true, 16 in flight", "/s", s["spawn_rate"]);
  report.Add("  its CPU per process (parent + child)", "us", s["spawn"]);
  report.Add("controller: ES256 invoke token minted", "us", s["mint"]);
  report.Add("agent: ES256 invoke token verified", "us", s["verify_token"]);
  report.Add("agent: result envelope sealed (Ed25519)", "us", s["seal"]);
  report.Add("controller: result envelope verified", "us", s["verify_event"]);
  report.Add("a synced SQLite commit (x3 a command)", "us", s["synced"]);
  report.Add("a relaxed SQLite commit (x4 a command)", "us", s["relaxed"]);
  report.Add("admin hop: unary call on a unix socket", "us", s["admin"]);
  report.Add("edge hop: a message each way, mTLS stream", "us", s["edge"]);
  report.Add("the contract's work per command", "us", s["contract"]);
  report.Add("floor: that + the process", "us", s["floor"]);
  report.Add("  commands/s that floor allows on these cores", "/s", s["ceiling"]);
  report.Add("  target 2: 60 % of fork/exec/wait per second", "/s", s["target"]);
  report.Add("  CPU left for the contract's work at the target", "us", s["budget"]);
  report.Add("  the contract's work / what is left, per run", "x", s["over"]);
  std::printf("\nOne command at a time: wall-clock microseconds on its path\n");
  report.Add("A: unary call on a unix socket, one at a time", "us", s["admin_wall"]);
  report.Add("B: fork/exec/wait of /bin/true, one at a time", "us", s["spawn1_wall"]);
  report.Add("a synced SQLite commit, one writer (x3)", "us", s["synced_wall"]);
  report.Add("edge hop: a message each way, one stream", "us", s["edge_wall"]);
  report.Add("A + B", "us", s["a_plus_b"]);
  report.Add("latency floor: A + B + crypto + commits + hop", "us", s["latency_floor"]);
  report.Add("  its ratio to A + B, per run (target 2: <= 1.5)", "x", s["latency_ratio"]);
  return report.Write(json_path) ? 0 : 1;
}
