// ComputeHub: the engine side of the compute-member protocol (seeds/003, wire.md §3) — the
// members that joined (their tenant, tags, last activity) and the dispatches in flight.
//
//   Join (under the member id the stream greeted it with): waiting dispatches that now find a
//   member are sent. Every event from a member counts as activity (Seen). A member silent for
//   compute.keepalive_timeout is ended with DEADLINE_EXCEEDED; every member gets a
//   CalculationMemberKeepAliveEvent every compute.keepalive_interval.
//   Dispatch: the members of the tenant whose tags intersect the request's (any member of the
//   tenant for no tags), one chosen at random; none → NO_COMPUTE_MEMBER_FOR_TAG (after
//   compute.member_wait); no answer within the timeout (compute.dispatch_timeout) →
//   DISPATCH_TIMEOUT; the member leaves first → COMPUTE_MEMBER_DISCONNECTED (every pending call
//   of that member). An answer is accepted only from the member the call went to.
//
// Sweep() does the time-driven part once on the injected clock (tests call it); Start() runs
// it on a thread every `sweep_period`. Callbacks and stream writes happen outside the hub's
// lock. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/compute/cloudevent_codec.h"
#include "common/clock.h"
#include "common/random.h"

namespace edge::controller {

struct ComputeSettings {
  std::chrono::milliseconds keepalive_interval{10'000};
  std::chrono::milliseconds keepalive_timeout{30'000};
  std::chrono::milliseconds dispatch_timeout{30'000};
  std::chrono::milliseconds member_wait{0};
  std::chrono::milliseconds sweep_period{100};
};

// The stream of one member, as the hub uses it.
class MemberSink {
 public:
  virtual ~MemberSink() = default;
  // Queues an event; false when the stream is over.
  virtual bool Send(const compute::ce::CloudEvent& event) = 0;
  virtual void Close(const grpc::Status& status) = 0;
};

struct MemberInfo {
  std::string id;
  std::string tenant;
  std::string subject;  // the token's sub
  std::string peer;
  std::vector<std::string> tags;
  int64_t connected_since_ms = 0;
  int64_t last_seen_ms = 0;
  size_t calls_in_flight = 0;
};

struct DispatchRequest {
  std::string tenant;
  std::vector<std::string> tags;
  compute::CalculationRequest::Kind kind = compute::CalculationRequest::Kind::kProcessor;
  std::string name;
  std::string entity_id;  // "" = a new UUID
  nlohmann::json data = nlohmann::json::object();
  std::optional<std::chrono::milliseconds> timeout;      // default compute.dispatch_timeout
  std::optional<std::chrono::milliseconds> member_wait;  // default compute.member_wait
  // The auth context attributes (authtype, authid, authclaims) put on the event.
  std::map<std::string, std::string> auth;
};

struct DispatchResult {
  // "" when a member answered; else NO_COMPUTE_MEMBER_FOR_TAG, COMPUTE_MEMBER_DISCONNECTED,
  // DISPATCH_TIMEOUT or INVALID_ARGUMENT.
  std::string error_code;
  std::string message;
  std::string request_id;
  std::string member_id;
  bool success = false;     // the member's "success"
  nlohmann::json response;  // the member's response body
  std::chrono::milliseconds duration{0};
};

class ComputeHub {
 public:
  using Done = std::function<void(DispatchResult)>;

  ComputeHub(Clock& clock, Random& random, ComputeSettings settings)
      : clock_(clock), random_(random), settings_(settings) {}
  ~ComputeHub();
  ComputeHub(const ComputeHub&) = delete;
  ComputeHub& operator=(const ComputeHub&) = delete;

  // `member_id`: a new UUID the stream chose (and greeted the member with).
  void Join(const std::string& member_id, const std::string& tenant,
            const std::vector<std::string>& tags, const std::string& subject,
            const std::string& peer, std::shared_ptr<MemberSink> sink);
  // The member's stream ended: its pending calls fail with COMPUTE_MEMBER_DISCONNECTED.
  void Leave(const std::string& member_id);
  void Seen(const std::string& member_id);
  // A processor or criteria response from `member_id`.
  void OnResponse(const std::string& member_id, const nlohmann::json& body);

  // `done` is called exactly once (possibly on this thread).
  void Dispatch(DispatchRequest request, Done done);

  std::vector<MemberInfo> Members() const;
  size_t pending() const;

  void Sweep();
  void Start();
  void Stop();
  // Ends every member's stream with `status` (the controller is stopping) and fails what is
  // pending with COMPUTE_MEMBER_DISCONNECTED.
  void CloseAll(const grpc::Status& status);

 private:
  struct Member {
    MemberInfo info;
    std::shared_ptr<MemberSink> sink;
    Clock::MonoTime last_seen;
    Clock::MonoTime next_keepalive;
  };
  struct Pending {
    std::string member_id;
    Clock::MonoTime started;
    Clock::MonoTime deadline;
    Done done;
  };
  struct Waiting {
    DispatchRequest request;
    Clock::MonoTime started;
    Clock::MonoTime deadline;
    Done done;
  };
  using Actions = std::vector<std::function<void()>>;

  // Sends `request` to a member now, or returns false when none matches. mu_ held.
  bool PlaceLocked(DispatchRequest& request, Clock::MonoTime started, Done& done, Actions& actions);
  void RemoveMemberLocked(const std::string& member_id, const std::string& why, Actions& actions);
  static void Run(Actions& actions);

  Clock& clock_;
  Random& random_;
  ComputeSettings settings_;
  mutable std::mutex mu_;
  std::map<std::string, Member> members_;
  std::map<std::string, Pending> pending_;  // by request id
  std::deque<Waiting> waiting_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace edge::controller
