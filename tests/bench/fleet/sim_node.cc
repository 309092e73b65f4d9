#include "tests/bench/fleet/sim_node.h"

#include <google/protobuf/util/time_util.h>
#include <grpc/grpc.h>

#include <thread>

#include "agent/bootstrap/join_token_redeemer.h"
#include "agent/identity/channel_factory.h"
#include "agent/identity/envelope_codec.h"
#include "agent/identity/keystore_files.h"

namespace edge::bench {
namespace {

namespace pb = aegis::cluster::v1;
using std::chrono::milliseconds;

// The real agent's rules (agent/edge/edge_session.h, agent/daemon/edge_service.h).
constexpr milliseconds kBackoffBase{1000};
constexpr milliseconds kBackoffCap{60'000};
constexpr std::chrono::seconds kStableStream{60};
constexpr std::chrono::minutes kTokenReuseMargin{2};
constexpr int kMaxMessageBytes = 16 * 1024 * 1024;  // edge.max_message_bytes default
constexpr size_t kHeartbeatsKept = 8;

int64_t NowMs(Clock& clock) {
  return ToEpochMillis(clock.Now());
}

}  // namespace

SimNode::SimNode(std::string node_id, FleetContext& ctx)
    : node_id_(std::move(node_id)), ctx_(ctx), backoff_(kBackoffBase, kBackoffCap, ctx.random) {}

SimNode::~SimNode() = default;

Result<SimNode::EnrollTimes> SimNode::Enroll(const std::string& join_token,
                                             const std::string& data_dir,
                                             const std::string& ca_pin) {
  using SteadyClock = std::chrono::steady_clock;
  EnrollTimes times;
  data_dir_ = data_dir;
  const auto t0 = SteadyClock::now();
  // As `edge-agent enroll` redeems a token: bounded retries of UNAVAILABLE only.
  FullJitterBackoff backoff(std::chrono::seconds(1), std::chrono::seconds(10), ctx_.random);
  bootstrap::JoinTokenRedeemer redeemer(backoff,
                                        [](milliseconds d) { std::this_thread::sleep_for(d); });
  auto enrolled = redeemer.Enroll(bootstrap::EnrollRequest{.join_token = join_token,
                                                           .node_id = node_id_,
                                                           .data_dir = data_dir,
                                                           .controller_address = ctx_.target,
                                                           .ca_pin = ca_pin});
  if (!enrolled) return std::unexpected(enrolled.error());
  auto tls = identity::KeystoreFiles::Load(data_dir);
  if (!tls) return std::unexpected(tls.error());
  // What ChannelFactory::Mtls builds, plus a subchannel pool of this channel's own: gRPC
  // would otherwise be free to share one connection between channels with equal arguments.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  channel_ = grpc::CreateCustomChannel(ctx_.target,
                                       grpc::SslCredentials(identity::MtlsOptions(*tls)), args);
  stub_ = pb::NodeClusterService::NewStub(channel_);
  const auto t1 = SteadyClock::now();
  times.exchange = std::chrono::duration_cast<milliseconds>(t1 - t0);

  auto key = identity::NodeKey::Generate();
  if (!key) return std::unexpected(key.error());
  attestor_ = std::make_unique<agentedge::NodeAttestor>(channel_, node_id_, data_dir, ctx_.clock);
  auto token = attestor_->Attest(*key, join_token);
  if (!token) return std::unexpected(token.error());
  {
    std::lock_guard lock(cred_mu_);
    key_ = std::move(*key);
  }
  InstallToken(std::move(*token));
  times.attest = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - t1);
  return times;
}

void SimNode::Start() {
  Open();
}

void SimNode::Stop() {
  std::shared_ptr<agentedge::EdgeStream> stream;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto* id : {&heartbeat_timer_, &retry_timer_, &stable_timer_, &renew_timer_}) {
      if (*id != 0) ctx_.timers.Cancel(*id);
      *id = 0;
    }
    stream = stream_;
  }
  if (stream) stream->Cancel();
}

bool SimNode::stream_over() const {
  std::lock_guard lock(mu_);
  return !open_;
}

std::vector<int64_t> SimNode::HeartbeatSends() const {
  std::lock_guard lock(cred_mu_);
  return heartbeat_sends_;
}

