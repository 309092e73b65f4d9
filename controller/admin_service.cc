#include "controller/admin_service.h"

#include <deque>
#include <optional>

#include "agent/identity/encoding.h"
#include "common/grpc_status.h"
#include "common/grpc_write_queue.h"
#include "common/log.h"
#include "controller/command_notes.h"
#include "controller/output_pacer.h"

namespace edge::controller {

namespace pb = edge::admin::v1;

namespace {
grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const grpc::Status& st) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(st);
  return reactor;
}

grpc::Status StatusOf(const edge::Status& st) {
  return st ? grpc::Status::OK : ToGrpcStatus(st.error());
}

void FillOutcome(const CommandOutcomeRecord& r, pb::CommandOutcome* out) {
  out->set_outcome(r.outcome);
  out->set_exit_code(r.exit_code);
  out->set_code(r.error_code);
  out->set_message(r.message);
  out->set_payload_json(r.payload_json);
  out->set_duration_ms(r.duration_ms);
}

void FillCommand(const CommandRecord& c, pb::CommandInfo* out) {
  out->set_command_id(c.command_id);
  out->set_node_id(c.node_id);
  out->set_tool(c.tool);
  out->set_args_json(c.args_json);
  out->set_security_context(c.security_context);
  out->set_deadline_ms(c.deadline_ms);
  out->set_state(c.state);
  out->set_created_at_epoch_ms(c.created_at_ms);
  out->set_completed_at_epoch_ms(c.completed_at_ms);
  if (c.state == kCommandCompleted) FillOutcome(c.result, out->mutable_result());
}

