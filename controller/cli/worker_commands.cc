#include "controller/cli/worker_commands.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "common/json_parse.h"
#include "common/random.h"
#include "config/controller_config.h"
#include "controller/cli/admin_cli.h"
#include "http/client.h"
#include "http/url.h"
#include "worker_admin.grpc.pb.h"

namespace edge::controller::cli {
namespace {

namespace apb = edge::admin::v1;
using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;
using nlohmann::json;

struct State {
  std::string workers_format;
  // worker call
  std::string worker, method, params, lease, ttl, timeout = "5m";
  bool stream = false;
  // sandbox …
  std::string sandbox, image, provider, owner, sandbox_ttl;
  std::vector<std::string> command;
  std::string exec_timeout;
};

int Workers(const edge::cli::GlobalOptions& opts, const State& s) {
  auto admin = OpenAdmin<apb::WorkerAdmin>(opts);
  if (!admin) return admin.error();
  auto& [cfg, stub] = *admin;
  apb::ListWorkersResponse resp;
  auto st = stub->ListWorkers(CallContext().get(), {}, &resp);
  if (!st.ok()) return ReportRpcFailure(cfg, st);
  if (s.workers_format == "json") {
    json out = json::array();
    for (const auto& w : resp.workers()) {
      out.push_back(
          {{"worker_id", w.worker_id()},
           {"state", w.state()},
           {"reported_status", w.reported_status()},
           {"hostname", w.hostname()},
           {"rpc_url", w.rpc_url()},
           {"capacity",
            {{"max_sandboxes", w.max_sandboxes()},
             {"max_sandboxes_per_owner", w.max_sandboxes_per_owner()},
             {"preview_domain", w.preview_domain()}}},
           {"providers", std::vector<std::string>(w.providers().begin(), w.providers().end())},
           {"capabilities",
            std::vector<std::string>(w.capabilities().begin(), w.capabilities().end())},
           {"last_heartbeat", JsonTime(w.last_heartbeat_epoch_ms())},
           {"first_seen", JsonTime(w.first_seen_epoch_ms())},
           {"heartbeats", w.heartbeats()},
           {"remote_addr", w.remote_addr()}});
    }
    std::cout << Dump(json{{"workers", out}}) << "\n";
    return kExitOk;
  }
  std::printf("%-24s %-9s %-20s %-32s %-9s %s\n", "WORKER", "STATE", "HOSTNAME", "RPC_URL",
              "CAPACITY", "LAST HEARTBEAT");
  for (const auto& w : resp.workers()) {
    std::printf("%-24s %-9s %-20s %-32s %-9s %s\n", w.worker_id().c_str(), w.state().c_str(),
                w.hostname().c_str(), w.rpc_url().empty() ? "-" : w.rpc_url().c_str(),
                std::to_string(w.max_sandboxes()).c_str(),
                IsoTime(w.last_heartbeat_epoch_ms()).c_str());
  }
  if (resp.workers().empty()) std::fprintf(stderr, "no worker has sent a heartbeat yet\n");
  return kExitOk;
}

// One call to a worker's /rpc, prepared by the controller.
struct Call {
  std::string worker;
  std::string method;  // "worker.exec"
  json params = json::object();
  std::string lease_resource;  // "" = no lease
  std::chrono::milliseconds lease_ttl{0};
  std::chrono::milliseconds timeout{300'000};
  bool stream = false;
};

struct CallOutcome {
  int exit_code = kExitOk;
  unsigned http_status = 0;
  json answer;  // the response envelope (not for streams)
};

// "exec" → "worker.exec".
std::string MethodName(const std::string& m) {
  return m.rfind("worker.", 0) == 0 ? m : "worker." + m;
}

http::ClientOptions ClientOptionsFor(const config::ControllerConfig& cfg, const http::Url& url,
                                     std::chrono::milliseconds timeout) {
  http::ClientOptions o;
  o.timeout = timeout;
  if (url.tls) {
    const auto& t = cfg.worker.rpc_client_tls;
    o.tls = http::ClientTls{.ca_file = t.ca_file,
                            .insecure_skip_verify = t.insecure_skip_verify,
                            .cert_file = t.cert_file,
                            .key_file = t.key_file,
                            .server_name = url.host};
  }
  return o;
}

// Prints an answer's error to stderr; true when there was one.
bool ReportWorkerError(const json& answer, unsigned status) {
  auto it = answer.find("error");
  if (it == answer.end() || it->is_null()) return status >= 300;
  std::string code = answer.value("code", "");
  std::fprintf(stderr, "error: the worker answered %u%s%s: %s\n", status, code.empty() ? "" : " ",
               code.c_str(), it->is_string() ? it->get<std::string>().c_str() : it->dump().c_str());
  return true;
}

CallOutcome RunCall(const edge::cli::GlobalOptions& opts, const Call& c, bool print_answer) {
  auto admin = OpenAdmin<apb::WorkerAdmin>(opts);
  if (!admin) return {admin.error()};
  auto& [cfg, stub] = *admin;
  apb::PrepareWorkerCallRequest preq;
  preq.set_worker_id(c.worker);
  preq.set_lease_resource(c.lease_resource);
  preq.set_lease_ttl_ms(c.lease_ttl.count());
  apb::PrepareWorkerCallResponse plan;
  auto st = stub->PrepareWorkerCall(CallContext().get(), preq, &plan);
  if (!st.ok()) return {ReportRpcFailure(cfg, st)};
  if (plan.worker_state() == "stale") {
    std::fprintf(stderr, "warning: worker %s is stale (no heartbeat for two intervals)\n",
                 c.worker.c_str());
  }
  auto url = http::ParseUrl(plan.rpc_url(), "the worker's rpc_url");
  if (!url) {
    std::fprintf(stderr, "error: %s\n", url.error().message.c_str());
    return {kExitFailure};
  }
  const std::string request_id = NewUuidV4();
  json envelope = {
      {"id", request_id}, {"method", c.method}, {"worker_id", c.worker}, {"params", c.params}};
  if (plan.has_lease()) {
    const auto& l = plan.lease();
    envelope["lease"] = {{"resource_id", l.resource_id()},
                         {"holder_id", l.holder_id()},
                         {"generation", l.generation()},
                         {"expires_at", l.expires_at()}};
    std::fprintf(stderr, "lease on %s for %s: generation %lld until %s\n", l.resource_id().c_str(),
                 l.holder_id().c_str(), static_cast<long long>(l.generation()),
                 l.expires_at().c_str());
  }
  auto client = http::Client::Connect(url->host, url->port, ClientOptionsFor(cfg, *url, c.timeout));
  if (!client) {
    std::fprintf(stderr, "error: worker %s at %s: %s\n", c.worker.c_str(), plan.rpc_url().c_str(),
                 client.error().message.c_str());
    return {kExitNodeUnavailable};
  }
  http::Request req{.method = "POST",
                    .target = url->base_path + "/rpc",
                    .headers = {{"X-Worker-ID", c.worker},
                                {"X-Worker-Token", plan.token()},
                                {"X-Request-ID", request_id},
                                {"Content-Type", "application/json"}},
                    .body = Dump(envelope),
                    .keep_alive = false};
  if (!c.stream) {
    auto resp = (*client)->Send(req);
    if (!resp) {
      std::fprintf(stderr, "error: worker %s: %s\n", c.worker.c_str(),
                   resp.error().message.c_str());
      return {kExitNodeUnavailable};
    }
    auto answer = ParseJsonBounded(resp->body, "the worker's answer");
    if (!answer) {
      std::fprintf(stderr, "error: worker %s answered %u with %s\n", c.worker.c_str(), resp->status,
                   answer.error().message.c_str());
      return {kExitFailure, resp->status};
    }
    if (print_answer) std::cout << Dump(*answer, 2) << "\n";
    const bool failed = ReportWorkerError(*answer, resp->status);
    return {failed ? kExitFailure : kExitOk, resp->status, std::move(*answer)};
  }
  // NDJSON: one full response per line, printed as each arrives.
  req.headers.emplace_back("X-Worker-Stream", "ndjson");
  std::string pending;
  bool failed = false;
  auto on_line = [&](std::string_view line) {
    if (line.empty()) return;
    std::cout << line << "\n" << std::flush;
    auto j = ParseJsonBounded(line, "an NDJSON line");
    if (j && j->is_object() && j->contains("error") && !(*j)["error"].is_null()) {
      failed = true;
      ReportWorkerError(*j, 200);
    }
  };
  auto resp = (*client)->SendStreaming(req, [&](std::string_view data) {
    // The new bytes are searched for newlines (what came before holds none), each line they
    // complete is handled, then what is left moves to the front once: not after each line (a
    // megabyte piece of short lines would move its rest thousands of times), and a long line
    // arriving in many pieces is not searched again from its start each time.
    size_t scan = pending.size();
    pending.append(data);
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', scan)) != std::string::npos; scan = start) {
      on_line(std::string_view(pending).substr(start, nl - start));
      start = nl + 1;
    }
    pending.erase(0, start);
    return true;
  });
  if (!resp) {
    std::fprintf(stderr, "error: worker %s: %s\n", c.worker.c_str(), resp.error().message.c_str());
    return {kExitNodeUnavailable};
  }
  on_line(pending);
  if (resp->status != 200) {
    std::fprintf(stderr, "error: the worker answered %u\n", resp->status);
    failed = true;
  }
  return {failed ? kExitFailure : kExitOk, resp->status};
}

std::optional<std::chrono::milliseconds> OptionalDuration(const std::string& flag,
                                                          const std::string& value,
                                                          const std::string& example) {
  if (value.empty()) return std::chrono::milliseconds(0);
  return ParseDurationFlag(flag, value, std::chrono::seconds(1), example);
}

int WorkerCall(const edge::cli::GlobalOptions& opts, const State& s) {
  Call c{.worker = s.worker,
         .method = MethodName(s.method),
         .lease_resource = s.lease,
         .stream = s.stream};
  if (!s.params.empty()) {
    std::string text = s.params;
    if (text.starts_with("@")) {
      auto file = ReadFile(text.substr(1), 64 << 20);
      if (!file) {
        std::fprintf(stderr, "error: --params %s: %s\n", text.c_str(),
                     file.error().message.c_str());
        return kExitUsage;
      }
      text = std::move(*file);
    }
    auto params = ParseJsonBounded(text, "--params");
    if (!params || !params->is_object()) {
      std::fprintf(stderr, "error: --params must be a JSON object (or @file holding one)%s%s\n",
                   params ? "" : ": ", params ? "" : params.error().message.c_str());
      return kExitUsage;
    }
    c.params = std::move(*params);
  }
  auto ttl = OptionalDuration("--ttl", s.ttl, "5m");
  auto timeout = OptionalDuration("--timeout", s.timeout, "5m");
  if (!ttl || !timeout) return kExitUsage;
  if (!s.ttl.empty() && s.lease.empty()) {
    std::fprintf(stderr, "error: --ttl is the lease's lifetime: it needs --lease RESOURCE\n");
    return kExitUsage;
  }
  c.lease_ttl = *ttl;
  c.timeout = *timeout;
  return RunCall(opts, c, true).exit_code;
}

int SandboxSpawn(const edge::cli::GlobalOptions& opts, const State& s) {
  auto ttl = OptionalDuration("--lease-ttl", s.ttl, "5m");
  if (!ttl) return kExitUsage;
  Call c{
      .worker = s.worker, .method = "worker.spawn", .lease_resource = s.sandbox, .lease_ttl = *ttl};
  c.params = {{"sandbox_id", s.sandbox}};
  if (!s.image.empty()) c.params["image"] = s.image;
  if (!s.provider.empty()) c.params["provider"] = s.provider;
  if (!s.owner.empty()) c.params["owner_id"] = s.owner;
  if (!s.sandbox_ttl.empty()) c.params["ttl"] = s.sandbox_ttl;
  return RunCall(opts, c, true).exit_code;
}

int SandboxExec(const edge::cli::GlobalOptions& opts, const State& s) {
  if (s.command.empty()) {
    std::fprintf(stderr, "error: give the command after --, e.g. -- /bin/echo hello\n");
    return kExitUsage;
  }
  Call c{.worker = s.worker, .method = "worker.exec"};
  c.params = {{"sandbox_id", s.sandbox},
              {"command", s.command.front()},
              {"args", std::vector<std::string>(s.command.begin() + 1, s.command.end())},
              {"mode", "argv"}};
  if (!s.exec_timeout.empty()) c.params["timeout"] = s.exec_timeout;
  auto out = RunCall(opts, c, false);
  if (out.exit_code != kExitOk) return out.exit_code;
  const json& r = out.answer.value("result", json::object());
  std::cout << r.value("stdout", "") << std::flush;
  std::cerr << r.value("stderr", "") << std::flush;
  return r.value("exit_code", 0);
}

int SandboxDestroy(const edge::cli::GlobalOptions& opts, const State& s) {
  auto ttl = OptionalDuration("--lease-ttl", s.ttl, "5m");
  if (!ttl) return kExitUsage;
  Call c{.worker = s.worker,
         .method = "worker.destroy",
         .lease_resource = s.sandbox,
         .lease_ttl = *ttl};
  c.params = {{"sandbox_id", s.sandbox}};
  auto out = RunCall(opts, c, true);
  if (out.exit_code != kExitOk) return out.exit_code;
  // The worker confirmed the teardown: the lease goes back (the contract's destroy).
  auto admin = OpenAdmin<apb::WorkerAdmin>(opts);
  if (!admin) return admin.error();
  apb::ReleaseWorkerLeaseRequest req;
  req.set_worker_id(s.worker);
  req.set_resource_id(s.sandbox);
  apb::ReleaseWorkerLeaseResponse resp;
  auto st = admin->stub->ReleaseWorkerLease(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(admin->cfg, st);
  std::fprintf(stderr, "lease on %s released\n", s.sandbox.c_str());
  return kExitOk;
}

}  // namespace

edge::cli::CommandRunner AddWorkerCommands(CLI::App& app, const edge::cli::GlobalOptions& opts) {
  auto s = std::make_shared<State>();
  auto* workers = app.add_subcommand(
      "workers",
      "list workers that heartbeat to this controller: id, state (online, draining, "
      "stale after two missed intervals), hostname, rpc_url, capacity, last "
      "heartbeat");
  edge::cli::AddFormatOption(workers, s->workers_format);

  auto* worker = app.add_subcommand("worker", "call a worker's POST /rpc");
  worker->require_subcommand(1);
  auto* call = worker->add_subcommand(
      "call",
      "call one worker RPC method with a freshly minted aud=worker:rpc token and print the "
      "answer; exit 0 ok, 1 the worker or controller refused, 2 usage, 69 worker unreachable");
  call->add_option("--worker", s->worker, "worker id")->required();
  call->add_option("--method", s->method, "method, e.g. exec or worker.exec")->required();
  call->add_option("--params", s->params, "params: a JSON object, or @FILE");
  call->add_option("--lease", s->lease,
                   "acquire the lease on this resource (sandbox id) for the worker and present "
                   "it");
  call->add_option("--ttl", s->ttl, "the lease's lifetime (default worker.lease_ttl)");
  call->add_option("--timeout", s->timeout,
                   "how long to wait for each part of the answer (a stream may last longer "
                   "while it keeps coming)")
      ->capture_default_str();
  call->add_flag("--stream", s->stream,
                 "ask for NDJSON (X-Worker-Stream) and print each line as it arrives");

  auto* sandbox = app.add_subcommand("sandbox", "short forms of worker calls on a sandbox");
  sandbox->require_subcommand(1);
  auto* spawn = sandbox->add_subcommand("spawn", "acquire the sandbox's lease and spawn it");
  auto* exec = sandbox->add_subcommand(
      "exec", "run a command in a sandbox (argv mode); its output and exit code are ours");
  auto* destroy = sandbox->add_subcommand(
      "destroy", "destroy a sandbox under its lease, then release the lease");
  for (auto* sub : {spawn, exec, destroy}) {
    sub->add_option("--worker", s->worker, "worker id")->required();
    sub->add_option("--sandbox", s->sandbox, "sandbox id")->required();
  }
  for (auto* sub : {spawn, destroy}) {
    sub->add_option("--lease-ttl", s->ttl, "the lease's lifetime (default worker.lease_ttl)");
  }
  spawn->add_option("--image", s->image, "image");
  spawn->add_option("--provider", s->provider, "provider (default: the worker's)");
  spawn->add_option("--owner", s->owner, "owner id");
  spawn->add_option("--ttl", s->sandbox_ttl, "the sandbox's lifetime, e.g. 1h");
  exec->add_option("--timeout", s->exec_timeout, "the command's time limit, e.g. 30s");
  exec->add_option("command", s->command, "-- COMMAND [ARG...]")->required();

  return [s, workers, call, spawn, exec, destroy, &opts]() -> std::optional<int> {
    if (*workers) return Workers(opts, *s);
    if (*call) return WorkerCall(opts, *s);
    if (*spawn) return SandboxSpawn(opts, *s);
    if (*exec) return SandboxExec(opts, *s);
    if (*destroy) return SandboxDestroy(opts, *s);
    return std::nullopt;
  };
}

}  // namespace edge::controller::cli
