#include "agent/daemon/edge_service.h"

#include "agent/edge/enrollment_files.h"
#include "agent/identity/channel_factory.h"
#include "agent/identity/keystore_files.h"

namespace edge::daemon {

EdgeService::EdgeService(config::AgentConfig config, std::string version, ExecutorHost& host,
                         Clock& clock, std::function<void(const std::string&)> request_exit)
    : config_(std::move(config)),
      version_(std::move(version)),
      host_(host),
      clock_(clock),
      request_exit_(std::move(request_exit)),
      backoff_(std::chrono::seconds(1), std::chrono::seconds(60), random_) {}

EdgeService::~EdgeService() {
  Stop();
}

Status EdgeService::Start() {
  if (session_) return MakeError(ErrorCode::kAlreadyExists, "edge service already started");
  sandbox::Executor* executor = host_.executor();
  if (executor == nullptr) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "the executor is not running (see the executor service's error)");
  }
  auto address = agentedge::EnrollmentFiles::ResolveControllerAddress(config_);
  if (!address) return std::unexpected(address.error());
  auto identity = identity::KeystoreFiles::Load(config_.data_dir);
  if (!identity) {
    return MakeError(identity.error().code, "keystore: " + identity.error().message);
  }
  auto channel = identity::ChannelFactory(*identity).Mtls(
      *address, "", static_cast<int>(config_.edge.max_message_bytes));
  agentedge::SessionDeps deps{
      .clock = clock_,
      .random = random_,
      .backoff = backoff_,
      .executor = *executor,
      .channel = channel,
      .controller = *address,
      .apply_config = [this](const config::AgentConfig& c) { return host_.ApplyConfig(c); },
      .request_exit = request_exit_,
      .status_changed = [this] { NotifyStatusChanged(); },
  };
  agentedge::SessionOptions options;
  options.agent_version = version_;
  auto session = agentedge::EdgeSession::Create(config_, std::move(deps), options);
  if (!session) return std::unexpected(session.error());
  if (auto st = (*session)->Start(); !st) return st;
  session_ = std::move(*session);
  return OkStatus();
}

void EdgeService::Stop() {
  if (session_) session_->Stop();
}

size_t EdgeService::ReleaseMemory() {
  return session_ ? session_->outbox().ReleaseMemory() : 0;
}

std::optional<std::string> EdgeService::Stuck(int64_t now_ms) const {
  if (!session_) return std::nullopt;
  return agentedge::SessionStuck(session_->status(), now_ms);
}

std::map<std::string, std::string> EdgeService::Details() const {
  if (!session_) return {};
  const agentedge::SessionStatus s = session_->status();
  std::map<std::string, std::string> d = {
      {"state", s.state},
      {"controller", s.controller},
      {"stream_id", s.stream_id},
      {"streams", std::to_string(s.streams)},
      {"attempts", std::to_string(s.attempts)},
      {"last_error", s.last_error},
      {"last_heartbeat_ms", std::to_string(s.last_heartbeat_ms)},
      {"token_expires_at_ms", std::to_string(s.token_expires_at_ms)},
      {"tenant_id", s.tenant_id},
      {"heartbeat_interval_secs", std::to_string(s.heartbeat_interval_secs)},
      {"outbox_entries", std::to_string(s.outbox_entries)},
      {"commands_running", std::to_string(s.commands.running)},
      {"commands_invoked", std::to_string(s.commands.invoked)},
      {"draining", s.commands.draining ? "true" : "false"},
      {"config_version", s.commands.config_version},
      {"config_error", s.commands.last_config_error},
  };
  return d;
}

}  // namespace edge::daemon
