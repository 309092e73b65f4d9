#include "agent/edge/command_dispatcher.h"

#include <google/protobuf/util/time_util.h>

#include "agent/edge/result_mapper.h"
#include "common/log.h"
#include "common/utf8.h"

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
                   {"security_context", t.security_context},
                   {"interactive", t.interactive}};
  }
  nlohmann::json contexts = nlohmann::json::object();
  for (const auto& [name, s] : c.security_contexts) {
    contexts[name] = {{"allowed_tools", s.allowed_tools},
                      {"run_as", s.run_as},
                      {"mount_points", s.mount_points},
                      {"require_roles", s.require_roles},
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

pb::EdgeResult FitResult(const std::string& command_id, pb::EdgeResult result,
                         uint64_t max_message_bytes) {
  const size_t size = result.ByteSizeLong();
  const size_t limit =
      max_message_bytes > kResultEnvelopeReserve ? max_message_bytes - kResultEnvelopeReserve : 0;
  if (size <= limit) return result;
  log::Get("edge")->warn(
      "command {}: its result is {} bytes, over the {} that fit edge.max_message_bytes {}; "
      "answered with RESOURCE_EXHAUSTED instead",
      log::Escape(command_id), size, limit, max_message_bytes);
  return ErrorResult(
      ErrorCode::kResourceExhausted,
      "the result is " + std::to_string(size) + " bytes, more than the " + std::to_string(limit) +
          " that fit one edge stream message "
          "(edge.max_message_bytes " +
          std::to_string(max_message_bytes) + "): ask for less (file.read: offset and length)");
}

std::shared_ptr<CommandDispatcher> CommandDispatcher::Create(sandbox::ExecutorApi& executor,
                                                             OutboxStore& outbox,
                                                             config::AgentConfig config,
                                                             ApplyConfig apply_config,
                                                             Clock& clock) {
  std::shared_ptr<CommandDispatcher> d(
      new CommandDispatcher(executor, outbox, std::move(config), std::move(apply_config), clock));
  d->stats_.config_version = d->config_.delta_version;
  {
    std::lock_guard lock(d->mu_);
    d->LoadVerifierLocked();
  }
  // What the previous agent process left unfinished ends now, once, through the outbox
  // (sent when the stream is up), like any result. Its journal row goes only once the outbox
  // has stored it (the daemon makes this door a confirming one), after it in the WAL: should
  // the agent die before, or a power cut take the outbox row, the next start delivers the same
  // stored result again.
  for (const auto& r : executor.TakeInterrupted(kDoor)) {
    if (!d->Complete(r.command_id, ToEdgeResult(r, std::nullopt))) continue;
    if (auto st = executor.ConfirmInterrupted(r.command_id); !st) {
      log::Get("edge")->warn(
          "command {}: its journal row stays ({}); the next start delivers its result again "
          "(the controller keeps the first)",
          log::Escape(r.command_id), st.error().ToString());
    }
  }
  return d;
}

void CommandDispatcher::LoadVerifierLocked() {
  auto v = UserTokenVerifier::Load(config_.security.user_token_issuers);
  if (v) {
    verifier_ = std::move(*v);
    verifier_error_.clear();
    return;
  }
  // Fail closed: with issuers configured but unreadable, no command is accepted.
  verifier_.reset();
  verifier_error_ = v.error().message;
  log::Get("edge")->error("user token issuers cannot be loaded, every command is refused: {}",
                          verifier_error_);
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
  s.running = executor_.running(kDoor);
  s.draining = executor_.draining();
  s.shutting_down = shutting_down_;
  return s;
}

config::AgentConfig CommandDispatcher::config() const {
  std::lock_guard lock(mu_);
  return config_;
}

bool CommandDispatcher::draining() const {
  return executor_.draining();
}

bool CommandDispatcher::Handle(const pb::EdgeCommand& command) {
  // No exception may leave a gRPC callback: it would end the process, or (swallowed) leave
  // the stream unread while heartbeats go on. The command it came from is answered instead.
  try {
    HandleOne(command);
    return true;
  } catch (const std::exception& e) {
    log::Get("edge")->error("edge command failed inside the agent: {}", log::Escape(e.what()));
    if (command.has_invoke_tool() && !command.invoke_tool().command_id().empty()) {
      try {
        Complete(command.invoke_tool().command_id(),
                 ErrorResult(ErrorCode::kInternal,
                             std::string("the agent failed while handling the command: ") +
                                 ToValidUtf8(e.what())));
        return true;
      } catch (const std::exception& again) {
        log::Get("edge")->error("answering the failed command failed too: {}",
                                log::Escape(again.what()));
      }
    }
  } catch (...) {
    log::Get("edge")->error("edge command failed inside the agent (unknown exception)");
  }
  return false;
}

void CommandDispatcher::HandleOne(const pb::EdgeCommand& command) {
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

bool CommandDispatcher::Complete(const std::string& command_id, const pb::EdgeResult& unfitted) {
  const pb::EdgeResult result = FitResult(command_id, unfitted, config().edge.max_message_bytes);
  auto put = outbox_.Put(command_id, result);
  if (!put) {
    log::Get("edge")->error(
        "command {}: the result could not be stored in the outbox ({}); "
        "sending it without a copy on disk",
        log::Escape(command_id), put.error().ToString());
  }
  log::Get("edge")->info("command {} finished: {}", log::Escape(command_id),
                         DescribeResult(result));
  WithHost([&](DispatcherHost& h) { h.SendResult(command_id, result); });
  return put.has_value();
}

// The edge door's own checks of an InvokeTool — what only this wire can know: the inner
// envelope, the user token, the shape of the fields — turned into the executor's request.
// Admission (stored results, drain, duplicates, caps) is the executor's, not the door's.
Result<sandbox::InvokeRequest> CommandDispatcher::ToRequest(const pb::InvokeTool& invoke) {
  const std::string& id = invoke.command_id();
  std::string tenant, verifier_error, node_id;
  std::shared_ptr<const UserTokenVerifier> verifier;
  uint64_t max_message_bytes = 0;
  size_t max_commands = 0;
  {
    std::lock_guard lock(mu_);
    tenant = tenant_;
    verifier = verifier_;
    verifier_error = verifier_error_;
    node_id = config_.node_id;
    max_message_bytes = config_.edge.max_message_bytes;
    max_commands = static_cast<size_t>(std::max<int64_t>(config_.edge.max_concurrent_commands, 1));
  }
  if (auto st = CheckInnerEnvelope(invoke, tenant); !st) return std::unexpected(st.error());
  // Who sent it: the user token's signature and claims (when issuers are configured).
  sandbox::InvokeRequest req;
  if (!verifier) {
    return MakeError(ErrorCode::kUnauthenticated, "security.user_token_issuers cannot be loaded (" +
                                                      verifier_error + "): no command is accepted");
  }
  if (verifier->enabled()) {
    auto who = verifier->Verify(invoke.seal_envelope().user_security_token(), node_id, tenant, id,
                                clock_.Now());
    if (!who) return std::unexpected(who.error());
    req.caller_roles = std::move(who->roles);
  }
  if (invoke.tool_name().empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "invoke_tool.tool_name: empty");
  }
  if (invoke.has_args()) {
    auto j = StructToJson(invoke.args(), "invoke_tool.args");
    if (!j) return MakeError(ErrorCode::kInvalidArgument, j.error().message);
    req.args = std::move(*j);
  }
  if (invoke.has_deadline()) {
    const auto& d = invoke.deadline();
    if (!ValidDuration(d) || d.seconds() < 0 || d.nanos() < 0) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          "invoke_tool.deadline: must be a positive duration, got " + TimeUtil::ToString(d));
    }
    const int64_t ms = TimeUtil::DurationToMilliseconds(d);
    if (ms > 0) req.timeout = milliseconds(ms);
  }
  req.command_id = id;
  req.tool = invoke.tool_name();
  req.security_context = invoke.security_context_name();
  req.door_limit =
      sandbox::InvokeRequest::DoorLimit{kDoor, "edge.max_concurrent_commands", max_commands};
  req.max_result_bytes =
      max_message_bytes > kResultEnvelopeReserve ? max_message_bytes - kResultEnvelopeReserve : 0;
  // The output streams as CommandProgress; the result carries only its tail.
  req.collect_tail_bytes = kResultOutputTailBytes;
  req.output_window_bytes =
      std::min<size_t>(sandbox::kStreamingOutputWindowBytes, req.max_result_bytes);
  req.output_linger = sandbox::kStreamingOutputLinger;
  return req;
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
        log::Escape(invoke.tool_name()));
    return;
  }
  // A duplicate of a running command is ignored before any check of ours, so that no
  // refusal of the duplicate can race the real result (the controller keeps the first).
  if (executor_.IsRunning(id)) {
    log->info(
        "invoke_tool {}: already running; the duplicate is ignored (its one result "
        "follows when it ends)",
        log::Escape(id));
    return;
  }
  auto req = ToRequest(invoke);
  if (!req) {
    log->warn("invoke_tool {} refused: {}", log::Escape(id), log::Escape(req.error().message));
    Complete(id, ErrorResult(req.error().code, req.error().message));
    return;
  }
  const std::optional<milliseconds> deadline = req->timeout;
  {
    std::lock_guard lock(mu_);
    ++stats_.invoked;
  }
  log->info("command {}: tool {} (security context \"{}\"{})", log::Escape(id),
            log::Escape(invoke.tool_name()), log::Escape(invoke.security_context_name()),
            deadline ? ", deadline " + std::to_string(deadline->count()) + " ms" : "");
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
  executor_.Invoke(std::move(*req), {}, std::move(sink),
                   [weak, id, deadline](sandbox::InvokeResult r) {
                     auto self = weak.lock();
                     if (!self) return;
                     if (r.already_running) {
                       // Started meanwhile (through any door): that run's one result is the
                       // answer, this refusal is not.
                       log::Get("edge")->info("command {}: {}; the duplicate is ignored",
                                              log::Escape(id), r.error.message);
                       return;
                     }
                     if (r.replayed) {
                       log::Get("edge")->info(
                           "command {} already ran: its stored result is "
                           "sent again",
                           log::Escape(id));
                     }
                     self->Complete(id, ToEdgeResult(r, deadline));
                   });
}

