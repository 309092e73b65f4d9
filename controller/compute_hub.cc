#include "controller/compute_hub.h"

#include <algorithm>

#include "common/log.h"
#include "common/thread_name.h"

namespace edge::controller {

namespace {

using compute::CalculationRequest;
using nlohmann::json;
using std::chrono::milliseconds;

bool Intersects(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v)
    s += (s.empty() ? "" : ",") + x;
  return s;
}

DispatchResult Failed(std::string code, std::string message, std::string request_id = "",
                      std::string member_id = "") {
  DispatchResult r;
  r.error_code = std::move(code);
  r.message = std::move(message);
  r.request_id = std::move(request_id);
  r.member_id = std::move(member_id);
  return r;
}

}  // namespace

ComputeHub::~ComputeHub() {
  Stop();
}

void ComputeHub::Run(Actions& actions) {
  for (auto& a : actions)
    a();
  actions.clear();
}

void ComputeHub::Join(const std::string& id, const std::string& tenant,
                      const std::vector<std::string>& tags, const std::string& subject,
                      const std::string& peer, std::shared_ptr<MemberSink> sink) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    const auto now = clock_.Monotonic();
    Member m;
    m.info.id = id;
    m.info.tenant = tenant;
    m.info.subject = subject;
    m.info.peer = peer;
    m.info.tags = tags;
    m.info.connected_since_ms = ToEpochMillis(clock_.Now());
    m.info.last_seen_ms = m.info.connected_since_ms;
    m.sink = std::move(sink);
    m.last_seen = now;
    m.next_keepalive = now + settings_.keepalive_interval;
    members_[id] = std::move(m);
    // Dispatches that waited for a member may go now.
    std::deque<Waiting> still;
    for (auto& w : waiting_) {
      if (!PlaceLocked(w.request, w.started, w.done, actions)) still.push_back(std::move(w));
    }
    waiting_.swap(still);
  }
  log::Get("compute")->info("compute member {} joined (tenant {}, tags [{}], {})", id,
                            log::Escape(tenant, 128), log::Escape(Joined(tags), 512),
                            log::Escape(peer, 128));
  Run(actions);
}

void ComputeHub::RemoveMemberLocked(const std::string& member_id, const std::string& why,
                                    Actions& actions) {
  if (members_.erase(member_id) == 0) return;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.member_id != member_id) {
      ++it;
      continue;
    }
    auto done = std::move(it->second.done);
    DispatchResult r = Failed(std::string(compute::kComputeMemberDisconnected),
                              "member disconnected: " + why, it->first, member_id);
    r.duration = std::chrono::duration_cast<milliseconds>(clock_.Monotonic() - it->second.started);
    actions.push_back([done = std::move(done), r = std::move(r)] { done(r); });
    it = pending_.erase(it);
  }
}

void ComputeHub::Leave(const std::string& member_id) {
  Actions actions;
  bool found = false;
  {
    std::lock_guard lock(mu_);
    found = members_.contains(member_id);
    RemoveMemberLocked(member_id, "its stream ended", actions);
  }
  if (found) log::Get("compute")->info("compute member {} left", member_id);
  Run(actions);
}

void ComputeHub::Seen(const std::string& member_id) {
  std::lock_guard lock(mu_);
  auto it = members_.find(member_id);
  if (it == members_.end()) return;
  it->second.last_seen = clock_.Monotonic();
  it->second.info.last_seen_ms = ToEpochMillis(clock_.Now());
}

void ComputeHub::OnResponse(const std::string& member_id, const json& body) {
  const std::string rid = body.value("requestId", std::string());
  Done done;
  DispatchResult r;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(rid);
    if (it == pending_.end() || it->second.member_id != member_id) {
      log::Get("compute")->warn("compute member {}: response to unknown request {} ignored",
                                member_id, log::Escape(rid, 128));
      return;
    }
    done = std::move(it->second.done);
    r.request_id = rid;
    r.member_id = member_id;
    r.response = body;
    r.success =
        body.contains("success") && body["success"].is_boolean() && body["success"].get<bool>();
    r.duration = std::chrono::duration_cast<milliseconds>(clock_.Monotonic() - it->second.started);
    pending_.erase(it);
    if (auto m = members_.find(member_id);
        m != members_.end() && m->second.info.calls_in_flight > 0)
      --m->second.info.calls_in_flight;
  }
  done(std::move(r));
}

