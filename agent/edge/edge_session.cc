#include "agent/edge/edge_session.h"

#include <google/protobuf/util/time_util.h>

#include "agent/edge/capabilities.h"
#include "agent/edge/result_mapper.h"
#include "agent/identity/envelope_codec.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "config/validate.h"

namespace edge::agentedge {
namespace {

namespace pb = aegis::cluster::v1;
using google::protobuf::util::TimeUtil;
using std::chrono::milliseconds;

// How long a stream must stay up to count as taken when no message arrived (wire.md §2.3).
constexpr std::chrono::seconds kStableStream{60};

std::string IsoTime(Clock::WallTime t) {
  return TimeUtil::ToString(TimeUtil::MillisecondsToTimestamp(ToEpochMillis(t)));
}

}  // namespace

EdgeSession::EdgeSession(config::AgentConfig config, SessionDeps deps, SessionOptions options)
    : node_id_(config.node_id),
      config_(std::move(config)),
      deps_(std::move(deps)),
      options_(std::move(options)),
      keys_(config_.data_dir),
      timers_(deps_.clock),
      loop_(timers_, deps_.backoff,
            ReconnectLoop::Hooks{
                .attempt = [this] { return Attempt(); },
                .interrupt = [this] { Interrupt(); },
                .backing_off =
                    [this](milliseconds delay) {
                      std::lock_guard lock(mu_);
                      SetStateLocked("backoff");
                      status_.last_backoff = delay;
                      log::Get("edge")->info("reconnecting to {} in {} ms", deps_.controller,
                                             delay.count());
                    },
                .ended =
                    [this] {
                      std::lock_guard lock(mu_);
                      SetStateLocked("stopped");
                    },
            }) {}

Result<std::unique_ptr<EdgeSession>> EdgeSession::Create(config::AgentConfig config,
                                                         SessionDeps deps, SessionOptions options) {
  if (!config::IsValidNodeId(config.node_id)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "node_id \"" + config.node_id + "\" must match [A-Za-z0-9._-]{1,64}");
  }
  if (!deps.channel) {
    return MakeError(ErrorCode::kInvalidArgument, "edge session: no channel to the controller");
  }
  std::unique_ptr<EdgeSession> s(new EdgeSession(std::move(config), std::move(deps), options));
  auto outbox = OutboxStore::Open(s->config_.data_dir, s->deps_.clock, s->options_.outbox);
  if (!outbox) return std::unexpected(outbox.error());
  s->outbox_ = std::move(*outbox);
  s->dispatcher_ = CommandDispatcher::Create(s->deps_.executor, *s->outbox_, s->config_,
                                             s->deps_.apply_config, s->deps_.clock);
  s->dispatcher_->Attach(s.get());
  s->attestor_ = std::make_unique<NodeAttestor>(s->deps_.channel, s->node_id_, s->config_.data_dir,
                                                s->deps_.clock,
                                                NodeAttestor::Options{s->options_.rpc_timeout});
  s->stub_ = pb::NodeClusterService::NewStub(s->deps_.channel);
  s->status_.state = "starting";
  s->status_.controller = s->deps_.controller;
  s->status_.heartbeat_interval_secs = s->config_.cluster.heartbeat_interval_secs;
  return s;
}

EdgeSession::~EdgeSession() {
  Stop();
}

Status EdgeSession::Start() {
  if (!loop_.Start()) return MakeError(ErrorCode::kAlreadyExists, "edge session already started");
  return OkStatus();
}

void EdgeSession::Stop() {
  loop_.Stop();  // Interrupt(), then the thread ends
  timers_.Stop();
  dispatcher_->Detach();
  std::lock_guard lock(mu_);
  SetStateLocked("stopped");
}

std::optional<std::string> SessionStuck(const SessionStatus& s, int64_t now_ms) {
  if (s.state != "connected") return std::nullopt;
  const int64_t interval_ms =
      (s.heartbeat_interval_secs > 0 ? s.heartbeat_interval_secs : 30) * 1000;
  // Counted from the later of the last heartbeat and this stream's start (the first
  // heartbeat of a new stream is due one interval after it).
  const int64_t since = std::max(s.last_heartbeat_ms, s.connected_since_ms);
  if (since == 0) return std::nullopt;
  const int64_t silent = now_ms - since;
  if (silent <= 3 * interval_ms) return std::nullopt;
  return "edge stream connected but no heartbeat sent for " + std::to_string(silent / 1000) +
         " s (interval " + std::to_string(interval_ms / 1000) + " s)";
}