void CommandDispatcher::HandleCancel(const pb::Cancel& cancel) {
  const std::string reason =
      cancel.reason().empty() ? std::string("cancelled by the controller") : cancel.reason();
  if (!executor_.Cancel(cancel.command_id(), reason)) {
    log::Get("edge")->info("cancel for command \"{}\" ignored: it is not running here",
                           log::Escape(cancel.command_id()));
    return;
  }
  log::Get("edge")->info("command {}: cancel ({})", log::Escape(cancel.command_id()),
                         log::Escape(reason));
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
    const bool issuers_changed =
        config_.security.user_token_issuers != next->security.user_token_issuers;
    config_ = *next;
    if (issuers_changed) LoadVerifierLocked();
    stats_.config_version = version;
    stats_.last_config_error.clear();
  }
  log->info("config version \"{}\" applied (heartbeat every {} s{})", version,
            next->cluster.heartbeat_interval_secs,
            changed ? "; tools/security contexts/labels changed" : "");
  WithHost([&](DispatcherHost& h) { h.ConfigApplied(*next, changed); });
}

void CommandDispatcher::HandleDrain() {
  if (executor_.draining()) return;
  executor_.Drain();
  log::Get("edge")->info("drain: new commands are refused; {} still running",
                         executor_.running(kDoor));
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
  {
    std::lock_guard lock(mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
  }
  const bool first_drain = !executor_.draining();
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