bool ComputeHub::PlaceLocked(DispatchRequest& request, Clock::MonoTime started, Done& done,
                             Actions& actions) {
  std::vector<Member*> candidates;
  for (auto& [id, m] : members_) {
    if (m.info.tenant != request.tenant) continue;
    if (!request.tags.empty() && !Intersects(m.info.tags, request.tags)) continue;
    candidates.push_back(&m);
  }
  if (candidates.empty()) return false;
  Member& m = *candidates[random_.Uniform(candidates.size())];
  const bool processor = request.kind == CalculationRequest::Kind::kProcessor;
  CalculationRequest req;
  req.kind = request.kind;
  req.id = req.request_id = NewUuidV4();
  req.entity_id = request.entity_id.empty() ? NewUuidV4() : request.entity_id;
  req.handler_id = req.handler_name = request.name;
  if (!processor) req.target = "TRANSITION";
  req.workflow = json{{"id", "edge-controller"}, {"name", "edge-controller"}};
  req.transition = json{{"id", "dispatch"}, {"name", "dispatch"}};
  req.transaction_id = NewUuidV4();
  req.payload = json{{"type", "JSON"},
                     {"data", request.data},
                     {"meta", {{"id", req.entity_id}, {"transactionId", req.transaction_id}}}};
  compute::ce::CloudEvent ev =
      compute::MakeCloudEvent(processor ? compute::kProcessorRequest : compute::kCriteriaRequest,
                              compute::ToJson(req), compute::kServerSource);
  for (const auto& [k, v] : request.auth)
    (*ev.mutable_attributes())[k].set_ce_string(v);
  const auto timeout = request.timeout.value_or(settings_.dispatch_timeout);
  pending_[req.request_id] =
      Pending{m.info.id, started, clock_.Monotonic() + timeout, std::move(done)};
  ++m.info.calls_in_flight;
  std::shared_ptr<MemberSink> sink = m.sink;
  const std::string rid = req.request_id, mid = m.info.id;
  actions.push_back([this, sink, ev = std::move(ev), rid, mid] {
    if (sink->Send(ev)) return;
    Done d;
    DispatchResult r;
    {
      std::lock_guard lock(mu_);
      auto it = pending_.find(rid);
      if (it == pending_.end()) return;
      d = std::move(it->second.done);
      pending_.erase(it);
    }
    d(Failed(std::string(compute::kComputeMemberDisconnected),
             "member disconnected before the request was sent", rid, mid));
  });
  return true;
}

void ComputeHub::Dispatch(DispatchRequest request, Done done) {
  if (request.name.empty()) {
    return done(Failed("INVALID_ARGUMENT", "a processor or criteria name is required"));
  }
  if (request.tenant.empty()) return done(Failed("INVALID_ARGUMENT", "a tenant is required"));
  Actions actions;
  {
    std::lock_guard lock(mu_);
    const auto now = clock_.Monotonic();
    if (!PlaceLocked(request, now, done, actions)) {
      const auto wait = request.member_wait.value_or(settings_.member_wait);
      if (wait <= milliseconds(0)) {
        actions.push_back(
            [done = std::move(done), tags = Joined(request.tags), tenant = request.tenant] {
              done(Failed(std::string(compute::kNoComputeMemberForTag),
                          "no compute member of tenant " + tenant + " for tags [" + tags + "]"));
            });
      } else {
        waiting_.push_back(Waiting{std::move(request), now, now + wait, std::move(done)});
      }
    }
  }
  Run(actions);
}