void SimNode::InstallToken(agentedge::NodeToken token) {
  const auto delay =
      std::max(milliseconds(1000),
               std::chrono::duration_cast<milliseconds>(
                   token.issued_at + agentedge::RenewalDelay(token.Lifetime(), ctx_.random) -
                   ctx_.clock.Now()));
  {
    std::lock_guard lock(cred_mu_);
    token_ = std::move(token);
  }
  std::lock_guard lock(mu_);
  if (stopping_) return;
  if (renew_timer_ != 0) ctx_.timers.Cancel(renew_timer_);
  renew_timer_ = ctx_.timers.After(delay, [this] { ctx_.pool.Post([this] { Renew(); }); });
}

void SimNode::Renew() {
  std::optional<identity::NodeKey> key;
  std::optional<agentedge::NodeToken> current;
  {
    std::lock_guard lock(cred_mu_);
    key = key_;
    current = token_;
  }
  {
    std::lock_guard lock(mu_);
    renew_timer_ = 0;
    if (stopping_ || !key || !current) return;
  }
  auto token = attestor_->Renew(*key, *current);
  if (!token) {
    ++ctx_.counters.errors;
    return;  // the next reconnect attests again
  }
  ++ctx_.counters.renewals;
  InstallToken(std::move(*token));
}

void SimNode::Attempt() {
  {
    std::lock_guard lock(mu_);
    retry_timer_ = 0;
    if (stopping_) return;
  }
  bool fresh = false;
  {
    std::lock_guard lock(cred_mu_);
    fresh = token_ && token_->FreshAt(ctx_.clock.Now(), kTokenReuseMargin);
  }
  if (fresh) {
    Open();
  } else {
    ctx_.pool.Post([this] { Reattest(); });
  }
}

void SimNode::Reattest() {
  std::optional<identity::NodeKey> key;
  {
    std::lock_guard lock(cred_mu_);
    key = key_;
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
  }
  auto token = attestor_->Attest(*key);
  if (token) {
    ++ctx_.counters.attestations;
    InstallToken(std::move(*token));
    Open();
    return;
  }
  ++ctx_.counters.errors;
  std::lock_guard lock(mu_);
  if (stopping_) return;
  retry_timer_ = ctx_.timers.After(backoff_.Next(), [this] { Attempt(); });
}

void SimNode::Open() {
  uint64_t gen = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_ || open_) return;
    gen = ++gen_;
    open_ = true;
    taken_ = false;
  }
  std::string token;
  {
    std::lock_guard lock(cred_mu_);
    token = token_->token;
  }
  const std::string sid = NewUuidV4();
  agentedge::EdgeStream::Callbacks cb;
  cb.seal = [this, sid](pb::EdgeEvent& e) { return Seal(e, sid); };
  cb.on_read = [this, gen](pb::EdgeCommand c) { return OnCommand(gen, c); };
  cb.on_done = [this, gen](const grpc::Status& st) { OnDone(gen, st); };
  ++ctx_.counters.streams_opened;
  ctx_.counters.Note(ctx_.counters.attempts_ms, NowMs(ctx_.clock));
  auto stream = agentedge::StartEdgeStream(*stub_, token, std::move(cb), ctx_.calls);
  bool cancel = false;
  {
    std::lock_guard lock(mu_);
    if (gen == gen_ && open_) {  // OnDone may have run already
      stream_ = stream;
      // The first heartbeat is due one interval after the stream opens, as the agent's.
      heartbeat_timer_ = ctx_.timers.After(ctx_.heartbeat, [this, gen] { OnHeartbeat(gen); });
      stable_timer_ = ctx_.timers.After(kStableStream, [this, gen] { Taken(gen); });
    }
    cancel = stopping_;
  }
  if (cancel) {
    stream->Cancel();
    return;
  }
  pb::EdgeEvent hello;
  hello.mutable_hello()->set_stream_id(sid);
  auto* caps = hello.mutable_hello()->mutable_capabilities();
  caps->set_os("linux");
  caps->set_arch("x86_64");
  caps->add_local_tools("sysinfo");
  (*caps->mutable_custom_labels())["agent.version"] = "fleet-bench";
  (*caps->mutable_custom_labels())["agent.max_message_bytes"] = std::to_string(kMaxMessageBytes);
  (*caps->mutable_custom_labels())["bench"] = "fleet";
  stream->Send(std::move(hello), [this](bool ok) {
    if (!ok) return;
    if (!connected_.exchange(true)) ++ctx_.counters.connected;
    ctx_.counters.Note(ctx_.counters.connects_ms, NowMs(ctx_.clock));
  });
}

