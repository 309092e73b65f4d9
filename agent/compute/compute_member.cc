#include "agent/compute/compute_member.h"

#include "common/log.h"
#include "common/random.h"

namespace edge::compute {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

std::string Describe(const grpc::Status& st) {
  if (st.ok()) return "closed by the server (OK)";
  return "status " + std::to_string(static_cast<int>(st.error_code())) + ": " +
         log::Escape(st.error_message(), 512);
}

// The requestId of a body that did not parse, if it has one to answer to.
std::string RequestIdOf(const json& body) {
  for (const char* key : {"requestId", "id"}) {
    auto it = body.find(key);
    if (it != body.end() && it->is_string() && !it->get<std::string>().empty()) {
      return it->get<std::string>();
    }
  }
  return "";
}

}  // namespace

ComputeMember::ComputeMember(config::ComputeConfig config, MemberDeps deps, MemberOptions options)
    : config_(std::move(config)),
      deps_(std::move(deps)),
      options_(options),
      mapper_(config_),
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
                      log::Get("compute")->info("compute: reconnecting to {} in {} ms",
                                                deps_.address, delay.count());
                    },
                .ended =
                    [this] {
                      std::lock_guard lock(mu_);
                      SetStateLocked("stopped");
                    },
            }) {
  anchor_->member = this;
}

Result<std::unique_ptr<ComputeMember>> ComputeMember::Create(config::ComputeConfig config,
                                                             MemberDeps deps,
                                                             MemberOptions options) {
  if (!deps.channel) {
    return MakeError(ErrorCode::kInvalidArgument, "compute member: no channel to the server");
  }
  if (!deps.token) {
    return MakeError(ErrorCode::kInvalidArgument, "compute member: no bearer token source");
  }
  std::unique_ptr<ComputeMember> m(new ComputeMember(std::move(config), std::move(deps), options));
  m->stub_ = org::cyoda::cloud::api::grpc::CloudEventsService::NewStub(m->deps_.channel);
  m->status_.state = "starting";
  m->status_.address = m->deps_.address;
  m->status_.legal_entity_id = m->config_.legal_entity_id;
  return m;
}

ComputeMember::~ComputeMember() {
  Stop();
}

Status ComputeMember::Start() {
  if (!loop_.Start()) {
    return MakeError(ErrorCode::kAlreadyExists, "compute member already started");
  }
  return OkStatus();
}

void ComputeMember::Stop() {
  loop_.Stop();  // Interrupt(), then the thread ends
  timers_.Stop();
  {
    // Waits for an answer being written by an executor thread.
    std::lock_guard l(anchor_->mu);
    anchor_->member = nullptr;
  }
  std::lock_guard lock(mu_);
  SetStateLocked("stopped");
}

MemberStatus ComputeMember::status() const {
  std::lock_guard lock(mu_);
  MemberStatus s = status_;
  s.calls_running = deps_.executor.running(std::string(kDoorName));
  return s;
}

void ComputeMember::SetError(const std::string& what) {
  log::Get("compute")->warn("{}", what);
  std::lock_guard lock(mu_);
  status_.last_error = what;
}

// ---- the control thread (the ReconnectLoop's) ---------------------------------------------

void ComputeMember::Interrupt() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  if (stream_) stream_->Cancel();
  cv_.notify_all();
}

ReconnectLoop::Next ComputeMember::Attempt() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return ReconnectLoop::Next::kExit;
    SetStateLocked("connecting");
  }
  auto token = deps_.token();
  if (!token) {
    SetError("compute: no bearer token: " + token.error().ToString());
    return ReconnectLoop::Next::kBackoff;
  }
  uint64_t gen = 0;
  {
    std::unique_lock lock(mu_);
    if (stopping_) return ReconnectLoop::Next::kExit;
    OpenStreamLocked(*token);
    gen = gen_;
    cv_.wait(lock, [this] { return stopping_ || stream_done_; });
    if (stopping_ && !stream_done_) {
      if (stream_) stream_->Cancel();
      // OnDone follows a cancel promptly; the bound only guards against a stuck transport.
      cv_.wait_for(lock, std::chrono::seconds(10), [this] { return stream_done_; });
    }
    if (keepalive_timer_ != 0) timers_.Cancel(keepalive_timer_);
    if (greet_timer_ != 0) timers_.Cancel(greet_timer_);
    keepalive_timer_ = greet_timer_ = 0;
    stream_.reset();
    status_.member_id.clear();
    if (stopping_) return ReconnectLoop::Next::kExit;
  }
  grpc::Status st;
  {
    std::lock_guard lock(mu_);
    st = done_status_;
  }
  SetError("compute stream " + std::to_string(gen) + " to " + deps_.address +
           " ended: " + Describe(st));
  return ReconnectLoop::Next::kBackoff;
}

