#include "agent/edge/command_dispatcher.h"

#include <google/protobuf/util/time_util.h>

#include "agent/edge/result_mapper.h"
#include "common/log.h"

namespace edge::agentedge {
namespace {

namespace pb = aegis::cluster::v1;
using google::protobuf::util::TimeUtil;
using std::chrono::milliseconds;

// The parts of the config the capabilities and the executor's tool rules come from.
nlohmann::json CapabilityInputs(const config::AgentConfig& c) {
  nlohmann::json tools = nlohmann::json::object();
  for (const auto& [name, t] : c.tools) {
    tools[name] = {{"command", t.command},
                   {"timeout_ms", t.timeout.count()},
                   {"security_context", t.security_context}};
  }
  nlohmann::json contexts = nlohmann::json::object();
  for (const auto& [name, s] : c.security_contexts) {
    contexts[name] = {{"allowed_tools", s.allowed_tools},
                      {"run_as", s.run_as},
                      {"mount_points", s.mount_points},
                      {"timeout_ms", s.limits.timeout.count()},
                      {"max_output_bytes", s.limits.max_output_bytes},
                      {"max_concurrent", s.limits.max_concurrent},
                      {"max_processes", s.limits.max_processes}};
  }
  return {{"tools", tools}, {"security_contexts", contexts}, {"labels", c.labels}};
}

// google.protobuf.Duration's own range and sign rules.
bool ValidDuration(const google::protobuf::Duration& d) {
  constexpr int64_t kMaxSeconds = 315'576'000'000;
  if (d.seconds() < -kMaxSeconds || d.seconds() > kMaxSeconds) return false;
  if (d.nanos() <= -1'000'000'000 || d.nanos() >= 1'000'000'000) return false;
  return !((d.seconds() < 0 && d.nanos() > 0) || (d.seconds() > 0 && d.nanos() < 0));
}

}  // namespace

Status CheckInnerEnvelope(const pb::InvokeTool& invoke, std::string_view tenant) {
  if (!invoke.has_seal_envelope()) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "invoke_tool.seal_envelope: missing (the inner envelope proves the user)");
  }
  const pb::SealEnvelope& env = invoke.seal_envelope();
  const std::string& token = env.user_security_token();
  if (token.empty()) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "invoke_tool.seal_envelope.user_security_token: empty");
  }
  size_t parts = 1;
  bool empty_part = token.front() == '.' || token.back() == '.';
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] != '.') continue;
    ++parts;
    if (i + 1 < token.size() && token[i + 1] == '.') empty_part = true;
  }
  if (parts != 3 || empty_part) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "invoke_tool.seal_envelope.user_security_token: not a compact JWT (expected "
                     "three non-empty dot-separated parts, got " +
                         std::to_string(parts) + (empty_part ? ", some empty)" : ")"));
  }
  if (tenant.empty()) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "invoke_tool.seal_envelope.tenant_id: this node has no tenant yet (its "
                     "NodeSecurityToken carries no tid)");
  }
  if (env.tenant_id() != tenant) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "invoke_tool.seal_envelope.tenant_id \"" + env.tenant_id() +
                         "\" is not this node's tenant \"" + std::string(tenant) + "\"");
  }
  if (env.security_context_name() != invoke.security_context_name()) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "invoke_tool.seal_envelope.security_context_name \"" +
                         env.security_context_name() +
                         "\" differs from invoke_tool.security_context_name \"" +
                         invoke.security_context_name() + "\"");
  }
  return OkStatus();
}

std::shared_ptr<CommandDispatcher> CommandDispatcher::Create(sandbox::Executor& executor,
                                                             OutboxStore& outbox,
                                                             config::AgentConfig config,
                                                             ApplyConfig apply_config) {
  std::shared_ptr<CommandDispatcher> d(
      new CommandDispatcher(executor, outbox, std::move(config), std::move(apply_config)));
  d->stats_.config_version = d->config_.delta_version;
  return d;
}

