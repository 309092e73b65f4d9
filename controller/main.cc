// edge-controller: the bundled minimal controller (serve) and its operator CLI, whose
// subcommands are thin clients of the admin API on data_dir/admin.sock.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "admin.grpc.pb.h"
#include "common/atomic_file.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/grpc_lifetime.h"
#include "common/grpc_status.h"
#include "common/json_parse.h"
#include "common/log.h"
#include "common/signals.h"
#include "config/controller_config.h"
#include "config/duration.h"
#include "controller/admin_server.h"
#include "controller/compute_cli.h"
#include "controller/controller.h"

#ifndef EDGE_VERSION
#define EDGE_VERSION "0.0.0-dev"
#endif

namespace {

using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;
using json = nlohmann::json;

// Exit codes of `invoke` beyond the shared ones (documented in controller/README.md):
// an ok result exits with the tool's exit code; these say how else it ended.
constexpr int kExitNodeUnavailable = 69;  // EX_UNAVAILABLE: the node is not connected
constexpr int kExitTimedOut = 124;        // like timeout(1)
constexpr int kExitCancelled = 130;       // like a shell after SIGINT
// How long `serve` may take to stop after SIGTERM/SIGINT before it exits regardless.
constexpr std::chrono::seconds kStopLimit{10};
// After Ctrl-C / SIGTERM, how long `invoke` waits for the cancelled command's result.
constexpr std::chrono::seconds kCancelWait{5};

// JSON for the terminal: bytes that are not UTF-8 (a node's output) become U+FFFD instead of
// an exception.
std::string Dump(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

// Loads the config or prints every problem; nullopt means exit 2.
std::optional<edge::config::ControllerConfig> LoadConfig(const edge::cli::GlobalOptions& opts) {
  return edge::cli::LoadConfigOrReport(opts, edge::config::LoadControllerConfig);
}

int Serve(const edge::cli::GlobalOptions& opts) {
  edge::BlockTerminationSignals();
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  if (!edge::cli::InitLogging(opts, cfg->log.level, cfg->log.format)) return kExitUsage;
  auto log = edge::log::Get("controller");
  edge::controller::Controller controller(*cfg, EDGE_VERSION, edge::SystemClock::Instance());
  if (auto st = controller.Start(); !st) {
    log->error("cannot start: {}", st.error().ToString());
    return kExitFailure;
  }
  log->info("edge-controller {} serving (pid {})", EDGE_VERSION, ::getpid());
  int sig = *edge::WaitForTerminationSignal();
  log->info("signal {} received: stopping", sig);
  // Stopping is bounded: if something (a peer that never reads, a stuck call) keeps it
  // longer than kStopLimit, the process leaves anyway rather than hang.
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopped = false;
  std::thread watchdog([&] {
    std::unique_lock lock(stop_mu);
    if (!stop_cv.wait_for(lock, kStopLimit, [&] { return stopped; })) {
      log->error("stopping took longer than {} s: exiting without a clean stop",
                 kStopLimit.count());
      std::_Exit(kExitFailure);
    }
  });
  controller.Stop();
  {
    std::lock_guard lock(stop_mu);
    stopped = true;
  }
  stop_cv.notify_all();
  watchdog.join();
  log->info("stopped");
  return kExitOk;
}

int Status(const edge::cli::GlobalOptions& opts, const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  auto stub =
      edge::admin::v1::AdminService::NewStub(edge::controller::AdminChannel(cfg->admin.socket));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  edge::admin::v1::StatusResponse resp;
  auto st = stub->Status(&ctx, {}, &resp);
  if (!st.ok()) {
    std::fprintf(stderr, "error: controller not reachable on %s: %s\n", cfg->admin.socket.c_str(),
                 st.error_message().c_str());
    return kExitFailure;
  }
  if (format == "json") {
    nlohmann::json j = {{"status", "ok"},
                        {"version", resp.version()},
                        {"advertise", resp.advertise()},
                        {"ca_pin", resp.ca_pin()},
                        {"nodes", resp.nodes()},
                        {"active_join_tokens", resp.active_join_tokens()},
                        {"started_at_epoch_ms", resp.started_at_epoch_ms()},
                        {"grpc_listen", resp.grpc_listen()},
                        {"data_dir", resp.data_dir()}};
    std::cout << Dump(j) << "\n";
  } else {
    std::cout << "status:      ok\n"
              << "version:     " << resp.version() << "\n"
              << "grpc listen: " << resp.grpc_listen() << "\n"
              << "advertise:   " << resp.advertise() << "\n"
              << "CA pin:      " << resp.ca_pin() << "\n"
              << "nodes:       " << resp.nodes() << "\n"
              << "join tokens: " << resp.active_join_tokens() << " active\n"
              << "data dir:    " << resp.data_dir() << "\n";
  }
  return kExitOk;
}

// A stub for the admin API of the controller named by the config; nullptr after printing
// why when the config is bad.
std::unique_ptr<edge::admin::v1::AdminService::Stub> AdminStub(
    const edge::config::ControllerConfig& cfg) {
  return edge::admin::v1::AdminService::NewStub(edge::controller::AdminChannel(cfg.admin.socket));
}

int RpcFailed(const edge::config::ControllerConfig& cfg, const grpc::Status& st) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
    std::fprintf(stderr, "error: controller not reachable on %s: %s\n", cfg.admin.socket.c_str(),
                 st.error_message().c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "error: %s\n", st.error_message().c_str());
  return st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? kExitUsage : kExitFailure;
}

std::string IsoTime(int64_t ms) {
  if (ms == 0) return "-";
  std::time_t t = ms / 1000;
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return ctx;
}

int TokenCreate(const edge::cli::GlobalOptions& opts, const std::string& node,
                const std::string& tenant, const std::string& ttl, bool replace,
                const std::string& format) {
  if (replace && node.empty()) {
    std::fprintf(stderr,
                 "error: --replace needs --node: only a token bound to one node may replace "
                 "that node's identity\n");
    return kExitUsage;
  }
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::CreateJoinTokenRequest req;
  req.set_node_id(node);
  req.set_tenant_id(tenant);
  req.set_replace(replace);
  if (!ttl.empty()) {
    auto d = edge::config::ParseDuration(ttl);
    if (!d || d->count() < 1000) {
      std::fprintf(stderr,
                   "error: --ttl \"%s\" must be a duration of at least 1s, such as 30m or 1h\n",
                   ttl.c_str());
      return kExitUsage;
    }
    req.set_ttl_seconds(d->count() / 1000);
  }
  edge::admin::v1::CreateJoinTokenResponse resp;
  auto st = AdminStub(*cfg)->CreateJoinToken(Ctx().get(), req, &resp);
  if (!st.ok()) return RpcFailed(*cfg, st);
  if (format == "json") {
    nlohmann::json j = {{"token_id", resp.token_id()},
                        {"join_token", resp.join_token()},
                        {"expires_at", IsoTime(resp.expires_at_epoch_ms())}};
    std::cout << Dump(j) << "\n";
  } else {
    std::cout << "token id:   " << resp.token_id() << "\n"
              << "expires at: " << IsoTime(resp.expires_at_epoch_ms()) << "\n"
              << "join token: " << resp.join_token() << "\n";
  }
  return kExitOk;
}

int TokenList(const edge::cli::GlobalOptions& opts, bool all, const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::ListJoinTokensRequest req;
  req.set_include_inactive(all);
  edge::admin::v1::ListJoinTokensResponse resp;
  auto st = AdminStub(*cfg)->ListJoinTokens(Ctx().get(), req, &resp);
  if (!st.ok()) return RpcFailed(*cfg, st);
  auto state = [](const edge::admin::v1::JoinTokenInfo& t) -> std::string {
    if (t.revoked_at_epoch_ms()) return "revoked";
    if (t.consumed_at_epoch_ms()) return "used by " + t.consumed_by_node_id();
    if (t.expires_at_epoch_ms() <= edge::ToEpochMillis(edge::SystemClock::Instance().Now()))
      return "expired";
    return "active";
  };
  if (format == "json") {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& t : resp.tokens()) {
      arr.push_back({{"token_id", t.token_id()},
                     {"node_id", t.node_id()},
                     {"tenant_id", t.tenant_id()},
                     {"created_at", IsoTime(t.created_at_epoch_ms())},
                     {"expires_at", IsoTime(t.expires_at_epoch_ms())},
                     {"replace", t.replace()},
                     {"state", state(t)}});
    }
    std::cout << Dump(arr) << "\n";
  } else {
    std::printf("%-24s %-16s %-10s %-21s %s\n", "TOKEN ID", "NODE", "TENANT", "EXPIRES", "STATE");
    for (const auto& t : resp.tokens()) {
      const std::string node =
          t.node_id().empty() ? "*" : t.node_id() + (t.replace() ? " (replace)" : "");
      std::printf("%-24s %-16s %-10s %-21s %s\n", t.token_id().c_str(), node.c_str(),
                  t.tenant_id().c_str(), IsoTime(t.expires_at_epoch_ms()).c_str(),
                  state(t).c_str());
    }
  }
  return kExitOk;
}