void ComputeMember::OpenStreamLocked(const std::string& token) {
  ++gen_;
  const uint64_t gen = gen_;
  stream_done_ = false;
  greeted_ = false;
  done_status_ = grpc::Status::OK;
  loop_.StreamOpened();
  ComputeStream::Callbacks cb;
  cb.on_read = [this, gen](io::cloudevents::v1::CloudEvent ev) {
    return OnEvent(gen, std::move(ev));
  };
  cb.on_done = [this, gen](const grpc::Status& st) {
    std::lock_guard lock(mu_);
    if (gen == gen_) {
      stream_done_ = true;
      done_status_ = st;
    }
    cv_.notify_all();
  };
  stream_ = StartComputeStream(*stub_, token, std::move(cb), calls_);
  ++status_.attempts;
  SetStateLocked("connecting");

  JoinEvent join;
  join.id = NewUuidV4();
  join.tags = config_.tags;
  join.joined_legal_entity_id = config_.legal_entity_id;
  // Armed before the join goes out, so the greet timeout counts from the join on the injected
  // clock whatever the thread scheduling (the clock cannot move between send and arm).
  greet_timer_ = timers_.After(options_.greet_timeout, [this, gen] {
    std::lock_guard lock(mu_);
    if (gen != gen_ || greeted_ || !StreamUpLocked()) return;
    greet_timer_ = 0;
    log::Get("compute")->warn("compute: no greet from {} within {} ms: reconnecting", deps_.address,
                              options_.greet_timeout.count());
    stream_->Cancel();
  });
  SendLocked(gen, kJoinEvent, ToJson(join));
}

bool ComputeMember::StreamUpLocked() const {
  return stream_ && !stream_done_;
}

bool ComputeMember::SendLocked(uint64_t gen, std::string_view type, const json& body) {
  if (gen != gen_ || !StreamUpLocked()) return false;
  return stream_->Send(MakeCloudEvent(type, body, kClientSource));
}

// ---- events from the server (a gRPC thread) ----------------------------------------------

bool ComputeMember::OnEvent(uint64_t gen, io::cloudevents::v1::CloudEvent event) {
  auto log = log::Get("compute");
  auto decoded = DecodeCloudEvent(event);
  {
    std::lock_guard lock(mu_);
    if (gen != gen_) return true;
    status_.last_server_event_ms = ToEpochMillis(deps_.clock.Now());
  }
  if (!decoded) {
    // proto_data, no data, not JSON: refused with a log line; the stream goes on.
    log->warn("compute: event {} ({}) refused: {}", log::Escape(event.id(), 128),
              log::Escape(event.type(), 128), decoded.error().message);
    return true;
  }
  const std::string& type = decoded->type;
  auto ack = [&](const std::string& source_id) {
    EventAck a;
    a.id = NewUuidV4();
    a.source_event_id = source_id;
    std::lock_guard lock(mu_);
    SendLocked(gen, kAckEvent, ToJson(a));
  };
  if (type == kGreetEvent) {
    auto greet = ParseGreet(decoded->body);
    if (!greet) {
      log->warn("compute: greet refused: {}; reconnecting", greet.error().message);
      return false;
    }
    {
      std::lock_guard lock(mu_);
      if (gen != gen_) return true;
      greeted_ = true;
      if (greet_timer_ != 0) timers_.Cancel(greet_timer_);
      greet_timer_ = 0;
      // Only a greet proves the server took the member (design.md §9).
      loop_.Taken();
      status_.member_id = greet->member_id;
      if (!greet->joined_legal_entity_id.empty()) {
        status_.legal_entity_id = greet->joined_legal_entity_id;
      }
      SetStateLocked("joined");
      ++status_.joins;
      status_.joined_at_ms = ToEpochMillis(deps_.clock.Now());
      status_.last_error.clear();
      ScheduleKeepAliveLocked();
    }
    log->info("compute: joined {} as member {} (legal entity {}, tags [{}])", deps_.address,
              log::Escape(greet->member_id, 128), log::Escape(greet->joined_legal_entity_id, 128),
              [&] {
                std::string t;
                for (const auto& tag : config_.tags)
                  t += (t.empty() ? "" : ", ") + tag;
                return t;
              }());
    ack(decoded->id);
    return true;
  }
  if (type == kKeepAliveEvent) {
    ack(decoded->id);
    return true;
  }
  if (type == kProcessorRequest || type == kCriteriaRequest) {
    const auto kind = type == kProcessorRequest ? CalculationRequest::Kind::kProcessor
                                                : CalculationRequest::Kind::kCriteria;
    auto request = ParseCalculationRequest(decoded->body, kind);
    if (!request) {
      const std::string rid = RequestIdOf(decoded->body);
      log->warn("compute: {} {} refused: {}", type, log::Escape(rid, 128), request.error().message);
      if (rid.empty()) return true;  // nothing to answer to
      CalculationRequest stub;
      stub.kind = kind;
      stub.request_id = rid;
      if (auto e = decoded->body.find("entityId"); e != decoded->body.end() && e->is_string()) {
        stub.entity_id = e->get<std::string>();
      }
      Answer(gen, stub, CallMapper::Failure(stub, ErrorFor(request.error())));
      return true;
    }
    OnRequest(gen, std::move(*request), decoded->attributes);
    return true;
  }
  if (type == kAckEvent) return true;  // the server acknowledging ours
  log->info("compute: event type {} ignored", log::Escape(type, 128));
  return true;
}