void CommandDispatcher::Attach(DispatcherHost* host) {
  std::lock_guard lock(host_mu_);
  host_ = host;
}

void CommandDispatcher::Detach() {
  std::unique_lock lock(host_mu_);
  host_ = nullptr;
  host_cv_.wait(lock, [this] { return host_calls_ == 0; });
}

void CommandDispatcher::WithHost(const std::function<void(DispatcherHost&)>& fn) {
  DispatcherHost* host = nullptr;
  {
    std::lock_guard lock(host_mu_);
    if (host_ == nullptr) return;
    host = host_;
    ++host_calls_;
  }
  fn(*host);
  std::lock_guard lock(host_mu_);
  if (--host_calls_ == 0) host_cv_.notify_all();
}

void CommandDispatcher::SetTenant(std::string tenant) {
  std::lock_guard lock(mu_);
  tenant_ = std::move(tenant);
}

CommandDispatcher::Stats CommandDispatcher::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.running = running_.size();
  return s;
}

config::AgentConfig CommandDispatcher::config() const {
  std::lock_guard lock(mu_);
  return config_;
}

bool CommandDispatcher::draining() const {
  std::lock_guard lock(mu_);
  return stats_.draining;
}

void CommandDispatcher::Handle(const pb::EdgeCommand& command) {
  switch (command.command_case()) {
    case pb::EdgeCommand::kInvokeTool:
      return HandleInvoke(command.invoke_tool());
    case pb::EdgeCommand::kCancel:
      return HandleCancel(command.cancel());
    case pb::EdgeCommand::kPushConfig:
      return HandlePushConfig(command.push_config());
    case pb::EdgeCommand::kDrain:
      return HandleDrain();
    case pb::EdgeCommand::kShutdown:
      return HandleShutdown(command.shutdown());
    case pb::EdgeCommand::COMMAND_NOT_SET:
      break;
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.rejected_commands;
  }
  log::Get("edge")->warn(
      "edge command ignored: it has no known kind (empty, or a kind this agent does not know)");
}

void CommandDispatcher::Complete(const std::string& command_id, const pb::EdgeResult& result) {
  if (auto put = outbox_.Put(command_id, result); !put) {
    log::Get("edge")->error(
        "command {}: the result could not be stored in the outbox ({}); "
        "sending it without a copy on disk",
        command_id, put.error().ToString());
  }
  {
    std::lock_guard lock(mu_);
    running_.erase(command_id);
  }
  log::Get("edge")->info("command {} finished: {}", command_id, DescribeResult(result));
  WithHost([&](DispatcherHost& h) { h.SendResult(command_id, result); });
}

