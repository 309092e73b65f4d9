#include "controller/compute_service.h"

#include "common/log.h"
#include "controller/node_cluster_service.h"

namespace edge::controller {

namespace ce = compute::ce;

namespace {

std::optional<std::string> BearerToken(const grpc::CallbackServerContext& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return std::nullopt;
  std::string v(it->second.data(), it->second.size());
  if (v.size() < 7) return std::nullopt;
  std::string scheme = v.substr(0, 7);
  for (auto& c : scheme)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "bearer ") return std::nullopt;
  return v.substr(7);
}

grpc::Status Invalid(const std::string& why) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
}

}  // namespace

grpc::ServerBidiReactor<ce::CloudEvent, ce::CloudEvent>* ComputeMemberStream::Start(
    grpc::CallbackServerContext* ctx, ComputeStreamDeps deps) {
  auto s = std::make_shared<ComputeMemberStream>(ctx, deps);
  s->self_ = s;
  s->Begin();
  return s.get();
}

void ComputeMemberStream::Refused(const std::string& line) {
  auto log = log::Get("compute");
  if (deps_.refusals) {
    deps_.refusals->Warn(log, NodeClusterServiceImpl::PeerAddress(ctx_->peer()), line);
  } else {
    log->warn("{}", line);
  }
}

void ComputeMemberStream::Begin() {
  const std::string who = "startStreaming from " + log::Escape(ctx_->peer(), 128);
  auto token = BearerToken(*ctx_);
  if (!token) {
    Refused(who + " refused: no bearer token");
    Close(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                       "metadata \"authorization: Bearer <compute token>\" is required"));
    return;
  }
  auto claims = deps_.tokens.Verify(*token);
  if (!claims) {
    Refused(who + " refused: " + log::Escape(claims.error().message, 512));
    Close(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, claims.error().message));
    return;
  }
  if (!claims->HasRole(kComputeRole)) {
    Refused(who + " refused: the token of " + log::Escape(claims->subject, 128) + " lacks " +
            std::string(kComputeRole));
    Close(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                       "startStreaming requires the role " + std::string(kComputeRole)));
    return;
  }
  claims_ = std::move(*claims);
  StartRead(&in_);
}

grpc::Status ComputeMemberStream::HandleJoin(const compute::DecodedEvent& event) {
  if (event.type != compute::kJoinEvent) {
    return Invalid("the first message must be " + std::string(compute::kJoinEvent) + ", not " +
                   event.type);
  }
  auto join = compute::ParseJoin(event.body);
  if (!join) return Invalid(join.error().message);
  if (!join->joined_legal_entity_id.empty() && join->joined_legal_entity_id != claims_.tenant_id) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "joinedLegalEntityId \"" + join->joined_legal_entity_id +
                            "\" is not the token's tenant \"" + claims_.tenant_id + "\"");
  }
  // The greet goes out before the hub may send this member a waiting dispatch.
  member_id_ = NewUuidV4();
  compute::GreetEvent greet{member_id_, member_id_, claims_.tenant_id, true};
  Send(compute::MakeCloudEvent(compute::kGreetEvent, compute::ToJson(greet),
                               compute::kServerSource));
  deps_.hub.Join(member_id_, claims_.tenant_id, join->tags, claims_.subject, ctx_->peer(),
                 shared_from_this());
  return grpc::Status::OK;
}

grpc::Status ComputeMemberStream::Handle(const ce::CloudEvent& event) {
  auto decoded = compute::DecodeCloudEvent(event);
  if (member_id_.empty()) {
    if (!decoded) return Invalid(decoded.error().message);
    return HandleJoin(*decoded);
  }
  deps_.hub.Seen(member_id_);
  if (!decoded) {
    log::Get("compute")->warn("compute member {}: event refused: {}", member_id_,
                              decoded.error().message);
    return grpc::Status::OK;
  }
  const std::string& type = decoded->type;
  if (type == compute::kProcessorResponse || type == compute::kCriteriaResponse) {
    deps_.hub.OnResponse(member_id_, decoded->body);
  } else if (type == compute::kAckEvent || type == compute::kKeepAliveEvent) {
    // activity only
  } else if (type == compute::kJoinEvent) {
    return Invalid("the member has joined already");
  } else {
    log::Get("compute")->info("compute member {}: event type {} ignored", member_id_,
                              log::Escape(type, 128));
  }
  return grpc::Status::OK;
}

void ComputeMemberStream::OnReadDone(bool ok) {
  if (!writes_.accepting()) return;
  if (!ok) {
    Close(grpc::Status::OK);
    return;
  }
  auto st = Handle(in_);
  if (!st.ok()) {
    Refused("startStreaming of " +
            (member_id_.empty() ? log::Escape(ctx_->peer(), 128) : "member " + member_id_) +
            " ended: " + log::Escape(st.error_message(), 512));
    Close(st);
    return;
  }
  StartRead(&in_);
}

bool ComputeMemberStream::Send(const ce::CloudEvent& event) {
  auto step = writes_.Push(event);
  const bool queued = step.dropped.empty();
  Apply(std::move(step));
  return queued;
}

void ComputeMemberStream::OnWriteDone(bool ok) {
  Apply(writes_.WriteDone(ok));
}

void ComputeMemberStream::Close(const grpc::Status& status) {
  Apply(writes_.FinishAfter(status, WriteQueue<ce::CloudEvent>::Then::kDropQueued));
}

void ComputeMemberStream::Apply(WriteQueue<ce::CloudEvent>::Step step) {
  if (step.write != nullptr) StartWrite(step.write);
  if (step.finish) Finish(*step.finish);
}

void ComputeMemberStream::OnDone() {
  if (!member_id_.empty()) deps_.hub.Leave(member_id_);
  auto last = std::move(self_);
}

}  // namespace edge::controller