SessionStatus EdgeSession::status() const {
  SessionStatus s;
  {
    std::lock_guard lock(mu_);
    s = status_;
  }
  if (auto n = outbox_->Size(); n) s.outbox_entries = *n;
  s.commands = dispatcher_->stats();
  return s;
}

void EdgeSession::SetError(const std::string& what) {
  log::Get("edge")->warn("{}", what);
  std::lock_guard lock(mu_);
  status_.last_error = what;
}

// ---- the control thread (the ReconnectLoop's) -------------------------------------------

void EdgeSession::Interrupt() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (stream_) stream_->Cancel();
    cv_.notify_all();
  }
  attestor_->CancelInFlight();
}

ReconnectLoop::Next EdgeSession::ExitAfterShutdown() {
  log::Get("edge")->info("shutdown complete: exiting");
  if (deps_.request_exit) deps_.request_exit("shutdown requested by the controller");
  return ReconnectLoop::Next::kExit;
}

ReconnectLoop::Next EdgeSession::Attempt() {
  auto log = log::Get("edge");
  bool exit_now = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return ReconnectLoop::Next::kExit;
    exit_now = shutdown_finished_;
    if (!exit_now) {
      SetStateLocked("attesting");
      ++status_.attempts;
    }
  }
  if (exit_now) return ExitAfterShutdown();
  if (!EnsureCredentials()) {
    return ReconnectLoop::Next::kBackoff;  // the next attempt sees a stop or a finished shutdown
  }
  uint64_t gen = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return ReconnectLoop::Next::kExit;
    OpenStreamLocked();
    gen = gen_;
  }
  ServeStream(gen);
  grpc::Status st;
  std::string sid;
  std::shared_ptr<UnwrittenResult> unwritten;
  {
    std::lock_guard lock(mu_);
    CancelStreamTimersLocked();
    stream_.reset();
    st = done_status_;
    sid = stream_id_;
    unwritten = unwritten_;
    status_.stream_id.clear();
    if (stopping_) return ReconnectLoop::Next::kExit;
    if (shutdown_finished_) {
      log->info("edge stream {} closed after shutdown", sid);
      exit_now = true;
    } else if (st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
               st.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      token_.reset();  // refused: attest again before the next stream
    }
  }
  if (exit_now) return ExitAfterShutdown();
  SetError("edge stream " + sid + " ended: " + FromGrpcStatus(st, "ConnectEdge").ToString());
  BlameResultsOf(sid, st, unwritten);
  return ReconnectLoop::Next::kBackoff;
}

void EdgeSession::BlameResultsOf(const std::string& stream_id, const grpc::Status& status,
                                 const std::shared_ptr<UnwrittenResult>& unwritten) {
  // Only a status that blames a message the controller got is evidence against a result on
  // the stream (a result too large for it, one it refused). A controller restart, a reset
  // connection, a deadline, an auth refusal say nothing about the results: counting those
  // would replace real results after a few restarts (issue 16).
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED &&
      status.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
    return;
  }
  std::string in_flight;
  if (unwritten) {
    std::lock_guard lock(unwritten->mu);
    in_flight = unwritten->command_id;
  }
  auto n = outbox_->BlameStream(stream_id, in_flight);
  if (!n) {
    log::Get("edge")->warn("outbox: cannot count the failed stream {}: {}", stream_id,
                           n.error().ToString());
  } else if (*n > 0) {
    log::Get("edge")->warn(
        "edge stream {} was ended blaming a message: {} undelivered result(s) on it count a "
        "failed attempt{}",
        stream_id, *n,
        in_flight.empty() ? "" : " (" + log::Escape(in_flight) + " was being written)");
  }
}

