// ComputeMember: the agent's side of the compute-member stream (seeds/003, wire.md §3) — a
// control thread runs the connect loop, a TimerQueue on the injected Clock runs the timers:
//
//   loop: bearer token (re-read from compute.token_file at every connect, so a replaced file
//         is used by the next stream; never logged) → startStreaming (authorization: Bearer)
//         → CalculationMemberJoinEvent {id, tags, joinedLegalEntityId, success:true} first →
//         wait for the stream to end → backoff → again.
//   greet: its memberId is recorded, the greet is acknowledged (EventAckResponse), the
//         backoff is reset (only a greet resets it: a server that accepts and drops streams
//         cannot cause a tight loop), and the member's own keep-alive starts: a
//         CalculationMemberKeepAliveEvent every compute.keepalive_interval (10 s).
//         No greet within greet_timeout → the stream is cancelled and the loop goes on.
//   server keep-alive → EventAckResponse {sourceEventId = its id}.
//   EntityProcessorCalculationRequest / EntityCriteriaCalculationRequest → CallMapper →
//         ExecutorApi::Invoke (the executor's thread runs the tool) → the response on the
//         stream the request came on. Every request is answered, success:false when it cannot
//         be run; a request whose body does not parse is answered when it has a requestId.
//   unknown event types are logged and ignored; proto_data is refused with a log line.
//
// The loop, its backoff and its reset rule are the shared ReconnectLoop (common/
// reconnect_loop.h), as the edge session's; the stream is the shared client reactor
// (agent/compute/compute_stream.h). Stop() ends every wait and the stream at once. Owns the
// stream, its TimerQueue and its ReconnectLoop (the thread); borrows the executor and the
// injected Clock and Backoff. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "agent/compute/call_mapper.h"
#include "agent/compute/compute_stream.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/reconnect_loop.h"
#include "common/timer_queue.h"
#include "config/agent_config.h"
#include "sandbox/executor_api.h"

namespace edge::compute {

struct MemberDeps {
  Clock& clock;
  Backoff& backoff;  // reconnects: full jitter (base 1 s, cap 60 s), reset after a greet
  sandbox::ExecutorApi& executor;
  std::shared_ptr<grpc::Channel> channel;
  std::string address;  // for logs and status
  // The bearer token, read when a stream is opened (compute.token_file).
  std::function<Result<std::string>()> token;
  // Called when the state changes (connecting, joined, ...), so the daemon's status file
  // shows it at once; may be called with the member's lock held: must not block nor call
  // back into the member. Optional.
  std::function<void()> status_changed;
};

struct MemberOptions {
  std::chrono::milliseconds greet_timeout{std::chrono::seconds(30)};
};

struct MemberStatus {
  std::string state;  // starting | connecting | joined | backoff | stopped
  std::string address;
  std::string member_id;  // of the current stream ("" until greeted)
  std::string legal_entity_id;
  uint64_t attempts = 0;  // streams opened
  uint64_t joins = 0;     // greets received
  int64_t joined_at_ms = 0;
  int64_t last_keepalive_sent_ms = 0;
  int64_t last_server_event_ms = 0;
  uint64_t calls_running = 0;
  uint64_t calls_answered = 0;
  uint64_t calls_failed = 0;     // answered success:false
  uint64_t answers_dropped = 0;  // finished after their stream ended
  std::chrono::milliseconds last_backoff{0};
  std::string last_error;
};

class ComputeMember {
 public:
  // INVALID_ARGUMENT without a channel or a token source.
  static Result<std::unique_ptr<ComputeMember>> Create(config::ComputeConfig config,
                                                       MemberDeps deps, MemberOptions options);
  ~ComputeMember();
  ComputeMember(const ComputeMember&) = delete;
  ComputeMember& operator=(const ComputeMember&) = delete;

  // Starts the control thread (non-blocking).
  Status Start();
  // Ends every wait and the stream; returns when the thread has ended. Idempotent. Calls still
  // running finish in the executor; their answers are dropped.
  void Stop();

  MemberStatus status() const;
  // The timers run on the injected clock: tests advance a ManualClock and Poke() them.
  TimerQueue& timers() { return timers_; }

 private:
  ComputeMember(config::ComputeConfig config, MemberDeps deps, MemberOptions options);

  // One pass of the reconnect loop (common/reconnect_loop.h): token, the stream, its end.
  ReconnectLoop::Next Attempt();
  // Stop(): ends the wait for the stream in progress and the stream.
  void Interrupt();
  void SetError(const std::string& what);
  void OpenStreamLocked(const std::string& token);
  // The read side (a gRPC thread): false cancels the stream.
  bool OnEvent(uint64_t gen, io::cloudevents::v1::CloudEvent event);
  void OnRequest(uint64_t gen, CalculationRequest request,
                 const std::map<std::string, std::string>& attributes);
  void Answer(uint64_t gen, const CalculationRequest& request, nlohmann::json response);
  void ScheduleKeepAliveLocked();
  void OnKeepAlive(uint64_t gen);
  // Queues a body on the stream `gen` (false when that stream is gone). Locked: mu_ held.
  bool SendLocked(uint64_t gen, std::string_view type, const nlohmann::json& body);
  bool StreamUpLocked() const;
  // status_.state = `state`, and status_changed when it differs.
  void SetStateLocked(std::string_view state);

  // What executor callbacks reach the member through: Stop() clears it, so a call that
  // finishes after the member is gone finds nobody to answer.
  struct Anchor {
    std::mutex mu;
    ComputeMember* member = nullptr;
  };

  config::ComputeConfig config_;
  std::shared_ptr<Anchor> anchor_ = std::make_shared<Anchor>();
  MemberDeps deps_;
  MemberOptions options_;
  CallMapper mapper_;
  TimerQueue timers_;
  ReconnectLoop loop_;  // the member's thread: attempts and the backoff between them
  std::unique_ptr<org::cyoda::cloud::api::grpc::CloudEventsService::Stub> stub_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::shared_ptr<ComputeStream> stream_;
  uint64_t gen_ = 0;  // identifies the current stream in callbacks
  bool stream_done_ = false;
  bool greeted_ = false;
  grpc::Status done_status_;
  TimerQueue::TimerId keepalive_timer_ = 0;
  TimerQueue::TimerId greet_timer_ = 0;
  MemberStatus status_;
  // The stream's events run on this queue's thread. Declared last, so it is shut down and
  // joined first, while everything its callbacks use still lives: the loop's thread (joined by
  // Stop() in the destructor's body) waits for the stream's on_done, but only for 10 s after a
  // cancel, so a stalled stream may still be ending then.
  ClientCallQueue calls_{"compute-stream"};
};

}  // namespace edge::compute