int TokenRevoke(const edge::cli::GlobalOptions& opts, const std::string& id) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::RevokeJoinTokenRequest req;
  req.set_token_id(id);
  edge::admin::v1::RevokeJoinTokenResponse resp;
  auto st = AdminStub(*cfg)->RevokeJoinToken(Ctx().get(), req, &resp);
  if (!st.ok()) return RpcFailed(*cfg, st);
  std::cout << "revoked " << id << "\n";
  return kExitOk;
}

// RFC 3339 UTC with milliseconds; "-" (text) for 0.
std::string IsoTimeMs(int64_t ms) {
  if (ms == 0) return "-";
  std::time_t t = ms / 1000;
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", std::gmtime(&t));
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

// JSON time: RFC 3339 string, or null for 0.
json JsonTime(int64_t ms) {
  return ms == 0 ? json(nullptr) : json(IsoTimeMs(ms));
}

int Nodes(const edge::cli::GlobalOptions& opts, const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::ListNodesResponse resp;
  auto st = AdminStub(*cfg)->ListNodes(Ctx().get(), {}, &resp);
  if (!st.ok()) return RpcFailed(*cfg, st);
  if (format == "json") {
    json arr = json::array();
    for (const auto& n : resp.nodes()) {
      const auto& c = n.capabilities();
      json labels = json::object();
      for (const auto& [k, v] : c.labels())
        labels[k] = v;
      arr.push_back({{"node_id", n.node_id()},
                     {"tenant_id", n.tenant_id()},
                     {"state", n.state()},
                     {"connected", n.connected()},
                     {"edge_enrolled", n.edge_enrolled()},
                     {"enrolled_at", IsoTime(n.enrolled_at_epoch_ms())},
                     {"last_seen", IsoTime(n.last_seen_epoch_ms())},
                     {"last_heartbeat", JsonTime(n.last_heartbeat_epoch_ms())},
                     {"public_key_sha256", n.public_key_sha256()},
                     {"config_version", n.config_version()},
                     {"capabilities",
                      {{"os", c.os()},
                       {"arch", c.arch()},
                       {"tools", std::vector<std::string>(c.tools().begin(), c.tools().end())},
                       {"mounts", std::vector<std::string>(c.mounts().begin(), c.mounts().end())},
                       {"labels", labels}}}});
    }
    std::cout << Dump(arr) << "\n";
  } else {
    std::printf("%-20s %-10s %-10s %-9s %-24s %s\n", "NODE", "TENANT", "STATE", "CONNECTED",
                "LAST HEARTBEAT", "PLATFORM");
    for (const auto& n : resp.nodes()) {
      const auto& c = n.capabilities();
      std::string platform = c.os().empty() ? "-" : c.os() + "/" + c.arch();
      std::printf("%-20s %-10s %-10s %-9s %-24s %s\n", n.node_id().c_str(), n.tenant_id().c_str(),
                  n.state().c_str(), n.connected() ? "yes" : "no",
                  IsoTimeMs(n.last_heartbeat_epoch_ms()).c_str(), platform.c_str());
    }
  }
  return kExitOk;
}

// ---- edge commands ------------------------------------------------------------------

// Prints a refused edge call and picks the exit code: the node not connected → 69.
int EdgeRpcFailed(const edge::config::ControllerConfig& cfg, const grpc::Status& st,
                  bool controller_reached) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE && controller_reached) {
    std::fprintf(stderr, "error: %s\n", st.error_message().c_str());
    return kExitNodeUnavailable;
  }
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE) return RpcFailed(cfg, st);
  std::fprintf(stderr, "error: %s: %s\n", std::string(edge::GrpcCodeName(st.error_code())).c_str(),
               st.error_message().c_str());
  return st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? kExitUsage : kExitFailure;
}

