#include "controller/edge_stream.h"

#include "agent/identity/envelope_codec.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "controller/edge_attestation.h"
#include "controller/edge_codec.h"
#include "controller/node_cluster_service.h"
#include "controller/peer_identity.h"

namespace edge::controller {

namespace pb = aegis::cluster::v1;

namespace {

grpc::Status Unauthenticated(const std::string& why) {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why);
}

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

}  // namespace

grpc::ServerBidiReactor<pb::EdgeEvent, pb::EdgeCommand>* EdgeStream::Start(
    grpc::CallbackServerContext* ctx, EdgeStreamDeps deps) {
  auto stream = std::make_shared<EdgeStream>(ctx, deps);
  stream->self_ = stream;
  stream->Begin();
  return stream.get();
}

void EdgeStream::Begin() {
  auto log = log::Get("edge");
  auto refused = [&](const std::string& line) {
    if (deps_.refusals) {
      deps_.refusals->Warn(log, NodeClusterServiceImpl::PeerAddress(ctx_->peer()), line);
    } else {
      log->warn("{}", line);
    }
  };
  auto token = BearerToken(*ctx_);
  if (!token) {
    refused("ConnectEdge from " + log::Escape(ctx_->peer()) + " refused: no bearer token");
    Close(Unauthenticated("metadata \"authorization: Bearer <node security token>\" is required"));
    return;
  }
  auto claims = deps_.tokens.Verify(*token, TokenUse::kNewSession);
  if (!claims) {
    refused("ConnectEdge from " + log::Escape(ctx_->peer()) +
            " refused: " + log::Escape(claims.error().message, 512));
    Close(Unauthenticated(claims.error().message));
    return;
  }
  auto cn = PeerCommonName(*ctx_);
  if (!cn) {
    Close(Unauthenticated("a client certificate issued by this controller is required"));
    return;
  }
  if (*cn != claims->node_id) {
    log->warn("ConnectEdge refused: token of node {} presented with the certificate of {}",
              log::Escape(claims->node_id), log::Escape(*cn));
    Close(Unauthenticated("the bearer token is for node \"" + claims->node_id +
                          "\", the client certificate for \"" + *cn + "\""));
    return;
  }
  node_id_ = claims->node_id;
  StartRead(&in_);
}

grpc::Status EdgeStream::Authenticate(const pb::EdgeEvent& event) {
  const auto now = deps_.clock.Now();
  const int64_t now_ms = ToEpochMillis(now);
  // Taken before anything it vouches for is read (EdgeAuthCache).
  const auto generation = deps_.store.AuthGeneration();
  const EdgeNodeRecord* keys_of = auth_.Keys(generation);
  if (!keys_of) {
    auto edge = deps_.store.GetEdgeNode(node_id_);
    if (!edge) return ToGrpcStatus(edge.error());
    if (!*edge) return Unauthenticated("node \"" + node_id_ + "\" is not edge-enrolled");
    keys_of = &auth_.RememberKeys(generation, **edge);
  }
  const auto keys = EdgeAttestation::ActiveKeys(*keys_of, now_ms);
  auto header = identity::EnvelopeCodec::VerifyEvent(event, node_id_, stream_id_, keys, now);
  if (!header) return Unauthenticated("envelope refused: " + header.error().message);
  const auto& token = identity::EnvelopeCodec::EnvelopeOf(event)->node_security_token();
  const TokenUse use = attached_ ? TokenUse::kOpenStream : TokenUse::kNewSession;
  if (auth_.TokenStillValid(generation, token, use, now_ms)) return grpc::Status::OK;
  auto claims = deps_.tokens.Verify(token, use);
  if (!claims) return Unauthenticated("envelope refused: " + claims.error().message);
  if (claims->node_id != node_id_) {
    return Unauthenticated("envelope refused: its token is for node \"" + claims->node_id + "\"");
  }
  auth_.RememberToken(generation, token, use, now_ms, *claims);
  return grpc::Status::OK;
}

