#include "agent/daemon/compute_service.h"

#include "agent/identity/channel_factory.h"
#include "agent/identity/keystore_files.h"
#include "common/atomic_file.h"
#include "common/log.h"

namespace edge::daemon {

namespace {
constexpr int kMaxMessageBytes = 16 << 20;
}

ComputeService::ComputeService(config::AgentConfig config, ExecutorHost& host, Clock& clock)
    : config_(std::move(config)),
      host_(host),
      clock_(clock),
      backoff_(std::chrono::seconds(1), std::chrono::seconds(60), random_) {}

ComputeService::~ComputeService() {
  Stop();
}

Result<std::string> ComputeService::ReadToken(const std::string& token_file) {
  if (token_file.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "compute.token_file is not set");
  }
  auto text = ReadFile(token_file, 64 << 10);
  if (!text) {
    return MakeError(text.error().code,
                     "compute.token_file '" + token_file + "': " + text.error().message);
  }
  std::string t = *text;
  const auto first = t.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "compute.token_file '" + token_file + "' is empty");
  }
  t = t.substr(first, t.find_last_not_of(" \t\r\n") - first + 1);
  log::RegisterSecret(t);
  return t;
}

Result<std::shared_ptr<grpc::Channel>> ComputeService::MakeChannel(
    const config::AgentConfig& config) {
  const auto& c = config.compute;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  if (c.tls_mode == "plaintext") {
    return grpc::CreateCustomChannel(c.address, grpc::InsecureChannelCredentials(), args);
  }
  std::string ca;
  if (!c.tls_ca_file.empty()) {
    auto pem = ReadFile(c.tls_ca_file, 1 << 20);
    if (!pem) {
      return MakeError(pem.error().code,
                       "compute.tls.ca_file '" + c.tls_ca_file + "': " + pem.error().message);
    }
    ca = *pem;
  }
  grpc::SslCredentialsOptions opts;
  if (c.tls_mode == "mtls") {
    auto identity = identity::KeystoreFiles::Load(config.data_dir);
    if (!identity) {
      return MakeError(identity.error().code,
                       "compute.tls.mode mtls needs the node keystore from enrollment: " +
                           identity.error().message);
    }
    opts = identity::MtlsOptions(*identity);
  }
  if (!ca.empty()) opts.pem_root_certs = ca;
  return grpc::CreateCustomChannel(c.address, grpc::SslCredentials(opts), args);
}

Status ComputeService::Start() {
  if (member_) return MakeError(ErrorCode::kAlreadyExists, "compute service already started");
  sandbox::Executor* executor = host_.executor();
  if (executor == nullptr) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "the executor is not running (see the executor service's error)");
  }
  auto channel = MakeChannel(config_);
  if (!channel) return std::unexpected(channel.error());
  const std::string token_file = config_.compute.token_file;
  compute::MemberDeps deps{
      .clock = clock_,
      .backoff = backoff_,
      .executor = *executor,
      .channel = *channel,
      .address = config_.compute.address,
      .token = [token_file] { return ReadToken(token_file); },
      .status_changed = [this] { NotifyStatusChanged(); },
  };
  auto member = compute::ComputeMember::Create(config_.compute, std::move(deps), {});
  if (!member) return std::unexpected(member.error());
  if (auto st = (*member)->Start(); !st) return st;
  member_ = std::move(*member);
  log::Get("compute")->info(
      "compute member starting: {} ({}), tags [{}], {} processor(s), {} "
      "criteria",
      config_.compute.address, config_.compute.tls_mode,
      [&] {
        std::string t;
        for (const auto& tag : config_.compute.tags)
          t += (t.empty() ? "" : ", ") + tag;
        return t;
      }(),
      config_.compute.processors.size(), config_.compute.criteria.size());
  return OkStatus();
}

void ComputeService::Stop() {
  if (member_) member_->Stop();
}

std::map<std::string, std::string> ComputeService::Details() const {
  if (!member_) return {};
  const compute::MemberStatus s = member_->status();
  return {
      {"state", s.state},
      {"address", s.address},
      {"member_id", s.member_id},
      {"legal_entity_id", s.legal_entity_id},
      {"streams", std::to_string(s.attempts)},
      {"joins", std::to_string(s.joins)},
      {"joined_at_ms", std::to_string(s.joined_at_ms)},
      {"last_keepalive_sent_ms", std::to_string(s.last_keepalive_sent_ms)},
      {"last_server_event_ms", std::to_string(s.last_server_event_ms)},
      {"calls_running", std::to_string(s.calls_running)},
      {"calls_answered", std::to_string(s.calls_answered)},
      {"calls_failed", std::to_string(s.calls_failed)},
      {"answers_dropped", std::to_string(s.answers_dropped)},
      {"last_error", s.last_error},
  };
}

}  // namespace edge::daemon