// Connects to the admin socket first, so an UNAVAILABLE afterwards means the node.
std::shared_ptr<grpc::Channel> ConnectedAdminChannel(const edge::config::ControllerConfig& cfg) {
  struct stat st {};
  if (::stat(cfg.admin.socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    std::fprintf(stderr,
                 "error: controller not reachable on %s: no socket there (is it running?)\n",
                 cfg.admin.socket.c_str());
    return nullptr;
  }
  auto ch = edge::controller::AdminChannel(cfg.admin.socket);
  if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    std::fprintf(stderr, "error: controller not reachable on %s\n", cfg.admin.socket.c_str());
    return nullptr;
  }
  return ch;
}

// A value of --arg k=v: a JSON number, boolean, array or object is passed typed; a JSON
// string in double quotes is passed unquoted (so '"42"' is the string 42); anything else,
// null included, is passed as the string it is.
json ArgValue(const std::string& v) {
  auto j = edge::ParseJsonBounded(v, "--arg");
  if (j && (j->is_number() || j->is_boolean() || j->is_array() || j->is_object() || j->is_string()))
    return std::move(*j);
  return v;
}

// JSON from the controller (a payload, stored args): the value, or the text as a string when
// it is not JSON (or nested too deep to handle safely).
json JsonOrText(const std::string& text) {
  auto j = edge::ParseJsonBounded(text, "json");
  return j ? std::move(*j) : json(text);
}