void ComputeMember::OnRequest(uint64_t gen, CalculationRequest request,
                              const std::map<std::string, std::string>& attributes) {
  auto inv = mapper_.ToInvoke(request, attributes);
  if (!inv) {
    log::Get("compute")->warn("compute: request {} refused: {}",
                              log::Escape(request.request_id, 128), inv.error().message);
    Answer(gen, request, CallMapper::Failure(request, ErrorFor(inv.error())));
    return;
  }
  auto shared = std::make_shared<CalculationRequest>(std::move(request));
  std::shared_ptr<Anchor> anchor = anchor_;
  deps_.executor.Invoke(std::move(*inv), sandbox::CancelToken(), nullptr,
                        [anchor, gen, shared](sandbox::InvokeResult result) {
                          if (result.already_running) {
                            // The same requestId runs already: its one answer is the answer.
                            log::Get("compute")->info(
                                "compute: request {} repeated while it runs: answered once",
                                log::Escape(shared->request_id, 128));
                            return;
                          }
                          std::lock_guard l(anchor->mu);
                          ComputeMember* m = anchor->member;
                          if (m == nullptr) return;  // the member has stopped
                          m->Answer(gen, *shared, m->mapper_.Answer(*shared, result));
                        });
}

void ComputeMember::Answer(uint64_t gen, const CalculationRequest& request, json response) {
  const bool processor = request.kind == CalculationRequest::Kind::kProcessor;
  const bool ok = response.value("success", false);
  std::lock_guard lock(mu_);
  if (!SendLocked(gen, processor ? kProcessorResponse : kCriteriaResponse, response)) {
    ++status_.answers_dropped;
    log::Get("compute")->warn("compute: the answer to request {} is dropped: its stream has ended",
                              log::Escape(request.request_id, 128));
    return;
  }
  ++status_.calls_answered;
  if (!ok) ++status_.calls_failed;
}

// ---- keep-alive --------------------------------------------------------------------------

void ComputeMember::ScheduleKeepAliveLocked() {
  if (keepalive_timer_ != 0) timers_.Cancel(keepalive_timer_);
  const uint64_t gen = gen_;
  keepalive_timer_ = timers_.After(config_.keepalive_interval, [this, gen] { OnKeepAlive(gen); });
}

void ComputeMember::OnKeepAlive(uint64_t gen) {
  std::lock_guard lock(mu_);
  if (gen != gen_ || !StreamUpLocked()) return;
  keepalive_timer_ = 0;
  ScheduleKeepAliveLocked();
  KeepAliveEvent k;
  k.id = NewUuidV4();
  k.member_id = status_.member_id;
  if (SendLocked(gen, kKeepAliveEvent, ToJson(k))) {
    status_.last_keepalive_sent_ms = ToEpochMillis(deps_.clock.Now());
  }
}

void ComputeMember::SetStateLocked(std::string_view state) {
  if (status_.state == state) return;
  status_.state = state;
  if (deps_.status_changed) deps_.status_changed();
}

}  // namespace edge::compute