void CommandDispatcher::HandleInvoke(const pb::InvokeTool& invoke) {
  auto log = log::Get("edge");
  const std::string& id = invoke.command_id();
  if (id.empty()) {
    {
      std::lock_guard lock(mu_);
      ++stats_.rejected_commands;
    }
    log->warn(
        "invoke_tool ignored: invoke_tool.command_id is empty, so no result can name it "
        "(tool \"{}\")",
        invoke.tool_name());
    return;
  }
  std::string tenant;
  {
    std::lock_guard lock(mu_);
    if (running_.contains(id)) {
      log->info(
          "invoke_tool {}: already running; the duplicate is ignored (its one result "
          "follows when it ends)",
          id);
      return;
    }
    tenant = tenant_;
  }
  if (auto st = CheckInnerEnvelope(invoke, tenant); !st) {
    log->warn("invoke_tool {} refused: {}", id, st.error().message);
    return Complete(id, ErrorResult(st.error().code, st.error().message));
  }
  if (invoke.tool_name().empty()) {
    return Complete(id, ErrorResult(ErrorCode::kInvalidArgument, "invoke_tool.tool_name: empty"));
  }
  nlohmann::json args = nlohmann::json::object();
  if (invoke.has_args()) {
    auto j = StructToJson(invoke.args(), "invoke_tool.args");
    if (!j) return Complete(id, ErrorResult(ErrorCode::kInvalidArgument, j.error().message));
    args = std::move(*j);
  }
  std::optional<milliseconds> deadline;
  if (invoke.has_deadline()) {
    const auto& d = invoke.deadline();
    if (!ValidDuration(d) || d.seconds() < 0 || d.nanos() < 0) {
      return Complete(id, ErrorResult(ErrorCode::kInvalidArgument,
                                      "invoke_tool.deadline: must be a positive duration, got " +
                                          TimeUtil::ToString(d)));
    }
    const int64_t ms = TimeUtil::DurationToMilliseconds(d);
    if (ms > 0) deadline = milliseconds(ms);
  }

  // A command that already completed gets its stored result, even while draining or at
  // the cap: the controller is asking again for a result it may have missed.
  if (auto stored = executor_.StoredResult(id); stored && stored->has_value()) {
    log->info("command {} already ran: its stored result is sent again", id);
    return Complete(id, ToEdgeResult(**stored, deadline));
  }

  auto running = std::make_shared<Running>();
  {
    std::unique_lock lock(mu_);
    if (stats_.draining || stats_.shutting_down) {
      lock.unlock();
      return Complete(
          id, ErrorResult(ErrorCode::kDraining, "the agent is draining: tool '" +
                                                    invoke.tool_name() + "' was not started"));
    }
    const auto cap =
        static_cast<size_t>(std::max<int64_t>(config_.edge.max_concurrent_commands, 1));
    if (running_.size() >= cap) {
      lock.unlock();
      return Complete(id, ErrorResult(ErrorCode::kResourceExhausted,
                                      "edge.max_concurrent_commands " + std::to_string(cap) +
                                          " commands already running"));
    }
    if (running_.contains(id)) return;  // raced with an identical InvokeTool
    running_[id] = running;
    ++stats_.invoked;
  }
  log->info("command {}: tool {} (security context \"{}\"{})", id, invoke.tool_name(),
            invoke.security_context_name(),
            deadline ? ", deadline " + std::to_string(deadline->count()) + " ms" : "");

  sandbox::InvokeRequest req;
  req.command_id = id;
  req.tool = invoke.tool_name();
  req.args = std::move(args);
  req.security_context = invoke.security_context_name();
  req.timeout = deadline;
  // The output streams as CommandProgress; the result carries only its tail.
  req.collect_tail_bytes = kResultOutputTailBytes;
  std::weak_ptr<CommandDispatcher> weak = weak_from_this();
  sandbox::ChunkSink sink = [weak, id](sandbox::OutputChunk chunk, std::function<void()> ack) {
    auto self = weak.lock();
    if (!self) return ack();
    pb::Chunk c;
    if (chunk.stream == sandbox::OutputStream::kStdout) {
      c.set_stdout(std::move(chunk.data));
    } else {
      c.set_stderr(std::move(chunk.data));
    }
    bool handed = false;
    self->WithHost([&](DispatcherHost& h) {
      handed = true;
      h.SendProgress(id, std::move(c), ack);
    });
    if (!handed) ack();
  };
  executor_.Invoke(std::move(req), running->cancel.token(), std::move(sink),
                   [weak, id, deadline](sandbox::InvokeResult r) {
                     auto self = weak.lock();
                     if (!self) return;
                     if (r.already_running) {
                       // Another door runs this command_id: that run's result is not ours.
                       {
                         std::lock_guard lock(self->mu_);
                         self->running_.erase(id);
                       }
                       log::Get("edge")->info("command {}: {}; the duplicate is ignored", id,
                                              r.error.message);
                       return;
                     }
                     if (r.replayed) {
                       log::Get("edge")->info(
                           "command {} already ran: its stored result is "
                           "sent again",
                           id);
                     }
                     self->Complete(id, ToEdgeResult(r, deadline));
                   });
}