// Arguments travel as JSON text, which must be UTF-8. Prints a usage error naming the flag
// and where its value stops being UTF-8, and returns false, when `value` is not.
bool CheckUtf8(const std::string& flag, const std::string& value) {
  try {
    (void)json(value).dump();
    return true;
  } catch (const json::type_error& e) {
    std::string why = e.what();
    if (auto p = why.find("] "); p != std::string::npos) why = why.substr(p + 2);
    std::fprintf(stderr,
                 "error: %s \"%s\" is not valid UTF-8 (%s): arguments travel as JSON text; "
                 "write a character as a JSON escape in --args-json (\"\\u00ff\"), or pass "
                 "raw bytes base64-encoded to a tool that takes them (file.write content)\n",
                 flag.c_str(), edge::log::Escape(value, 120).c_str(), why.c_str());
    return false;
  }
}

json OutcomeJson(const edge::admin::v1::CommandOutcome& r) {
  json payload = nullptr;
  if (!r.payload_json().empty()) payload = JsonOrText(r.payload_json());
  return {{"outcome", r.outcome()}, {"exit_code", r.exit_code()}, {"code", r.code()},
          {"message", r.message()}, {"payload", payload},         {"duration_ms", r.duration_ms()}};
}

json CommandJson(const edge::admin::v1::CommandInfo& c) {
  json args = JsonOrText(c.args_json());
  json j = {{"command_id", c.command_id()},
            {"node_id", c.node_id()},
            {"tool", c.tool()},
            {"args", args},
            {"security_context", c.security_context()},
            {"deadline_ms", c.deadline_ms()},
            {"state", c.state()},
            {"created_at", JsonTime(c.created_at_epoch_ms())},
            {"completed_at", JsonTime(c.completed_at_epoch_ms())}};
  if (c.has_result()) j["result"] = OutcomeJson(c.result());
  return j;
}

// How an ended command maps to the CLI's exit code, with a line on stderr when not ok.
int OutcomeExit(const std::string& id, const edge::admin::v1::CommandOutcome& r, bool quiet) {
  if (r.outcome() == "ok") {
    return r.exit_code() >= 0 && r.exit_code() <= 255 ? r.exit_code() : kExitFailure;
  }
  if (r.outcome() == "timed_out") {
    if (!quiet)
      std::fprintf(
          stderr, "error: command %s timed out after %s\n", id.c_str(),
          edge::config::FormatDuration(std::chrono::milliseconds(r.duration_ms())).c_str());
    return kExitTimedOut;
  }
  if (r.outcome() == "cancelled") {
    if (!quiet) std::fprintf(stderr, "command %s cancelled: %s\n", id.c_str(), r.message().c_str());
    return kExitCancelled;
  }
  if (!quiet)
    std::fprintf(stderr, "error: %s: %s\n", r.code().empty() ? "ERROR" : r.code().c_str(),
                 r.message().c_str());
  return kExitFailure;
}

struct InvokeOptions {
  std::string node, tool, args_json, context, deadline, format;
  std::vector<std::string> args;
  bool detach = false;
};

