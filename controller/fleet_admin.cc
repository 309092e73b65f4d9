#include "controller/fleet_admin.h"

#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "common/grpc_status.h"
#include "common/grpc_write_queue.h"
#include "common/log.h"
#include "controller/command_notes.h"
#include "controller/output_pacer.h"

namespace edge::controller {

namespace apb = edge::admin::v1;

namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const grpc::Status& st) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(st);
  return reactor;
}

void FillTags(const std::string& node_id, const NodeTags& tags, apb::NodeTagsResponse* resp) {
  resp->set_node_id(node_id);
  resp->mutable_tags()->insert(tags.begin(), tags.end());
}

// The FleetInvoke stream: `accepted`, then every part's output, notes and result tagged with
// its node id, in the order they come; ends once every part has a result. One observer per
// part (Part) feeds it; the reactor owns itself until OnDone, the observers only point at it.
class FleetInvokeReactor final : public grpc::ServerWriteReactor<apb::FleetInvokeEvent> {
 public:
  explicit FleetInvokeReactor(Dispatcher& dispatcher) : dispatcher_(dispatcher) {}

  static std::shared_ptr<FleetInvokeReactor> Create(Dispatcher& dispatcher) {
    auto r = std::make_shared<FleetInvokeReactor>(dispatcher);
    r->self_ = r;
    return r;
  }

  // One part's command observer.
  class Part final : public CommandObserver {
   public:
    Part(std::weak_ptr<FleetInvokeReactor> reactor, std::string node_id)
        : reactor_(std::move(reactor)), node_id_(std::move(node_id)) {}

    void OnAccepted(const std::string& command_id) override {
      std::lock_guard lock(mu_);
      command_id_ = command_id;
    }
    void OnProgress(aegis::cluster::v1::Chunk chunk) override {
      auto r = reactor_.lock();
      if (!r) return;
      apb::FleetInvokeEvent e;
      switch (chunk.kind_case()) {
        case aegis::cluster::v1::Chunk::kStdout:
        case aegis::cluster::v1::Chunk::kStderr: {
          auto* out = e.mutable_output();
          out->set_node_id(node_id_);
          out->set_command_id(command_id());
          const bool err = chunk.kind_case() == aegis::cluster::v1::Chunk::kStderr;
          if (!r->AdmitOutput(node_id_, (err ? chunk.stderr() : chunk.stdout()).size())) return;
          out->set_stderr(err);
          out->set_data(std::move(err ? *chunk.mutable_stderr() : *chunk.mutable_stdout()));
          break;
        }
        case aegis::cluster::v1::Chunk::kStatus:
          e.mutable_note()->set_node_id(node_id_);
          e.mutable_note()->set_state(chunk.status().state());
          e.mutable_note()->set_message(chunk.status().message());
          break;
        case aegis::cluster::v1::Chunk::KIND_NOT_SET:
          return;
      }
      r->Enqueue(std::move(e));
    }
    void OnResult(const CommandRecord& command) override {
      if (auto capped = OutputCapNote(command)) Note(node_id_, kOutputCapped, *capped);
      if (auto r = reactor_.lock()) {
        r->PartEnded(FleetCommands::PartView(
            {.node_id = node_id_, .command_id = command.command_id}, command));
      }
    }
    void OnNodeDisconnected(const std::string& node_id) override {
      Note(node_id, kNodeDisconnected,
           "node " + node_id + " disconnected; its result is delivered when it reconnects");
    }
    void OnNodeReconnected(const std::string& node_id) override {
      Note(node_id, kNodeReconnected,
           "node " + node_id + " reconnected; the part's result follows when it ends");
    }
    std::shared_ptr<OutputPacer> pacer() override {
      auto r = reactor_.lock();
      return r ? r->pacer_ : nullptr;
    }
    std::string command_id() {
      std::lock_guard lock(mu_);
      return command_id_;
    }

   private:
    void Note(const std::string& node_id, const std::string& state, const std::string& message) {
      auto r = reactor_.lock();
      if (!r) return;
      apb::FleetInvokeEvent e;
      e.mutable_note()->set_node_id(node_id);
      e.mutable_note()->set_state(state);
      e.mutable_note()->set_message(message);
      r->Enqueue(std::move(e));
    }

    std::weak_ptr<FleetInvokeReactor> reactor_;
    const std::string node_id_;
    std::mutex mu_;
    std::string command_id_;
  };

  std::shared_ptr<CommandObserver> ObserverFor(const std::string& node_id) {
    auto part = std::make_shared<Part>(self_, node_id);
    std::lock_guard lock(mu_);
    parts_.push_back(part);
    return part;
  }