bool EdgeSession::EnsureCredentials() {
  const uint64_t fingerprint = keys_.Fingerprint();
  bool have_key = false;
  {
    std::lock_guard lock(cred_mu_);
    have_key = key_.has_value();
  }
  bool reload = false;
  bool reuse = false;
  {
    std::lock_guard lock(mu_);
    reload = !have_key || fingerprint != key_fingerprint_;
    reuse = !reload && !renew_due_ && token_ &&
            token_->FreshAt(deps_.clock.Now(), options_.token_reuse_margin);
  }
  if (reuse) return true;
  std::optional<identity::NodeKey> key;
  if (reload) {
    bool created = false;
    auto k = keys_.LoadOrCreate(&created);
    if (!k) {
      SetError("node key " + keys_.KeyPath() + ": " + k.error().ToString());
      return false;
    }
    if (created) log::Get("edge")->info("created the node key {}", keys_.KeyPath());
    key = std::move(*k);
  } else {
    std::lock_guard lock(cred_mu_);
    key = key_;
  }
  auto token = attestor_->Attest(*key);
  if (!token) {
    SetError("attestation with " + deps_.controller + " failed: " + token.error().ToString());
    return false;
  }
  log::Get("edge")->info("node {} attested with {} (tenant {}); token valid until {}", node_id_,
                         deps_.controller, token->tenant_id, IsoTime(token->expires_at));
  if (reload) {
    std::lock_guard lock(mu_);
    key_fingerprint_ = keys_.Fingerprint();
  }
  InstallToken(std::move(*token), reload ? key : std::nullopt);
  return true;
}

void EdgeSession::InstallToken(NodeToken token, std::optional<identity::NodeKey> key) {
  {
    std::lock_guard lock(cred_mu_);
    if (key) key_ = std::move(*key);
    token_string_ = token.token;
  }
  dispatcher_->SetTenant(token.tenant_id);
  std::lock_guard lock(mu_);
  const Clock::WallTime now = deps_.clock.Now();
  const Clock::WallTime due = token.issued_at + RenewalDelay(token.Lifetime(), deps_.random);
  const auto delay =
      std::max(milliseconds(1000), std::chrono::duration_cast<milliseconds>(due - now));
  status_.token_expires_at_ms = ToEpochMillis(token.expires_at);
  status_.tenant_id = token.tenant_id;
  token_ = std::move(token);
  renew_due_ = false;
  ScheduleRenewalLocked(delay);
}

void EdgeSession::ScheduleRenewalLocked(milliseconds delay) {
  if (renew_timer_ != 0) timers_.Cancel(renew_timer_);
  renew_at_ = deps_.clock.Monotonic() + delay;
  renew_timer_ = timers_.After(delay, [this] {
    std::lock_guard lock(mu_);
    renew_timer_ = 0;
    renew_due_ = true;
    cv_.notify_all();
  });
}

void EdgeSession::OpenStreamLocked() {
  ++gen_;
  const uint64_t gen = gen_;
  stream_id_ = NewUuidV4();
  const std::string sid = stream_id_;
  stream_done_ = false;
  done_status_ = grpc::Status::OK;
  unwritten_ = std::make_shared<UnwrittenResult>();
  loop_.StreamOpened();
  std::string token;
  {
    std::lock_guard lock(cred_mu_);
    token = token_string_;
  }
  EdgeStream::Callbacks cb;
  cb.seal = [this, sid](pb::EdgeEvent& e) { return Seal(e, sid); };
  cb.on_read = [this, gen](pb::EdgeCommand c) -> bool {
    {
      std::lock_guard lock(mu_);
      // The first message on a new stream proves the controller took it (design.md §9).
      if (gen == gen_) loop_.Taken();
    }
    return dispatcher_->Handle(c);
  };
  cb.on_done = [this, gen](const grpc::Status& st) {
    std::lock_guard lock(mu_);
    if (gen == gen_) {
      stream_done_ = true;
      done_status_ = st;
    }
    cv_.notify_all();
  };
  stream_ = StartEdgeStream(*stub_, token, std::move(cb), calls_);
  ++status_.streams;
  status_.stream_id = sid;
  SetStateLocked("connected");
  status_.connected_since_ms = ToEpochMillis(deps_.clock.Now());
  // Scheduled before the Hello goes out, so the first heartbeat is due one interval after it.
  ScheduleHeartbeatLocked();
  // A controller with no work for this node sends nothing, so a stream that has stayed up
  // for a minute also counts as taken (wire.md §2.3 step 7) and resets the backoff.
  if (stable_timer_ != 0) timers_.Cancel(stable_timer_);
  stable_timer_ = timers_.After(kStableStream, [this, gen] {
    std::lock_guard lock(mu_);
    if (gen != gen_ || !StreamUpLocked()) return;
    stable_timer_ = 0;
    loop_.Taken();
  });

  pb::EdgeEvent hello;
  hello.mutable_hello()->set_stream_id(sid);
  *hello.mutable_hello()->mutable_capabilities() = CapabilitiesLocked();
  const std::string controller = deps_.controller;
  SendLocked(std::move(hello), [sid, controller](bool ok) {
    if (ok) log::Get("edge")->info("edge stream {} open: Hello sent to {}", sid, controller);
  });
  const uint64_t max_message = config_.edge.max_message_bytes;
  if (auto entries = outbox_->TakeForResend(
          max_message > kResultEnvelopeReserve ? max_message - kResultEnvelopeReserve : 0);
      entries && !entries->empty()) {
    log::Get("edge")->info("edge stream {}: resending {} undelivered result(s) from the outbox",
                           sid, entries->size());
    for (const auto& e : *entries)
      SendResultLocked(e.command_id, e.result);
  } else if (!entries) {
    log::Get("edge")->error("outbox unreadable: {}", entries.error().ToString());
  }
}