int Invoke(const edge::cli::GlobalOptions& opts, const InvokeOptions& o) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  for (const auto& [flag, value] : {std::pair{"--node", &o.node}, std::pair{"--tool", &o.tool},
                                    std::pair{"--context", &o.context}}) {
    if (!CheckUtf8(flag, *value)) return kExitUsage;
  }
  json args = json::object();
  if (!o.args_json.empty()) {
    auto parsed = edge::ParseJsonBounded(o.args_json, "--args-json");
    if (!parsed) {
      std::fprintf(stderr, "error: %s\n", parsed.error().message.c_str());
      return kExitUsage;
    }
    if (!parsed->is_object()) {
      std::fprintf(stderr,
                   "error: --args-json must be a JSON object, such as '{\"path\":\"x\"}'\n");
      return kExitUsage;
    }
    args = std::move(*parsed);
  }
  for (const auto& kv : o.args) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "error: --arg \"%s\" must be key=value\n",
                   edge::log::Escape(kv, 120).c_str());
      return kExitUsage;
    }
    if (!CheckUtf8("--arg", kv)) return kExitUsage;
    args[kv.substr(0, eq)] = ArgValue(kv.substr(eq + 1));
  }
  edge::admin::v1::InvokeRequest req;
  req.set_node_id(o.node);
  req.set_tool(o.tool);
  req.set_args_json(args.dump());
  req.set_security_context(o.context);
  req.set_detach(o.detach);
  if (!o.deadline.empty()) {
    auto d = edge::config::ParseDuration(o.deadline);
    if (!d || d->count() <= 0) {
      std::fprintf(stderr, "error: --deadline \"%s\" must be a positive duration, such as 30s\n",
                   o.deadline.c_str());
      return kExitUsage;
    }
    req.set_deadline_ms(d->count());
  }

  // Ctrl-C (or SIGTERM) cancels the command on the node and waits for its result; a second
  // one leaves at once.
  edge::BlockTerminationSignals();
  auto channel = ConnectedAdminChannel(*cfg);
  if (!channel) return kExitFailure;
  auto stub = edge::admin::v1::AdminService::NewStub(channel);
  grpc::ClientContext ctx;
  if (req.deadline_ms() > 0) {
    // The node reports TimedOut itself; this only bounds a node that never answers.
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(req.deadline_ms()) + std::chrono::seconds(60));
  }
  auto reader = stub->Invoke(&ctx, req);

  std::atomic<bool> done{false}, gave_up{false};
  std::mutex id_mu;
  std::string command_id;
  std::thread watcher([&] {
    int seen = 0;
    std::optional<std::chrono::steady_clock::time_point> leave_at;
    while (!done) {
      auto sig = edge::WaitForTerminationSignal(std::chrono::milliseconds(100));
      if (done) break;
      if (leave_at && std::chrono::steady_clock::now() >= *leave_at) {
        // The node did not answer the cancel in time (it may be gone): stop waiting.
        gave_up = true;
        ctx.TryCancel();
        break;
      }
      if (!sig) continue;
      if (++seen > 1) std::_Exit(kExitCancelled);
      std::string id;
      {
        std::lock_guard lock(id_mu);
        id = command_id;
      }
      if (id.empty()) std::_Exit(kExitCancelled);
      std::fprintf(stderr,
                   "interrupted: cancelling command %s (waiting up to %llds for its result; "
                   "again to leave now)\n",
                   id.c_str(), static_cast<long long>(kCancelWait.count()));
      edge::admin::v1::CancelCommandRequest c;
      c.set_command_id(id);
      c.set_reason("interrupted by the operator");
      edge::admin::v1::CancelCommandResponse cr;
      grpc::ClientContext cctx;
      cctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      auto cst = stub->CancelCommand(&cctx, c, &cr);
      if (!cst.ok()) {
        // Not delivered (the node is not connected, or the controller is gone): no result
        // will come soon.
        std::fprintf(stderr, "cancel not delivered: %s\n", cst.error_message().c_str());
        gave_up = true;
        ctx.TryCancel();
        break;
      }
      leave_at = std::chrono::steady_clock::now() + kCancelWait;
    }
  });
  struct Join {
    std::atomic<bool>& done;
    std::thread& t;
    ~Join() {
      done = true;
      // Wake its wait at once (a thread-directed SIGTERM, blocked everywhere, is taken by
      // its sigtimedwait and ignored because `done` is set) instead of after the timeout.
      ::pthread_kill(t.native_handle(), SIGTERM);
      t.join();
    }
  } join{done, watcher};

  const bool as_json = o.format == "json";
  edge::admin::v1::InvokeEvent ev;
  std::optional<edge::admin::v1::CommandOutcome> result;
  std::string out, err;
  bool streamed = false;
  while (reader->Read(&ev)) {
    switch (ev.event_case()) {
      case edge::admin::v1::InvokeEvent::kAccepted: {
        std::lock_guard lock(id_mu);
        command_id = ev.accepted().command_id();
        if (o.detach) std::cout << command_id << "\n";
        break;
      }
      case edge::admin::v1::InvokeEvent::kStdout:
        streamed = true;
        if (as_json) {
          out += ev.stdout();
        } else {
          std::fwrite(ev.stdout().data(), 1, ev.stdout().size(), stdout);
          std::fflush(stdout);
        }
        break;
      case edge::admin::v1::InvokeEvent::kStderr:
        streamed = true;
        if (as_json) {
          err += ev.stderr();
        } else {
          std::fwrite(ev.stderr().data(), 1, ev.stderr().size(), stderr);
          std::fflush(stderr);
        }
        break;
      case edge::admin::v1::InvokeEvent::kStatus:
        if (ev.status().state() == "node_disconnected" && !as_json) {
          std::fprintf(stderr, "note: %s\n", ev.status().message().c_str());
        }
        break;
      case edge::admin::v1::InvokeEvent::kResult:
        result = ev.result();
        break;
      case edge::admin::v1::InvokeEvent::EVENT_NOT_SET:
        break;
    }
  }
  auto st = reader->Finish();
  if (gave_up && !result) {
    std::fprintf(stderr,
                 "interrupted: left without the result of command %s; see `edge-controller "
                 "command get %s`\n",
                 command_id.c_str(), command_id.c_str());
    return kExitCancelled;
  }
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && !command_id.empty()) {
      std::fprintf(stderr,
                   "error: no result for command %s within its deadline + 60s; see "
                   "`edge-controller command get %s`\n",
                   command_id.c_str(), command_id.c_str());
      return kExitTimedOut;
    }
    return EdgeRpcFailed(*cfg, st, true);
  }
  if (o.detach) return kExitOk;
  if (!result) {
    std::fprintf(stderr, "error: the controller ended the call without a result\n");
    return kExitFailure;
  }
  const json outcome = OutcomeJson(*result);
  if (as_json) {
    json j = {{"command_id", command_id}, {"result", outcome}, {"stdout", out}, {"stderr", err}};
    std::cout << Dump(j) << "\n";
    return OutcomeExit(command_id, *result, true);
  }
  if (result->outcome() == "ok" && !result->payload_json().empty()) {
    const json& payload = outcome["payload"];
    const bool exec_like =
        payload.is_object() && (payload.contains("stdout") || payload.contains("stderr"));
    if (!exec_like) {
      std::cout << (payload.is_string() ? payload.get<std::string>() : Dump(payload, 2)) << "\n";
    } else if (!streamed) {
      // The node sent its output only in the result: show it as a stream would have.
      for (auto [key, fp] : {std::pair{"stdout", stdout}, std::pair{"stderr", stderr}}) {
        if (payload.contains(key) && payload[key].is_string()) {
          const std::string text = payload[key].get<std::string>();
          std::fwrite(text.data(), 1, text.size(), fp);
        }
      }
    }
  }
  std::fflush(stdout);
  return OutcomeExit(command_id, *result, false);
}