  // The fleet command is stored; its parts are about to be sent.
  void Planned(const FleetCommandRecord& rec) {
    FleetCommandView view;
    view.record = rec;
    for (const auto& p : rec.parts)
      view.parts.push_back(FleetCommands::PartView(p, std::nullopt));
    {
      std::lock_guard lock(mu_);
      total_ = rec.parts.size();
    }
    apb::FleetInvokeEvent e;
    FleetAdminImpl::FillFleet(view, e.mutable_accepted());
    Enqueue(std::move(e));
  }

  // Every part was sent (or refused): the refused and already ended ones are reported now;
  // with `detach` the call ends here.
  void Dispatched(const FleetCommandView& view, bool detach) {
    for (const auto& p : view.parts)
      if (p.state != kPartPending && p.state != kPartRunning) PartEnded(p);
    bool done = false;
    {
      std::lock_guard lock(mu_);
      dispatched_ = true;
      done = detach || ended_.size() >= total_;
    }
    if (done) AllPartsEnded();
  }

  void PartEnded(const FleetPartView& part) {
    bool done = false;
    {
      std::lock_guard lock(mu_);
      if (!ended_.insert(part.node_id).second) return;  // reported already
      done = dispatched_ && ended_.size() >= total_;
    }
    apb::FleetInvokeEvent e;
    FleetAdminImpl::FillPart(part, e.mutable_part_result());
    Enqueue(std::move(e));
    if (done) AllPartsEnded();
  }

  // The output is over: what was dropped for this client since its last note (one pacer for
  // the whole call, so the note names no node); the call ends once everything is written.
  void AllPartsEnded() {
    if (auto note = pacer_->UnreportedDrops()) EnqueueNote("", std::move(*note));
    FinishAfterDrain(grpc::Status::OK);
  }

  void Enqueue(apb::FleetInvokeEvent e) { Apply(writes_.Push(std::move(e))); }

  // Whether a chunk of `bytes` of `node_id`'s output is queued (OutputPacer::Admit: one pacer
  // for the whole call, whichever node the output is from), with its note first.
  bool AdmitOutput(const std::string& node_id, size_t bytes) {
    std::optional<OutputPacer::Note> note;
    const bool queue = pacer_->Admit(bytes, note);
    if (note) EnqueueNote(node_id, std::move(*note));
    return queue;
  }
  // A pacer's note about this client's output, for `node_id`'s chunk (empty: the whole call).
  void EnqueueNote(const std::string& node_id, OutputPacer::Note note) {
    apb::FleetInvokeEvent e;
    e.mutable_note()->set_node_id(node_id);
    e.mutable_note()->set_state(note.state);
    e.mutable_note()->set_message(std::move(note.message));
    Enqueue(std::move(e));
  }

  void FinishAfterDrain(const grpc::Status& st) {
    Apply(writes_.FinishAfter(st, WriteQueue<apb::FleetInvokeEvent>::Then::kWriteQueued));
  }

  void OnWriteDone(bool ok) override {
    auto step = writes_.WriteDone(ok);
    if (!ok && !step.finish) {
      // The operator went away; the parts run on.
      step.finish =
          writes_
              .FinishAfter(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"),
                           WriteQueue<apb::FleetInvokeEvent>::Then::kDropQueued)
              .finish;
    }
    Apply(std::move(step));
  }

  void OnCancel() override {
    FinishAfterDrain(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
  }

  void OnDone() override {
    std::vector<std::shared_ptr<Part>> parts;
    {
      std::lock_guard lock(mu_);
      parts.swap(parts_);
    }
    for (auto& p : parts) {
      if (auto id = p->command_id(); !id.empty()) dispatcher_.Unsubscribe(id, p.get());
    }
    pacer_->Close();               // no node stream waits for this call any more
    auto last = std::move(self_);  // may destroy this when it goes out of scope
  }

 private:
  static size_t OutputBytes(const apb::FleetInvokeEvent& e) {
    return e.has_output() ? e.output().data().size() : 0;
  }
  void Apply(WriteQueue<apb::FleetInvokeEvent>::Step step) {
    if (step.completed) pacer_->Sent(OutputBytes(*step.completed));
    for (const auto& d : step.dropped)
      pacer_->Sent(OutputBytes(d));
    if (step.write != nullptr) StartWrite(step.write);
    if (step.finish) Finish(*step.finish);
  }

  Dispatcher& dispatcher_;
  std::shared_ptr<FleetInvokeReactor> self_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Part>> parts_;
  size_t total_ = 0;
  bool dispatched_ = false;
  std::set<std::string> ended_;  // node ids whose part_result was queued
  WriteQueue<apb::FleetInvokeEvent> writes_;
  // The output queued in writes_, and the back-pressure it puts on the nodes' streams.
  std::shared_ptr<OutputPacer> pacer_ = std::make_shared<OutputPacer>();
};

}  // namespace