// The admin Invoke stream: accepted, chunks, result, in order; one write in flight.
class InvokeReactor final : public grpc::ServerWriteReactor<pb::InvokeEvent>,
                            public CommandObserver {
 public:
  explicit InvokeReactor(Dispatcher& dispatcher) : dispatcher_(dispatcher) {}

  static std::shared_ptr<InvokeReactor> Create(Dispatcher& dispatcher) {
    auto r = std::make_shared<InvokeReactor>(dispatcher);
    r->self_ = r;
    return r;
  }

  void OnAccepted(const std::string& command_id) override {
    bool gone = false;
    {
      std::lock_guard lock(mu_);
      command_id_ = command_id;
      gone = done_;
    }
    // The client went away while the command waited to be stored: OnDone could not name it.
    if (gone) dispatcher_.Unsubscribe(command_id, this);
    pb::InvokeEvent e;
    e.mutable_accepted()->set_command_id(command_id);
    Enqueue(std::move(e));
  }
  void OnProgress(aegis::cluster::v1::Chunk chunk) override {
    pb::InvokeEvent e;
    switch (chunk.kind_case()) {
      case aegis::cluster::v1::Chunk::kStdout:
        if (!Admit(chunk.stdout().size())) return;
        e.set_stdout(std::move(*chunk.mutable_stdout()));
        break;
      case aegis::cluster::v1::Chunk::kStderr:
        if (!Admit(chunk.stderr().size())) return;
        e.set_stderr(std::move(*chunk.mutable_stderr()));
        break;
      case aegis::cluster::v1::Chunk::kStatus:
        e.mutable_status()->set_state(chunk.status().state());
        e.mutable_status()->set_message(chunk.status().message());
        break;
      case aegis::cluster::v1::Chunk::KIND_NOT_SET:
        return;
    }
    Enqueue(std::move(e));
  }
  void OnResult(const CommandRecord& command) override {
    if (auto note = pacer_->UnreportedDrops()) EnqueueNote(std::move(*note));
    if (auto capped = OutputCapNote(command)) EnqueueNote({kOutputCapped, std::move(*capped)});
    pb::InvokeEvent e;
    FillOutcome(command.result, e.mutable_result());
    Enqueue(std::move(e));
    FinishAfterDrain(grpc::Status::OK);
  }
  void OnNodeDisconnected(const std::string& node_id) override {
    pb::InvokeEvent e;
    e.mutable_status()->set_state(kNodeDisconnected);
    e.mutable_status()->set_message("node " + node_id +
                                    " disconnected; its result is delivered when it reconnects");
    Enqueue(std::move(e));
  }
  void OnNodeReconnected(const std::string& node_id) override {
    pb::InvokeEvent e;
    e.mutable_status()->set_state(kNodeReconnected);
    e.mutable_status()->set_message("node " + node_id +
                                    " reconnected; the command's result follows when it ends");
    Enqueue(std::move(e));
  }

  void Enqueue(pb::InvokeEvent e) { Apply(writes_.Push(std::move(e))); }
  std::shared_ptr<OutputPacer> pacer() override { return pacer_; }

  // Ends the call with `st` once everything queued is written.
  void FinishAfterDrain(const grpc::Status& st) {
    Apply(writes_.FinishAfter(st, WriteQueue<pb::InvokeEvent>::Then::kWriteQueued));
  }

  void OnWriteDone(bool ok) override {
    auto step = writes_.WriteDone(ok);
    if (!ok && !step.finish) {
      // The operator went away; the command runs on.
      step.finish =
          writes_
              .FinishAfter(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"),
                           WriteQueue<pb::InvokeEvent>::Then::kDropQueued)
              .finish;
    }
    Apply(std::move(step));
  }

  void OnCancel() override {
    FinishAfterDrain(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
  }

  void OnDone() override {
    std::string id;
    {
      std::lock_guard lock(mu_);
      id = command_id_;
      done_ = true;
    }
    if (!id.empty()) dispatcher_.Unsubscribe(id, this);
    pacer_->Close();               // no node stream waits for this call any more
    auto last = std::move(self_);  // may destroy this when it goes out of scope
  }

 private:
  Dispatcher& dispatcher_;
  std::shared_ptr<InvokeReactor> self_;
  std::mutex mu_;
  std::string command_id_;  // once accepted
  bool done_ = false;       // OnDone ran
  // Accepted, chunks, result: one write in flight; the call ends once all is written.
  WriteQueue<pb::InvokeEvent> writes_;
  // The output queued in writes_, and the back-pressure it puts on the node's stream.
  std::shared_ptr<OutputPacer> pacer_ = std::make_shared<OutputPacer>();

  // Whether a chunk of `bytes` output is queued (OutputPacer::Admit, with its note first).
  bool Admit(size_t bytes) {
    std::optional<OutputPacer::Note> note;
    const bool queue = pacer_->Admit(bytes, note);
    if (note) EnqueueNote(std::move(*note));
    return queue;
  }
  // A pacer's note about this client's output, as a status event.
  void EnqueueNote(OutputPacer::Note note) {
    pb::InvokeEvent e;
    e.mutable_status()->set_state(note.state);
    e.mutable_status()->set_message(std::move(note.message));
    Enqueue(std::move(e));
  }
  static size_t OutputBytes(const pb::InvokeEvent& e) {
    return e.has_stdout() ? e.stdout().size() : e.has_stderr() ? e.stderr().size() : 0;
  }

  void Apply(WriteQueue<pb::InvokeEvent>::Step step) {
    if (step.completed) pacer_->Sent(OutputBytes(*step.completed));
    for (const auto& d : step.dropped)
      pacer_->Sent(OutputBytes(d));
    if (step.write != nullptr) StartWrite(step.write);
    if (step.finish) Finish(*step.finish);
  }
};

}  // namespace

