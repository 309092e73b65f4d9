// CloudEventsService.startStreaming on the controller's gRPC port (seeds/003, wire.md §3):
// the engine side of a compute member's stream, as a ServerBidiReactor.
//
//   metadata `authorization: Bearer <compute token>` (ComputeTokens) — missing or invalid →
//   UNAUTHENTICATED; without ROLE_M2M → PERMISSION_DENIED.
//   first message: a CalculationMemberJoinEvent, else INVALID_ARGUMENT (also for an event
//   that does not decode, or a join body that does not parse); joinedLegalEntityId other than
//   the token's tenant → PERMISSION_DENIED (absent = the token's tenant). Then the hub takes
//   the member and the stream answers with CalculationMemberGreetEvent {id, memberId,
//   joinedLegalEntityId, success:true}.
//   after it: every event counts as activity; processor and criteria responses go to the
//   hub; acks and the member's keep-alives need nothing more; other events are logged and
//   ignored. Writes go through one queue with one write in flight.
// The other methods of the service are not offered (UNIMPLEMENTED).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/grpc_write_queue.h"
#include "controller/compute_hub.h"
#include "controller/compute_tokens.h"
#include "controller/refusal_log.h"
#include "cyoda/cyoda-cloud-api.grpc.pb.h"

namespace edge::controller {

struct ComputeStreamDeps {
  ComputeTokens& tokens;
  ComputeHub& hub;
  RefusalLog* refusals = nullptr;
};

class ComputeMemberStream final
    : public grpc::ServerBidiReactor<compute::ce::CloudEvent, compute::ce::CloudEvent>,
      public MemberSink,
      public std::enable_shared_from_this<ComputeMemberStream> {
 public:
  static grpc::ServerBidiReactor<compute::ce::CloudEvent, compute::ce::CloudEvent>* Start(
      grpc::CallbackServerContext* ctx, ComputeStreamDeps deps);
  ComputeMemberStream(grpc::CallbackServerContext* ctx, ComputeStreamDeps deps)
      : ctx_(ctx), deps_(deps) {}

  bool Send(const compute::ce::CloudEvent& event) override;
  void Close(const grpc::Status& status) override;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  void Begin();
  grpc::Status Handle(const compute::ce::CloudEvent& event);
  grpc::Status HandleJoin(const compute::DecodedEvent& event);
  void Refused(const std::string& line);

  grpc::CallbackServerContext* ctx_;
  ComputeStreamDeps deps_;
  std::shared_ptr<ComputeMemberStream> self_;
  ComputeTokenClaims claims_;
  std::string member_id_;  // set by the join
  compute::ce::CloudEvent in_;

  // One write in flight; Close drops what is queued and finishes after that write.
  WriteQueue<compute::ce::CloudEvent> writes_;
  void Apply(WriteQueue<compute::ce::CloudEvent>::Step step);
};

class ComputeServiceImpl final
    : public org::cyoda::cloud::api::grpc::CloudEventsService::CallbackService {
 public:
  explicit ComputeServiceImpl(ComputeStreamDeps deps) : deps_(deps) {}
  grpc::ServerBidiReactor<compute::ce::CloudEvent, compute::ce::CloudEvent>* startStreaming(
      grpc::CallbackServerContext* ctx) override {
    return ComputeMemberStream::Start(ctx, deps_);
  }

 private:
  ComputeStreamDeps deps_;
};

}  // namespace edge::controller