std::vector<MemberInfo> ComputeHub::Members() const {
  std::lock_guard lock(mu_);
  std::vector<MemberInfo> out;
  for (const auto& [id, m] : members_)
    out.push_back(m.info);
  std::sort(out.begin(), out.end(), [](const MemberInfo& a, const MemberInfo& b) {
    return a.connected_since_ms < b.connected_since_ms ||
           (a.connected_since_ms == b.connected_since_ms && a.id < b.id);
  });
  return out;
}

size_t ComputeHub::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size() + waiting_.size();
}

void ComputeHub::Sweep() {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    const auto now = clock_.Monotonic();
    std::vector<std::string> silent;
    for (auto& [id, m] : members_) {
      if (now - m.last_seen >= settings_.keepalive_timeout) {
        silent.push_back(id);
        continue;
      }
      if (now >= m.next_keepalive) {
        m.next_keepalive = now + settings_.keepalive_interval;
        compute::KeepAliveEvent k{NewUuidV4(), id, true};
        auto ev = compute::MakeCloudEvent(compute::kKeepAliveEvent, compute::ToJson(k),
                                          compute::kServerSource);
        actions.push_back([sink = m.sink, ev = std::move(ev)] { sink->Send(ev); });
      }
    }
    for (const auto& id : silent) {
      auto sink = members_[id].sink;
      const auto secs = settings_.keepalive_timeout.count();
      log::Get("compute")->warn("compute member {} silent for {} ms: ending its stream", id, secs);
      RemoveMemberLocked(id, "silent beyond compute.keepalive_timeout", actions);
      actions.push_back([sink, secs] {
        sink->Close(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                 "no keep-alive, acknowledgement or response for " +
                                     std::to_string(secs) + " ms (compute.keepalive_timeout)"));
      });
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (now < it->second.deadline) {
        ++it;
        continue;
      }
      auto done = std::move(it->second.done);
      const auto ms =
          std::chrono::duration_cast<milliseconds>(it->second.deadline - it->second.started);
      DispatchResult r = Failed(std::string(compute::kDispatchTimeout),
                                "no response within " + std::to_string(ms.count()) + " ms",
                                it->first, it->second.member_id);
      r.duration = ms;
      if (auto m = members_.find(it->second.member_id);
          m != members_.end() && m->second.info.calls_in_flight > 0) {
        --m->second.info.calls_in_flight;
      }
      actions.push_back([done = std::move(done), r = std::move(r)] { done(r); });
      it = pending_.erase(it);
    }
    std::deque<Waiting> still;
    for (auto& w : waiting_) {
      if (now < w.deadline) {
        still.push_back(std::move(w));
        continue;
      }
      const auto ms = std::chrono::duration_cast<milliseconds>(w.deadline - w.started);
      actions.push_back(
          [done = std::move(w.done), tags = Joined(w.request.tags), tenant = w.request.tenant, ms] {
            done(Failed(std::string(compute::kNoComputeMemberForTag),
                        "no compute member of tenant " + tenant + " for tags [" + tags +
                            "] within " + std::to_string(ms.count()) + " ms"));
          });
    }
    waiting_.swap(still);
  }
  Run(actions);
}

void ComputeHub::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    NameThisThread("ctl-compute");
    std::unique_lock lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, settings_.sweep_period, [this] { return stop_; });
      if (stop_) break;
      lock.unlock();
      Sweep();
      lock.lock();
    }
  });
}

void ComputeHub::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void ComputeHub::CloseAll(const grpc::Status& status) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    std::vector<std::string> ids;
    for (const auto& [id, m] : members_)
      ids.push_back(id);
    for (const auto& id : ids) {
      auto sink = members_[id].sink;
      RemoveMemberLocked(id, status.error_message(), actions);
      actions.push_back([sink, status] { sink->Close(status); });
    }
    for (auto& w : waiting_) {
      actions.push_back([done = std::move(w.done), msg = status.error_message()] {
        done(Failed(std::string(compute::kNoComputeMemberForTag), msg));
      });
    }
    waiting_.clear();
  }
  Run(actions);
}

}  // namespace edge::controller