grpc::ServerUnaryReactor* AdminServiceImpl::Status(grpc::CallbackServerContext* ctx,
                                                   const pb::StatusRequest*,
                                                   pb::StatusResponse* resp) {
  resp->set_version(info_.version);
  resp->set_started_at_epoch_ms(ToEpochMillis(info_.started_at));
  resp->set_grpc_listen(info_.grpc_listen);
  resp->set_advertise(info_.advertise);
  resp->set_ca_pin(info_.ca_pin);
  resp->set_data_dir(info_.data_dir);
  const FleetSummary summary = fleet_.Summary();
  resp->set_nodes(static_cast<uint32_t>(summary.nodes));
  resp->set_active_join_tokens(static_cast<uint32_t>(summary.active_join_tokens));
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::CreateJoinToken(grpc::CallbackServerContext* ctx,
                                                            const pb::CreateJoinTokenRequest* req,
                                                            pb::CreateJoinTokenResponse* resp) {
  auto minted = fleet_.CreateJoinToken(req->node_id(), req->tenant_id(),
                                       std::chrono::seconds(req->ttl_seconds()), req->replace());
  if (!minted) return Done(ctx, ToGrpcStatus(minted.error()));
  resp->set_token_id(minted->token_id);
  resp->set_join_token(minted->token);
  resp->set_expires_at_epoch_ms(minted->expires_at_ms);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::CreateUserToken(grpc::CallbackServerContext* ctx,
                                                            const pb::CreateUserTokenRequest* req,
                                                            pb::CreateUserTokenResponse* resp) {
  TenantTokenClaims claims;
  auto token = users_.Mint(req->tenant_id(), {}, std::chrono::seconds(req->ttl_seconds()),
                           req->user(), &claims);
  if (!token) return Done(ctx, ToGrpcStatus(token.error()));
  log::Get("admin")->info("user token {} created (user \"{}\", tenant \"{}\")", claims.jti,
                          log::Escape(req->user()), log::Escape(req->tenant_id()));
  resp->set_token(*token);
  resp->set_jti(claims.jti);
  resp->set_expires_at_epoch_ms(claims.expires_at_ms);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::RevokeJoinToken(grpc::CallbackServerContext* ctx,
                                                            const pb::RevokeJoinTokenRequest* req,
                                                            pb::RevokeJoinTokenResponse*) {
  return Done(ctx, StatusOf(fleet_.RevokeJoinToken(req->token_id())));
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListJoinTokens(grpc::CallbackServerContext* ctx,
                                                           const pb::ListJoinTokensRequest* req,
                                                           pb::ListJoinTokensResponse* resp) {
  auto toks = fleet_.ListJoinTokens(req->include_inactive());
  if (!toks) return Done(ctx, ToGrpcStatus(toks.error()));
  for (const auto& t : *toks) {
    auto* out = resp->add_tokens();
    out->set_token_id(t.token_id);
    out->set_node_id(t.node_id);
    out->set_tenant_id(t.tenant_id);
    out->set_created_at_epoch_ms(t.created_at_ms);
    out->set_expires_at_epoch_ms(t.expires_at_ms);
    out->set_consumed_at_epoch_ms(t.consumed_at_ms);
    out->set_revoked_at_epoch_ms(t.revoked_at_ms);
    out->set_consumed_by_node_id(t.consumed_by);
    out->set_replace(t.replace);
  }
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListNodes(grpc::CallbackServerContext* ctx,
                                                      const pb::ListNodesRequest*,
                                                      pb::ListNodesResponse* resp) {
  auto nodes = fleet_.ListNodes();
  if (!nodes) return Done(ctx, ToGrpcStatus(nodes.error()));
  for (const auto& v : *nodes) {
    const NodeRecord& n = v.node;
    auto* out = resp->add_nodes();
    out->set_node_id(n.node_id);
    out->set_tenant_id(n.tenant_id);
    out->set_state(n.state);
    out->set_cert_serial_hex(n.cert_serial_hex);
    out->set_enrolled_at_epoch_ms(n.enrolled_at_ms);
    out->set_last_seen_epoch_ms(n.last_seen_ms);
    out->set_connected(v.connected);
    out->mutable_tags()->insert(v.tags.begin(), v.tags.end());
    if (v.edge) {
      const auto& e = *v.edge;
      out->set_edge_enrolled(true);
      out->set_edge_enrolled_at_epoch_ms(e.edge_enrolled_at_ms);
      out->set_last_heartbeat_epoch_ms(e.last_heartbeat_ms);
      out->set_public_key_sha256(identity::HexEncode(identity::Sha256(e.public_key)));
      out->set_config_version(e.config_version);
      const auto& caps = v.capabilities;
      auto* c = out->mutable_capabilities();
      c->set_os(caps.os());
      c->set_arch(caps.arch());
      c->mutable_tools()->CopyFrom(caps.local_tools());
      c->mutable_mounts()->CopyFrom(caps.mount_points());
      c->mutable_labels()->insert(caps.custom_labels().begin(), caps.custom_labels().end());
    }
  }
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerWriteReactor<pb::InvokeEvent>* AdminServiceImpl::Invoke(grpc::CallbackServerContext*,
                                                                    const pb::InvokeRequest* req) {
  auto reactor = InvokeReactor::Create(dispatcher_);
  InvokeSpec spec{.node_id = req->node_id(),
                  .tool = req->tool(),
                  .args_json = req->args_json(),
                  .security_context = req->security_context(),
                  .deadline = std::chrono::milliseconds(req->deadline_ms())};
  // Not waiting for the disk on gRPC's thread (issue 14): the command is stored with the
  // others queued meanwhile, and `done` runs once it is sent, or refused (perhaps at once).
  // gRPC keeps what the reactor does before this returns it, from whichever thread.
  const bool detach = req->detach();
  fleet_.InvokeAsync(spec, detach ? nullptr : reactor, [reactor, detach](Result<std::string> id) {
    if (!id) return reactor->FinishAfterDrain(ToGrpcStatus(id.error()));
    if (detach) {
      reactor->OnAccepted(*id);
      reactor->FinishAfterDrain(grpc::Status::OK);
    }
  });
  return reactor.get();
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetCommand(grpc::CallbackServerContext* ctx,
                                                       const pb::GetCommandRequest* req,
                                                       pb::CommandInfo* resp) {
  auto c = fleet_.GetCommand(req->command_id());
  if (!c) return Done(ctx, ToGrpcStatus(c.error()));
  FillCommand(*c, resp);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListCommands(grpc::CallbackServerContext* ctx,
                                                         const pb::ListCommandsRequest* req,
                                                         pb::ListCommandsResponse* resp) {
  auto list = fleet_.ListCommands(req->node_id(), req->limit());
  if (!list) return Done(ctx, ToGrpcStatus(list.error()));
  for (const auto& c : *list)
    FillCommand(c, resp->add_commands());
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::CancelCommand(grpc::CallbackServerContext* ctx,
                                                          const pb::CancelCommandRequest* req,
                                                          pb::CancelCommandResponse*) {
  return Done(ctx, StatusOf(fleet_.CancelCommand(req->command_id(), req->reason())));
}

grpc::ServerUnaryReactor* AdminServiceImpl::DrainNode(grpc::CallbackServerContext* ctx,
                                                      const pb::DrainNodeRequest* req,
                                                      pb::DrainNodeResponse*) {
  return Done(ctx, StatusOf(fleet_.DrainNode(req->node_id())));
}

grpc::ServerUnaryReactor* AdminServiceImpl::ShutdownNode(grpc::CallbackServerContext* ctx,
                                                         const pb::ShutdownNodeRequest* req,
                                                         pb::ShutdownNodeResponse*) {
  return Done(ctx, StatusOf(fleet_.ShutdownNode(req->node_id(),
                                                std::chrono::milliseconds(req->grace_ms()))));
}

grpc::ServerUnaryReactor* AdminServiceImpl::PushConfig(grpc::CallbackServerContext* ctx,
                                                       const pb::PushConfigRequest* req,
                                                       pb::PushConfigResponse* resp) {
  auto pushed = fleet_.PushConfig(req->node_id(), req->delta(), req->version());
  if (!pushed) return Done(ctx, ToGrpcStatus(pushed.error()));
  resp->set_version(pushed->version);
  if (pushed->limits_version) resp->set_limits_version(*pushed->limits_version);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::RevokeNode(grpc::CallbackServerContext* ctx,
                                                       const pb::RevokeNodeRequest* req,
                                                       pb::RevokeNodeResponse*) {
  return Done(ctx, StatusOf(fleet_.RevokeNode(req->node_id())));
}

}  // namespace edge::controller