grpc::Status EdgeStream::Handle(pb::EdgeEvent& event) {
  if (event.event_case() == pb::EdgeEvent::EVENT_NOT_SET) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty EdgeEvent");
  }
  if (!attached_ && !event.has_hello()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message on ConnectEdge must be Hello");
  }
  if (attached_ && event.has_hello()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "Hello may only be the first message on a stream");
  }
  if (event.has_hello() &&
      (event.hello().stream_id().empty() || event.hello().stream_id().size() > 128)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "Hello.stream_id has " + std::to_string(event.hello().stream_id().size()) +
                            " characters: it must be a UUID, 1 to 128 characters");
  }
  if (auto st = Authenticate(event); !st.ok()) return st;

  const int64_t now_ms = ToEpochMillis(deps_.clock.Now());
  auto stored = [](const Status& st) { return st ? grpc::Status::OK : ToGrpcStatus(st.error()); };
  switch (event.event_case()) {
    case pb::EdgeEvent::kHello: {
      const auto& caps = event.hello().capabilities();
      if (auto st = stored(deps_.store.RecordHello(node_id_, CapabilitiesToJson(caps),
                                                   IsDraining(caps), now_ms));
          !st.ok()) {
        return st;
      }
      stream_id_ = event.hello().stream_id();
      attached_ = true;
      deps_.dispatcher.Attach(node_id_, shared_from_this());
      deps_.dispatcher.CapabilitiesReported(node_id_);
      log::Get("edge")->info("node {} connected (stream {}, {}/{}, {} tools)",
                             log::Escape(node_id_), log::Escape(stream_id_), log::Escape(caps.os()),
                             log::Escape(caps.arch()), caps.local_tools_size());
      return grpc::Status::OK;
    }
    case pb::EdgeEvent::kHeartbeat:
      return stored(deps_.store.RecordHeartbeat(node_id_, now_ms));
    case pb::EdgeEvent::kCapabilityUpdate: {
      const auto& caps = event.capability_update().capabilities();
      if (IsDraining(caps)) log::Get("edge")->info("node {} is draining", log::Escape(node_id_));
      auto st = stored(deps_.store.UpdateCapabilities(node_id_, CapabilitiesToJson(caps),
                                                      IsDraining(caps), now_ms));
      if (st.ok()) deps_.dispatcher.CapabilitiesReported(node_id_);
      return st;
    }
    case pb::EdgeEvent::kCommandProgress:
      if (event.command_progress().command_id().empty()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "CommandProgress.command_id is required");
      }
      congested_ = deps_.dispatcher.OnProgress(
          node_id_, event.command_progress().command_id(),
          std::move(*event.mutable_command_progress()->mutable_chunk()));
      return grpc::Status::OK;
    case pb::EdgeEvent::kCommandResult:
      if (event.command_result().command_id().empty()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "CommandResult.command_id is required");
      }
      deps_.dispatcher.OnResult(node_id_, event.command_result().command_id(),
                                event.command_result().result());
      return grpc::Status::OK;
    case pb::EdgeEvent::EVENT_NOT_SET:
      break;
  }
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty EdgeEvent");
}

void EdgeStream::OnReadDone(bool ok) {
  if (!writes_.accepting()) return;  // finishing
  if (!ok) {
    Close(grpc::Status::OK);  // the node closed its side (or the call broke)
    return;
  }
  auto st = Handle(in_);
  if (!st.ok()) {
    log::Get("edge")->warn("ConnectEdge of node {} ended: {} ({})", log::Escape(node_id_),
                           log::Escape(st.error_message(), 512), static_cast<int>(st.error_code()));
    Close(st);
    return;
  }
  if (congested_.empty()) {
    StartRead(&in_);
    return;
  }
  {
    std::lock_guard lock(read_mu_);
    read_paused_ = true;  // a cancel from now on finds no read pending (OnCancel)
  }
  std::weak_ptr<EdgeStream> weak = weak_from_this();
  OutputPacer::WhenRoom(std::exchange(congested_, {}), deps_.timers, deps_.output_stall_limit,
                        [weak] {
                          if (auto self = weak.lock()) self->ReadOn();
                        });
}

void EdgeStream::ReadOn() {
  bool cancelled = false;
  {
    std::lock_guard lock(read_mu_);
    if (!read_paused_) return;
    read_paused_ = false;
    cancelled = cancelled_;
  }
  if (cancelled) {
    Close(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
    return;
  }
  if (!writes_.accepting()) return;  // finishing
  StartRead(&in_);
}

void EdgeStream::OnCancel() {
  {
    std::lock_guard lock(read_mu_);
    cancelled_ = true;
    if (!read_paused_) return;  // the pending read ends with ok = false, and closes the call
  }
  // No read pending (waiting for a client's room): nothing else would end the call.
  Close(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
}

bool EdgeStream::Send(const pb::EdgeCommand& command) {
  auto step = writes_.Push(command);
  const bool queued = step.dropped.empty();
  Apply(std::move(step));
  return queued;
}

void EdgeStream::OnWriteDone(bool ok) {
  // Not ok: the call is broken; what is queued is dropped and the read side ends it.
  Apply(writes_.WriteDone(ok));
}

void EdgeStream::Close(const grpc::Status& status) {
  Apply(writes_.FinishAfter(status, WriteQueue<pb::EdgeCommand>::Then::kDropQueued));
}

void EdgeStream::Apply(WriteQueue<pb::EdgeCommand>::Step step) {
  if (step.write != nullptr) StartWrite(step.write);
  if (step.finish) Finish(*step.finish);
}

void EdgeStream::OnDone() {
  if (attached_) {
    deps_.dispatcher.Detach(node_id_, this);
    log::Get("edge")->info("node {} disconnected (stream {})", log::Escape(node_id_),
                           log::Escape(stream_id_));
  }
  auto last = std::move(self_);  // may destroy this when it goes out of scope
}

}  // namespace edge::controller