void EdgeSession::ServeStream(uint64_t gen) {
  while (true) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return stopping_ || stream_done_ || renew_due_ || key_changed_; });
    if (gen != gen_ || stream_done_) return;
    if (stopping_) {
      if (stream_) stream_->Cancel();
      // OnDone follows a cancel promptly; the bound only guards against a stuck transport.
      cv_.wait_for(lock, std::chrono::seconds(10), [this] { return stream_done_; });
      return;
    }
    if (key_changed_) {
      key_changed_ = false;
      lock.unlock();
      log::Get("edge")->info("the node key {} changed on disk: attesting with the new key",
                             keys_.KeyPath());
      const uint64_t fingerprint = keys_.Fingerprint();
      auto key = keys_.Load();
      if (!key) {
        SetError("node key " + keys_.KeyPath() + ": " + key.error().ToString());
        continue;
      }
      auto token = attestor_->Attest(*key);
      if (!token) {
        SetError("attestation with the new key failed: " + token.error().ToString() +
                 "; reconnecting");
        std::lock_guard l(mu_);
        if (stream_) stream_->Cancel();
        continue;
      }
      log::Get("edge")->info("node {} attested with the new key; token valid until {}", node_id_,
                             IsoTime(token->expires_at));
      {
        std::lock_guard l(mu_);
        key_fingerprint_ = fingerprint;
      }
      InstallToken(std::move(*token), std::move(*key));
      continue;
    }
    if (renew_due_) {
      renew_due_ = false;
      if (!token_) continue;
      NodeToken current = *token_;
      lock.unlock();
      std::optional<identity::NodeKey> key;
      {
        std::lock_guard l(cred_mu_);
        key = key_;
      }
      auto token = attestor_->Renew(*key, current);
      if (!token) {
        SetError("token renewal failed: " + token.error().ToString());
        std::lock_guard l(mu_);
        const auto left =
            std::chrono::duration_cast<milliseconds>(current.expires_at - deps_.clock.Now());
        ScheduleRenewalLocked(std::clamp(left / 4, milliseconds(1000), milliseconds(60'000)));
        continue;
      }
      log::Get("edge")->info("token renewed; valid until {}", IsoTime(token->expires_at));
      InstallToken(std::move(*token), std::nullopt);
    }
  }
}

// ---- writing ----------------------------------------------------------------------------

Status EdgeSession::Seal(pb::EdgeEvent& event, const std::string& stream_id) {
  std::lock_guard lock(cred_mu_);
  if (!key_) return MakeError(ErrorCode::kFailedPrecondition, "no node key loaded");
  return identity::EnvelopeCodec::SealEvent(event, *key_, token_string_, deps_.clock.Now(),
                                            node_id_, stream_id);
}

bool EdgeSession::StreamUpLocked() const {
  return stream_ && !stream_done_;
}

bool EdgeSession::SendLocked(pb::EdgeEvent event, EdgeStream::WriteCallback done) {
  // Write callbacks called with false may run inside Send: they must not take mu_.
  if (!StreamUpLocked()) return false;
  return stream_->Send(std::move(event), std::move(done));
}

void EdgeSession::SendResultLocked(const std::string& command_id, const pb::EdgeResult& result) {
  pb::EdgeEvent ev;
  auto* cr = ev.mutable_command_result();
  cr->set_command_id(command_id);
  *cr->mutable_result() = result;
  const std::string sid = stream_id_;
  const uint64_t gen = gen_;
  const milliseconds settle = outbox_->options().settle;
  std::shared_ptr<UnwrittenResult> unwritten = unwritten_;
  SendLocked(std::move(ev), [this, command_id, sid, gen, settle, unwritten](bool ok) {
    if (!ok) {
      // Stays in the outbox; resent on the next stream. The first result that failed is the
      // one whose write was under way when the stream ended (callbacks run in write order).
      std::lock_guard lock(unwritten->mu);
      if (unwritten->command_id.empty()) unwritten->command_id = command_id;
      return;
    }
    if (auto st = outbox_->MarkWritten(command_id, sid); !st) {
      log::Get("edge")->warn("outbox: cannot record the write of {}: {}", log::Escape(command_id),
                             st.error().ToString());
    }
    SchedulePrune(gen, settle);
  });
}

void EdgeSession::SchedulePrune(uint64_t gen, milliseconds delay) {
  // One prune pending per stream, however many results are written: a burst of 10 000 results
  // is pruned in a few batches, not with 10 000 timers and transactions (issue 14). A pending
  // one that is due later than asked is replaced.
  const Clock::MonoTime due = deps_.clock.Monotonic() + delay;
  std::lock_guard lock(prune_mu_);
  if (prune_.gen == gen && prune_.due <= due) return;
  if (prune_.timer != 0) timers_.Cancel(prune_.timer);
  prune_ = {gen, due, timers_.After(delay, [this, gen] { PruneSettled(gen); })};
}

void EdgeSession::PruneSettled(uint64_t gen) {
  {
    std::lock_guard lock(prune_mu_);
    if (prune_.gen == gen && prune_.due <= deps_.clock.Monotonic()) prune_ = {};
  }
  std::lock_guard lock(mu_);
  if (gen != gen_ || !StreamUpLocked()) return;
  auto n = outbox_->PruneSettled(stream_id_);
  if (!n) {
    log::Get("edge")->warn("outbox: prune failed: {}", n.error().ToString());
    return;  // the next write or heartbeat tries again
  }
  if (*n > 0) log::Get("edge")->debug("outbox: {} delivered result(s) settled and pruned", *n);
  // Entries written since settle later: wait for the oldest of them (rounded up: a timer a
  // fraction of a millisecond early would find it not yet settled), but prune at most once
  // per tenth of the window while results keep coming, so that they go in batches.
  auto next = outbox_->NextSettle(stream_id_);
  if (!next || !*next) return;
  const milliseconds settle = outbox_->options().settle;
  const auto wait = std::chrono::ceil<milliseconds>(**next - deps_.clock.Now());
  const milliseconds spacing = std::max(settle / 10, milliseconds(1));
  SchedulePrune(gen, std::clamp(wait, spacing, std::max(settle, spacing)));
}

pb::EdgeCapabilities EdgeSession::CapabilitiesLocked() const {
  return BuildCapabilities(config_, deps_.executor.Tools(), options_.agent_version,
                           dispatcher_->draining());
}

void EdgeSession::SendCapabilitiesLocked() {
  pb::EdgeEvent ev;
  *ev.mutable_capability_update()->mutable_capabilities() = CapabilitiesLocked();
  SendLocked(std::move(ev));
}

void EdgeSession::ScheduleHeartbeatLocked() {
  if (heartbeat_timer_ != 0) timers_.Cancel(heartbeat_timer_);
  const auto interval =
      std::chrono::seconds(std::max<int64_t>(config_.cluster.heartbeat_interval_secs, 1));
  const uint64_t gen = gen_;
  heartbeat_timer_ = timers_.After(interval, [this, gen] { OnHeartbeat(gen); });
}

void EdgeSession::CancelStreamTimersLocked() {
  if (heartbeat_timer_ != 0) timers_.Cancel(heartbeat_timer_);
  heartbeat_timer_ = 0;
  if (stable_timer_ != 0) timers_.Cancel(stable_timer_);
  stable_timer_ = 0;
}

void EdgeSession::OnHeartbeat(uint64_t gen) {
  std::lock_guard lock(mu_);
  if (gen != gen_ || !StreamUpLocked()) return;
  // The next one is scheduled before this one is sent: whoever sees this heartbeat arrive
  // can rely on the next being due one interval from now.
  heartbeat_timer_ = 0;
  ScheduleHeartbeatLocked();
  const Clock::WallTime now = deps_.clock.Now();
  // The renewal timer runs on monotonic time; token lifetimes are wall time. A wall clock
  // that jumped forward (NTP stepping it, a VM resumed) can put the token past its renewal
  // point, or its expiry, long before that timer fires: renew now, once (a retry after a
  // failed renewal is near and is left alone). A jump backwards needs nothing: the timer
  // still fires on time.
  const auto interval =
      std::chrono::seconds(std::max<int64_t>(config_.cluster.heartbeat_interval_secs, 1));
  if (token_ && token_->OverdueAt(now) && !renew_due_ && renew_timer_ != 0 &&
      renew_at_ - deps_.clock.Monotonic() > interval) {
    log::Get("edge")->warn(
        "the wall clock reads {}, past the token's renewal point (it expires {}): the clock "
        "jumped; renewing now",
        IsoTime(now), IsoTime(token_->expires_at));
    timers_.Cancel(renew_timer_);
    renew_timer_ = 0;
    renew_due_ = true;
    cv_.notify_all();
  }
  // A heartbeat sealed with a token that has expired by the wall clock would be refused;
  // the next one carries the renewed token.
  if (token_ && !token_->FreshAt(now, milliseconds(0))) return;
  pb::EdgeEvent hb;
  *hb.mutable_heartbeat()->mutable_sent_at() =
      TimeUtil::MillisecondsToTimestamp(ToEpochMillis(now));
  if (SendLocked(std::move(hb))) status_.last_heartbeat_ms = ToEpochMillis(now);
  // A key replaced on disk (edge-agent rotate-key) is picked up here.
  const uint64_t fingerprint = keys_.Fingerprint();
  if (fingerprint != 0 && fingerprint != key_fingerprint_ && !key_changed_) {
    key_changed_ = true;
    cv_.notify_all();
  }
  if (auto n = outbox_->PruneSettled(stream_id_); !n) {
    log::Get("edge")->warn("outbox: prune failed: {}", n.error().ToString());
  }
}

// ---- DispatcherHost ---------------------------------------------------------------------

void EdgeSession::SendProgress(const std::string& command_id, pb::Chunk chunk,
                               std::function<void()> ack) {
  bool queued = false;
  {
    std::lock_guard lock(mu_);
    if (StreamUpLocked()) {
      pb::EdgeEvent ev;
      auto* p = ev.mutable_command_progress();
      p->set_command_id(command_id);
      *p->mutable_chunk() = std::move(chunk);
      queued = SendLocked(std::move(ev), [ack](bool) { ack(); });
    }
  }
  if (!queued) ack();  // no stream: the chunk is dropped (the result keeps the output's tail)
}

void EdgeSession::SendResult(const std::string& command_id, const pb::EdgeResult& result) {
  std::lock_guard lock(mu_);
  if (StreamUpLocked()) SendResultLocked(command_id, result);
}

void EdgeSession::ConfigApplied(const config::AgentConfig& config, bool capabilities_changed) {
  std::lock_guard lock(mu_);
  const bool interval_changed =
      config.cluster.heartbeat_interval_secs != config_.cluster.heartbeat_interval_secs;
  config_ = config;
  status_.heartbeat_interval_secs = config_.cluster.heartbeat_interval_secs;
  if (interval_changed && StreamUpLocked()) ScheduleHeartbeatLocked();  // at once
  if (capabilities_changed && StreamUpLocked()) SendCapabilitiesLocked();
  if (deps_.status_changed) deps_.status_changed();  // config_version
}

void EdgeSession::SetStateLocked(std::string_view state) {
  if (status_.state == state) return;
  status_.state = state;
  if (deps_.status_changed) deps_.status_changed();
}

void EdgeSession::DrainRequested() {
  std::lock_guard lock(mu_);
  if (deps_.status_changed) deps_.status_changed();  // draining: true
  // The acknowledgement: capabilities with agent.state = "draining".
  if (StreamUpLocked()) SendCapabilitiesLocked();
}

void EdgeSession::ShutdownFinished() {
  std::lock_guard lock(mu_);
  shutdown_finished_ = true;
  loop_.SkipBackoff();  // a backoff wait ends at once: the next attempt exits
  SetStateLocked("shutting_down");
  if (StreamUpLocked()) {
    log::Get("edge")->info("shutdown: every command ended; closing edge stream {}", stream_id_);
    stream_->Finish();  // WritesDone once the queued results are written
    std::shared_ptr<EdgeStream> s = stream_;
    timers_.After(options_.close_timeout, [s] { s->Cancel(); });
  }
  cv_.notify_all();
}

}  // namespace edge::agentedge