void FleetAdminImpl::FillPart(const FleetPartView& p, apb::FleetPart* out) {
  out->set_node_id(p.node_id);
  out->set_command_id(p.command_id);
  out->set_state(p.state);
  out->set_has_exit_code(p.exit_code.has_value());
  out->set_exit_code(p.exit_code.value_or(0));
  out->set_has_duration(p.duration_ms.has_value());
  out->set_duration_ms(p.duration_ms.value_or(0));
  out->set_error_code(p.error_code);
  out->set_error_message(p.error_message);
  out->set_output_cap_note(p.output_cap_note);
}

void FleetAdminImpl::FillFleet(const FleetCommandView& v, apb::FleetCommandInfo* out) {
  const auto& r = v.record;
  out->set_fleet_command_id(r.fleet_id);
  out->set_tenant_id(r.tenant_id);
  out->set_created_by(r.created_by);
  out->set_selector(r.selector);
  out->set_tool(r.tool);
  out->set_args_json(r.args_json);
  out->set_security_context(r.security_context);
  out->set_deadline_ms(r.deadline_ms);
  out->set_created_at_epoch_ms(r.created_at_ms);
  out->set_cancelled_at_epoch_ms(r.cancelled_at_ms);
  out->set_state(v.finished() ? "completed" : "running");
  for (const auto& p : v.parts)
    FillPart(p, out->add_parts());
}

grpc::ServerUnaryReactor* FleetAdminImpl::GetNodeTags(grpc::CallbackServerContext* ctx,
                                                      const apb::GetNodeTagsRequest* req,
                                                      apb::NodeTagsResponse* resp) {
  auto tags = fleet_.GetNodeTags(req->node_id());
  if (!tags) return Done(ctx, ToGrpcStatus(tags.error()));
  FillTags(req->node_id(), *tags, resp);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* FleetAdminImpl::UpdateNodeTags(grpc::CallbackServerContext* ctx,
                                                         const apb::UpdateNodeTagsRequest* req,
                                                         apb::NodeTagsResponse* resp) {
  NodeTags set(req->set().begin(), req->set().end());
  std::vector<TagRemoval> remove;
  for (const auto& r : req->remove()) {
    remove.push_back(
        {.key = r.key(),
         .value = r.has_value() ? std::optional<std::string>(r.value()) : std::nullopt});
  }
  auto tags = fleet_.UpdateNodeTags(req->node_id(), set, remove);
  if (!tags) return Done(ctx, ToGrpcStatus(tags.error()));
  FillTags(req->node_id(), *tags, resp);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerWriteReactor<apb::FleetInvokeEvent>* FleetAdminImpl::FleetInvoke(
    grpc::CallbackServerContext*, const apb::FleetInvokeRequest* req) {
  auto reactor = FleetInvokeReactor::Create(dispatcher_);
  FleetInvokeSpec spec{.selector = req->selector(),
                       .tool = req->tool(),
                       .args_json = req->args_json(),
                       .security_context = req->security_context(),
                       .deadline = std::chrono::milliseconds(req->deadline_ms()),
                       .created_by = "operator"};
  FleetHooks hooks;
  hooks.planned = [&reactor](const FleetCommandRecord& rec) { reactor->Planned(rec); };
  if (!req->detach()) {
    hooks.observer = [&reactor](const std::string& node_id) {
      return reactor->ObserverFor(node_id);
    };
  }
  auto view = commands_.Invoke(spec, hooks);
  if (!view) {
    reactor->FinishAfterDrain(ToGrpcStatus(view.error()));
    return reactor.get();
  }
  reactor->Dispatched(*view, req->detach());
  return reactor.get();
}

grpc::ServerUnaryReactor* FleetAdminImpl::GetFleetCommand(grpc::CallbackServerContext* ctx,
                                                          const apb::GetFleetCommandRequest* req,
                                                          apb::FleetCommandInfo* resp) {
  auto view = commands_.Get(req->fleet_command_id(), "");
  if (!view) return Done(ctx, ToGrpcStatus(view.error()));
  FillFleet(*view, resp);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* FleetAdminImpl::ListFleetCommands(
    grpc::CallbackServerContext* ctx, const apb::ListFleetCommandsRequest* req,
    apb::ListFleetCommandsResponse* resp) {
  auto list = commands_.List(req->limit());
  if (!list) return Done(ctx, ToGrpcStatus(list.error()));
  for (const auto& v : *list)
    FillFleet(v, resp->add_fleet_commands());
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* FleetAdminImpl::CancelFleetCommand(
    grpc::CallbackServerContext* ctx, const apb::CancelFleetCommandRequest* req,
    apb::CancelFleetCommandResponse* resp) {
  auto parts = commands_.Cancel(req->fleet_command_id(), "", req->reason());
  if (!parts) return Done(ctx, ToGrpcStatus(parts.error()));
  for (const auto& p : *parts) {
    auto* out = resp->add_parts();
    out->set_node_id(p.node_id);
    out->set_command_id(p.command_id);
    out->set_outcome(p.outcome);
    out->set_message(p.message);
  }
  return Done(ctx, grpc::Status::OK);
}

}  // namespace edge::controller