int Commands(const edge::cli::GlobalOptions& opts, const std::string& node, int limit,
             const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::ListCommandsRequest req;
  req.set_node_id(node);
  req.set_limit(limit);
  edge::admin::v1::ListCommandsResponse resp;
  auto st = AdminStub(*cfg)->ListCommands(Ctx().get(), req, &resp);
  if (!st.ok()) return RpcFailed(*cfg, st);
  if (format == "json") {
    json arr = json::array();
    for (const auto& c : resp.commands())
      arr.push_back(CommandJson(c));
    std::cout << Dump(arr) << "\n";
    return kExitOk;
  }
  std::printf("%-36s %-16s %-12s %-10s %-10s %-5s %s\n", "COMMAND", "NODE", "TOOL", "STATE",
              "OUTCOME", "EXIT", "CREATED");
  for (const auto& c : resp.commands()) {
    std::string exit = c.has_result() ? std::to_string(c.result().exit_code()) : "-";
    std::printf("%-36s %-16s %-12s %-10s %-10s %-5s %s\n", c.command_id().c_str(),
                c.node_id().c_str(), c.tool().c_str(), c.state().c_str(),
                c.has_result() ? c.result().outcome().c_str() : "-", exit.c_str(),
                IsoTime(c.created_at_epoch_ms()).c_str());
  }
  return kExitOk;
}

int CommandGet(const edge::cli::GlobalOptions& opts, const std::string& id,
               const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::GetCommandRequest req;
  req.set_command_id(id);
  edge::admin::v1::CommandInfo c;
  auto st = AdminStub(*cfg)->GetCommand(Ctx().get(), req, &c);
  if (!st.ok()) return RpcFailed(*cfg, st);
  json j = CommandJson(c);
  if (format == "json") {
    std::cout << Dump(j) << "\n";
    return kExitOk;
  }
  std::cout << "command:   " << c.command_id() << "\n"
            << "node:      " << c.node_id() << "\n"
            << "tool:      " << c.tool() << "\n"
            << "args:      " << Dump(j["args"]) << "\n"
            << "state:     " << c.state() << "\n"
            << "created:   " << IsoTimeMs(c.created_at_epoch_ms()) << "\n";
  if (c.has_result()) {
    const auto& r = c.result();
    std::cout << "completed: " << IsoTimeMs(c.completed_at_epoch_ms()) << "\n"
              << "outcome:   " << r.outcome() << "\n"
              << "exit code: " << r.exit_code() << "\n";
    if (!r.code().empty()) std::cout << "code:      " << r.code() << "\n";
    if (!r.message().empty()) std::cout << "message:   " << r.message() << "\n";
    if (r.duration_ms()) std::cout << "duration:  " << r.duration_ms() << " ms\n";
    if (!r.payload_json().empty())
      std::cout << "payload:   " << Dump(j["result"]["payload"], 2) << "\n";
  }
  return kExitOk;
}

// The unary node commands: cancel, drain, shutdown, push-config, revoke.
template <typename Req, typename Resp, typename Call>
int NodeCall(const edge::cli::GlobalOptions& opts, const Req& req, Call call,
             const std::function<void(const Resp&)>& on_ok) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  auto channel = ConnectedAdminChannel(*cfg);
  if (!channel) return kExitFailure;
  auto stub = edge::admin::v1::AdminService::NewStub(channel);
  Resp resp;
  auto ctx = Ctx();
  auto st = ((*stub).*call)(ctx.get(), req, &resp);
  if (!st.ok()) return EdgeRpcFailed(*cfg, st, true);
  on_ok(resp);
  return kExitOk;
}