void CommandDispatcher::HandleCancel(const pb::Cancel& cancel) {
  std::shared_ptr<Running> running;
  {
    std::lock_guard lock(mu_);
    auto it = running_.find(cancel.command_id());
    if (it != running_.end()) running = it->second;
  }
  if (!running) {
    log::Get("edge")->info("cancel for command \"{}\" ignored: it is not running here",
                           cancel.command_id());
    return;
  }
  const std::string reason =
      cancel.reason().empty() ? std::string("cancelled by the controller") : cancel.reason();
  log::Get("edge")->info("command {}: cancel ({})", cancel.command_id(), reason);
  running->cancel.Cancel(reason);
}

void CommandDispatcher::HandlePushConfig(const pb::PushConfig& push) {
  auto log = log::Get("edge");
  const std::string version = push.version();
  config::AgentConfig current = config();
  auto next = config::ApplyDelta(current, push.config_delta());
  if (!next) {
    const std::string why = next.error().ToString();
    {
      std::lock_guard lock(mu_);
      stats_.last_config_error = "version \"" + version + "\": " + why;
    }
    log->error("config delta version \"{}\" refused: {}", version, why);
    return;
  }
  next->delta_version = version;
  if (apply_config_) {
    if (auto st = apply_config_(*next); !st) {
      {
        std::lock_guard lock(mu_);
        stats_.last_config_error = "version \"" + version + "\": " + st.error().ToString();
      }
      log->error("config delta version \"{}\" refused by the executor: {}", version,
                 st.error().ToString());
      return;
    }
  }
  const bool changed = CapabilityInputs(current) != CapabilityInputs(*next);
  {
    std::lock_guard lock(mu_);
    config_ = *next;
    stats_.config_version = version;
    stats_.last_config_error.clear();
  }
  log->info("config version \"{}\" applied (heartbeat every {} s{})", version,
            next->cluster.heartbeat_interval_secs,
            changed ? "; tools/security contexts/labels changed" : "");
  WithHost([&](DispatcherHost& h) { h.ConfigApplied(*next, changed); });
}

void CommandDispatcher::HandleDrain() {
  {
    std::lock_guard lock(mu_);
    if (stats_.draining) return;
    stats_.draining = true;
  }
  executor_.Drain();
  log::Get("edge")->info("drain: new commands are refused; {} still running", stats().running);
  WithHost([](DispatcherHost& h) { h.DrainRequested(); });
}

void CommandDispatcher::HandleShutdown(const pb::Shutdown& shutdown) {
  milliseconds grace{0};
  if (shutdown.has_grace() && ValidDuration(shutdown.grace())) {
    grace = milliseconds(std::max<int64_t>(TimeUtil::DurationToMilliseconds(shutdown.grace()), 0));
  } else if (shutdown.has_grace()) {
    log::Get("edge")->warn(
        "shutdown.grace {}s {}ns is not a valid Duration (seconds and nanos must share a sign, "
        "|nanos| < 1e9): shutting down with no grace",
        shutdown.grace().seconds(), shutdown.grace().nanos());
  }
  bool first_drain = false;
  {
    std::lock_guard lock(mu_);
    if (stats_.shutting_down) return;
    stats_.shutting_down = true;
    first_drain = !stats_.draining;
    stats_.draining = true;
  }
  log::Get("edge")->info("shutdown: {} command(s) running get {} ms to finish", stats().running,
                         grace.count());
  if (first_drain) WithHost([](DispatcherHost& h) { h.DrainRequested(); });
  std::weak_ptr<CommandDispatcher> weak = weak_from_this();
  executor_.Shutdown(grace, [weak] {
    if (auto self = weak.lock()) {
      self->WithHost([](DispatcherHost& h) { h.ShutdownFinished(); });
    }
  });
}

}  // namespace edge::agentedge