void SimNode::OnDone(uint64_t gen, const grpc::Status& status) {
  // Every write callback has run by now (ClientStream's contract).
  if (connected_.exchange(false)) --ctx_.counters.connected;
  ++ctx_.counters.streams_ended;
  if (!status.ok()) {
    std::lock_guard lock(ctx_.counters.mu);
    ctx_.counters.last_end_status =
        std::to_string(status.error_code()) + " " + status.error_message();
  }
  std::lock_guard lock(mu_);
  if (gen != gen_) return;
  open_ = false;
  stream_.reset();
  for (auto* id : {&heartbeat_timer_, &stable_timer_}) {
    if (*id != 0) ctx_.timers.Cancel(*id);
    *id = 0;
  }
  if (stopping_) return;
  retry_timer_ = ctx_.timers.After(backoff_.Next(), [this] { Attempt(); });
}

void SimNode::Taken(uint64_t gen) {
  std::lock_guard lock(mu_);
  if (gen != gen_ || taken_) return;
  taken_ = true;
  backoff_.Reset();
}

bool SimNode::SendOn(uint64_t gen, pb::EdgeEvent event, agentedge::EdgeStream::WriteCallback done) {
  std::shared_ptr<agentedge::EdgeStream> stream;
  {
    std::lock_guard lock(mu_);
    if (gen != gen_ || !stream_) return false;
    stream = stream_;
  }
  return stream->Send(std::move(event), std::move(done));
}

void SimNode::OnHeartbeat(uint64_t gen) {
  {
    std::lock_guard lock(mu_);
    if (gen != gen_ || stopping_ || !open_) return;
    // The next one is scheduled before this one is sent, as the agent does.
    heartbeat_timer_ = ctx_.timers.After(ctx_.heartbeat, [this, gen] { OnHeartbeat(gen); });
  }
  pb::EdgeEvent hb;
  *hb.mutable_heartbeat()->mutable_sent_at() =
      google::protobuf::util::TimeUtil::MillisecondsToTimestamp(NowMs(ctx_.clock));
  if (SendOn(gen, std::move(hb))) ++ctx_.counters.heartbeats_sent;
}

bool SimNode::OnCommand(uint64_t gen, const pb::EdgeCommand& command) {
  Taken(gen);  // the first message on a stream proves the controller took it
  if (!command.has_invoke_tool()) return true;  // Cancel/Drain/PushConfig: nothing runs here
  ++ctx_.counters.invokes_received;
  ctx_.counters.Note(ctx_.counters.invoke_rx_ms, NowMs(ctx_.clock));
  const auto& invoke = command.invoke_tool();
  if (invoke.command_id().empty()) return true;
  pb::EdgeEvent ev;
  auto* result = ev.mutable_command_result();
  result->set_command_id(invoke.command_id());
  if (invoke.tool_name() == "sysinfo") {
    *result->mutable_result() = ctx_.sysinfo_result;
  } else {
    auto* err = result->mutable_result()->mutable_err();
    err->set_code("NOT_FOUND");
    err->set_message("tool \"" + invoke.tool_name() + "\" is not known to a simulated node");
  }
  SendOn(gen, std::move(ev), [this](bool ok) {
    if (ok) ++ctx_.counters.results_written;
  });
  return true;
}

Status SimNode::Seal(pb::EdgeEvent& event, const std::string& stream_id) {
  std::lock_guard lock(cred_mu_);
  const auto now = ctx_.clock.Now();
  if (event.has_heartbeat()) {
    if (heartbeat_sends_.size() >= kHeartbeatsKept)
      heartbeat_sends_.erase(heartbeat_sends_.begin());
    heartbeat_sends_.push_back(ToEpochMillis(now));
  }
  return identity::EnvelopeCodec::SealEvent(event, *key_, token_->token, now, node_id_, stream_id);
}

}  // namespace edge::bench