int ConfigCheck(const edge::cli::GlobalOptions& opts) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  std::cout << edge::config::DumpRedacted(*cfg);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Destroyed last: gRPC has finished shutting down before the process exits.
  edge::GrpcShutdownAtExit grpc_shutdown_at_exit;
  edge::IgnoreFatalIoSignals();
  CLI::App app{"edge-controller: the bundled minimal controller for edge-agent", "edge-controller"};
  app.set_version_flag("-V,--version", EDGE_VERSION);
  app.require_subcommand(1);
  edge::cli::GlobalOptions opts;
  edge::cli::AddGlobalOptions(app, opts, "/etc/edge-controller/controller.yaml");

  auto* serve = app.add_subcommand("serve", "run the controller (gRPC + admin socket)");
  std::string status_format;
  auto* status = app.add_subcommand("status", "ask the running controller for its status");
  edge::cli::AddFormatOption(status, status_format);
  auto* config = app.add_subcommand("config", "configuration commands");
  config->require_subcommand(1);
  auto* check = config->add_subcommand(
      "check",
      "validate the config; print it with secrets redacted (exit 0) or the errors (exit 2)");
  auto* token = app.add_subcommand("token", "join tokens for enrolling agents");
  token->require_subcommand(1);
  std::string tok_node, tok_tenant, tok_ttl, tok_format, tok_id;
  bool tok_all = false, tok_replace = false;
  auto* tok_create = token->add_subcommand(
      "create",
      "create a single-use join token (without --node it enrolls only a node id the "
      "controller has never seen)");
  tok_create->add_option("--node", tok_node, "bind the token to this node id");
  tok_create->add_flag("--replace", tok_replace,
                       "with --node: the token may re-enroll that node although it exists, "
                       "replacing its identity (key, certificate) and lifting a revocation");
  tok_create->add_option("--tenant", tok_tenant, "tenant of the node (default: default)");
  tok_create->add_option("--ttl", tok_ttl,
                         "lifetime, e.g. 30m or 1h (default: tokens.default_ttl)");
  edge::cli::AddFormatOption(tok_create, tok_format);
  auto* tok_list = token->add_subcommand("list", "list join tokens (active ones unless --all)");
  tok_list->add_flag("--all", tok_all, "include used, revoked and expired tokens");
  edge::cli::AddFormatOption(tok_list, tok_format);
  auto* tok_revoke = token->add_subcommand("revoke", "revoke a join token by id");
  tok_revoke->add_option("token_id", tok_id, "the token id")->required();
  std::string nodes_format;
  auto* nodes = app.add_subcommand("nodes", "list enrolled nodes");
  edge::cli::AddFormatOption(nodes, nodes_format);
  auto* version = app.add_subcommand("version", "print the version");

  InvokeOptions inv;
  auto* invoke = app.add_subcommand(
      "invoke",
      "run a tool on a node: streams its stdout/stderr, prints the result and exits with the "
      "tool's exit code (error 1, node not connected 69, timed out 124, cancelled 130)");
  invoke->add_option("--node", inv.node, "node id")->required();
  invoke->add_option("--tool", inv.tool, "tool name, e.g. exec, sysinfo, file.read")->required();
  invoke->add_option("--arg", inv.args,
                     "argument key=value (repeatable); a value that is a JSON number, boolean, "
                     "array or object is passed typed, a JSON \"string\" unquoted, anything "
                     "else as a string");
  invoke->add_option("--args-json", inv.args_json, "arguments as a JSON object (--arg wins)");
  invoke->add_option("--context", inv.context, "security context name on the node");
  invoke->add_option("--deadline", inv.deadline,
                     "deadline on the node, e.g. 30s (default: its own)");
  invoke->add_flag("--detach", inv.detach, "print only the command id and return at once");
  edge::cli::AddFormatOption(invoke, inv.format);

  std::string cmds_node, cmds_format;
  int cmds_limit = 100;
  auto* commands = app.add_subcommand("commands", "list commands, newest first");
  commands->add_option("--node", cmds_node, "only this node's commands");
  commands->add_option("--limit", cmds_limit, "at most this many")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  edge::cli::AddFormatOption(commands, cmds_format);

  auto* command = app.add_subcommand("command", "one command");
  command->require_subcommand(1);
  std::string cmd_id, cmd_format;
  auto* command_get = command->add_subcommand("get", "show a command and its result");
  command_get->add_option("command_id", cmd_id, "the command id")->required();
  edge::cli::AddFormatOption(command_get, cmd_format);

  std::string cancel_id, cancel_reason;
  auto* cancel = app.add_subcommand("cancel", "cancel a running command");
  cancel->add_option("--command", cancel_id, "command id")->required();
  cancel->add_option("--reason", cancel_reason, "why (shown in the result)");

  std::string drain_node;
  auto* drain =
      app.add_subcommand("drain", "tell a node to refuse new work and finish what it runs");
  drain->add_option("--node", drain_node, "node id")->required();

  std::string shutdown_node, shutdown_grace = "10s";
  auto* shutdown = app.add_subcommand(
      "shutdown", "tell a node's agent to exit after cancelling what still runs after --grace");
  shutdown->add_option("--node", shutdown_node, "node id")->required();
  shutdown->add_option("--grace", shutdown_grace, "grace period")->capture_default_str();

  std::string push_node, push_file, push_version;
  auto* push = app.add_subcommand(
      "push-config", "send a partial agent config (YAML or JSON file, '-' = stdin) to a node");
  push->add_option("--node", push_node, "node id")->required();
  push->add_option("file", push_file, "the config delta")->required();
  push->add_option("--version", push_version, "version label (default: v<epoch ms>)");

  std::string revoke_node;
  auto* revoke = app.add_subcommand(
      "revoke-node",
      "revoke a node: its tokens stop working and its stream is closed; it stays revoked until "
      "a token from `token create --node N --replace` re-enrolls it");
  revoke->add_option("--node", revoke_node, "node id")->required();
  // Command groups in files of their own (common/cli.h CommandRunner).
  std::vector<edge::cli::CommandRunner> groups;
  groups.push_back(edge::controller::AddComputeCommands(app, opts));

  if (int rc = edge::cli::Parse(app, argc, argv); rc >= 0) return rc;
  if (*version) {
    std::cout << "edge-controller " << EDGE_VERSION << "\n";
    return kExitOk;
  }
  // Commands other than `serve` log only warnings by default: their output is the answer.
  if (!*serve && !edge::cli::InitLogging(opts, "warn")) return kExitUsage;
  if (*serve) return Serve(opts);
  if (*status) return Status(opts, status_format);
  if (*check) return ConfigCheck(opts);
  if (*tok_create) return TokenCreate(opts, tok_node, tok_tenant, tok_ttl, tok_replace, tok_format);
  if (*tok_list) return TokenList(opts, tok_all, tok_format);
  if (*tok_revoke) return TokenRevoke(opts, tok_id);
  if (*nodes) return Nodes(opts, nodes_format);
  if (*invoke) return Invoke(opts, inv);
  if (*commands) return Commands(opts, cmds_node, cmds_limit, cmds_format);
  if (*command_get) return CommandGet(opts, cmd_id, cmd_format);
  namespace apb = edge::admin::v1;
  using Stub = apb::AdminService::Stub;
  if (*cancel) {
    apb::CancelCommandRequest req;
    req.set_command_id(cancel_id);
    req.set_reason(cancel_reason);
    return NodeCall<apb::CancelCommandRequest, apb::CancelCommandResponse>(
        opts, req, &Stub::CancelCommand,
        [&](const auto&) { std::cout << "cancel sent for command " << cancel_id << "\n"; });
  }
  if (*drain) {
    apb::DrainNodeRequest req;
    req.set_node_id(drain_node);
    return NodeCall<apb::DrainNodeRequest, apb::DrainNodeResponse>(
        opts, req, &Stub::DrainNode,
        [&](const auto&) { std::cout << "drain sent to node " << drain_node << "\n"; });
  }
  if (*shutdown) {
    auto grace = edge::config::ParseDuration(shutdown_grace);
    if (!grace) {
      std::fprintf(stderr, "error: --grace \"%s\" must be a duration, such as 10s\n",
                   shutdown_grace.c_str());
      return kExitUsage;
    }
    apb::ShutdownNodeRequest req;
    req.set_node_id(shutdown_node);
    req.set_grace_ms(grace->count());
    return NodeCall<apb::ShutdownNodeRequest, apb::ShutdownNodeResponse>(
        opts, req, &Stub::ShutdownNode,
        [&](const auto&) { std::cout << "shutdown sent to node " << shutdown_node << "\n"; });
  }
  if (*push) {
    std::string delta;
    if (push_file == "-") {
      delta.assign(std::istreambuf_iterator<char>(std::cin), {});
    } else {
      auto text = edge::ReadFile(push_file, 4 << 20);
      if (!text) {
        std::fprintf(stderr, "error: cannot read %s: %s\n", push_file.c_str(),
                     text.error().message.c_str());
        return kExitUsage;
      }
      delta = std::move(*text);
    }
    apb::PushConfigRequest req;
    req.set_node_id(push_node);
    req.set_delta(delta);
    req.set_version(push_version);
    return NodeCall<apb::PushConfigRequest, apb::PushConfigResponse>(
        opts, req, &Stub::PushConfig, [&](const apb::PushConfigResponse& r) {
          std::cout << "config version " << r.version() << " sent to node " << push_node << "\n";
        });
  }
  if (*revoke) {
    apb::RevokeNodeRequest req;
    req.set_node_id(revoke_node);
    return NodeCall<apb::RevokeNodeRequest, apb::RevokeNodeResponse>(
        opts, req, &Stub::RevokeNode,
        [&](const auto&) { std::cout << "node " << revoke_node << " revoked\n"; });
  }
  for (const auto& group : groups) {
    if (auto rc = group()) return *rc;
  }
  return kExitUsage;
}
