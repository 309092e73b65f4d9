#include "controller/dispatcher.h"

#include "common/log.h"
#include "common/random.h"
#include "controller/edge_codec.h"

namespace edge::controller {

namespace pb = aegis::cluster::v1;

namespace {
void SetDuration(google::protobuf::Duration* d, std::chrono::milliseconds ms) {
  d->set_seconds(ms.count() / 1000);
  d->set_nanos(static_cast<int32_t>(ms.count() % 1000) * 1'000'000);
}
}  // namespace

void Dispatcher::Attach(const std::string& node_id, std::shared_ptr<CommandSink> sink) {
  std::shared_ptr<CommandSink> old;
  {
    std::lock_guard lock(mu_);
    auto& slot = streams_[node_id];
    old = std::exchange(slot, std::move(sink));
    attached_ms_[node_id] = ToEpochMillis(clock_.Now());
  }
  if (old) {
    log::Get("edge")->info("node {}: a newer stream replaces the previous one",
                           log::Escape(node_id));
    old->Close(grpc::Status(grpc::StatusCode::ABORTED,
                            "replaced by a newer ConnectEdge stream of node " + node_id));
  }
  std::shared_ptr<CommandSink> current;
  std::vector<std::shared_ptr<CommandObserver>> tell;
  {
    std::lock_guard lock(mu_);
    current = streams_[node_id];
    for (const auto& [id, w] : waiters_)
      if (w.node_id == node_id) tell.push_back(w.observer);
  }
  if (current) ResendPending(node_id, *current);
  for (auto& o : tell)
    o->OnNodeReconnected(node_id);
}

void Dispatcher::ResendPending(const std::string& node_id, CommandSink& sink) {
  auto log = log::Get("edge");
  // A result the previous stream handed in may still be queued: stored first, so that what
  // has a result is not sent again (an agent without a record of it would run it twice).
  FlushResults();
  const int64_t since = ToEpochMillis(clock_.Now() - kResendWindow);
  auto pending = store_.ListPendingCommands(node_id, since);
  if (!pending) {
    log->error(
        "node {}: its commands without a result could not be read, so none is sent "
        "again: {}",
        log::Escape(node_id), pending.error().ToString());
    return;
  }
  if (pending->empty()) return;
  auto edge = store_.GetEdgeNode(node_id);
  if (!edge || !*edge) return;
  size_t sent = 0;
  for (const auto& rec : *pending) {
    auto args = StructFromJsonObject(rec.args_json, "args");
    auto cmd = args ? InvokeToolFor(rec, (*edge)->tenant_id, std::move(*args))
                    : Result<pb::EdgeCommand>(std::unexpected(args.error()));
    if (!cmd) {
      log->error("command {}: cannot be sent again to node {}: {}", log::Escape(rec.command_id),
                 log::Escape(node_id), cmd.error().ToString());
      continue;
    }
    if (!sink.Send(*cmd)) break;  // the new stream is already gone; the next one resends
    ++sent;
  }
  log->info(
      "node {}: {} command(s) without a result sent again (the agent answers a repeat "
      "from its stored result, or ignores it while it still runs)",
      log::Escape(node_id), sent);
}

Result<pb::EdgeCommand> Dispatcher::InvokeToolFor(const CommandRecord& rec,
                                                  const std::string& tenant_id,
                                                  google::protobuf::Struct args) {
  const std::chrono::milliseconds deadline(rec.deadline_ms);
  auto user_token = tokens_.MintInvokeToken(rec.command_id, rec.node_id, tenant_id, deadline);
  if (!user_token) return std::unexpected(user_token.error());
  pb::EdgeCommand cmd;
  auto* inv = cmd.mutable_invoke_tool();
  inv->set_command_id(rec.command_id);
  inv->set_security_context_name(rec.security_context);
  auto* seal = inv->mutable_seal_envelope();
  seal->set_user_security_token(*user_token);
  seal->set_tenant_id(tenant_id);
  seal->set_security_context_name(rec.security_context);
  inv->set_tool_name(rec.tool);
  *inv->mutable_args() = std::move(args);
  if (deadline.count() > 0) SetDuration(inv->mutable_deadline(), deadline);
  return cmd;
}

void Dispatcher::Detach(const std::string& node_id, const CommandSink* sink) {
  std::vector<std::shared_ptr<CommandObserver>> tell;
  {
    std::lock_guard lock(mu_);
    auto it = streams_.find(node_id);
    if (it == streams_.end() || it->second.get() != sink) return;
    streams_.erase(it);
    attached_ms_.erase(node_id);
    for (const auto& [id, w] : waiters_)
      if (w.node_id == node_id) tell.push_back(w.observer);
  }
  for (auto& o : tell)
    o->OnNodeDisconnected(node_id);
}

bool Dispatcher::IsConnected(const std::string& node_id) const {
  std::lock_guard lock(mu_);
  return streams_.contains(node_id);
}

void Dispatcher::SetCapabilitiesListener(std::function<void(const std::string&)> listener) {
  std::lock_guard lock(listener_mu_);
  capabilities_listener_ = std::move(listener);
}

void Dispatcher::CapabilitiesReported(const std::string& node_id) {
  std::lock_guard lock(listener_mu_);
  if (capabilities_listener_) capabilities_listener_(node_id);
}

int64_t Dispatcher::ConnectedSinceMs(const std::string& node_id) const {
  std::lock_guard lock(mu_);
  auto it = attached_ms_.find(node_id);
  return it == attached_ms_.end() ? 0 : it->second;
}

void Dispatcher::Disconnect(const std::string& node_id, const grpc::Status& status) {
  std::shared_ptr<CommandSink> sink;
  {
    std::lock_guard lock(mu_);
    auto it = streams_.find(node_id);
    if (it == streams_.end()) return;
    sink = it->second;
  }
  sink->Close(status);
}

void Dispatcher::CloseAll(const grpc::Status& status) {
  std::map<std::string, std::shared_ptr<CommandSink>> streams;
  {
    std::lock_guard lock(mu_);
    streams.swap(streams_);
  }
  for (auto& [node, sink] : streams)
    sink->Close(status);
}

Result<std::shared_ptr<CommandSink>> Dispatcher::StreamOf(const std::string& node_id) {
  if (node_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "node_id is required");
  auto node = store_.GetNode(node_id);
  if (!node) return std::unexpected(node.error());
  if (!*node) return MakeError(ErrorCode::kNotFound, "node " + node_id + " not found");
  if ((*node)->state == kNodeRevoked) {
    return MakeError(ErrorCode::kFailedPrecondition, "node " + node_id + " is revoked");
  }
  auto sink = CurrentStream(node_id);
  if (!sink) return MakeError(ErrorCode::kUnavailable, "node " + node_id + " is not connected");
  return sink;
}

Status Dispatcher::SendTo(const std::string& node_id, const pb::EdgeCommand& cmd) {
  auto sink = StreamOf(node_id);
  if (!sink) return std::unexpected(sink.error());
  if (!(*sink)->Send(cmd)) {
    return MakeError(ErrorCode::kUnavailable, "node " + node_id + " is not connected");
  }
  return OkStatus();
}

Result<Dispatcher::Prepared> Dispatcher::Prepare(const InvokeSpec& spec) {
  if (spec.tool.empty()) return MakeError(ErrorCode::kInvalidArgument, "tool is required");
  if (spec.deadline.count() < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "deadline " + std::to_string(spec.deadline.count()) + " ms is negative");
  }
  auto args = StructFromJsonObject(spec.args_json, "args");
  if (!args) return std::unexpected(args.error());
  auto sink = StreamOf(spec.node_id);
  if (!sink) return std::unexpected(sink.error());
  auto edge = store_.GetEdgeNode(spec.node_id);
  if (!edge) return std::unexpected(edge.error());
  if (!*edge) {
    return MakeError(ErrorCode::kUnavailable, "node " + spec.node_id + " is not connected");
  }

  Prepared p{
      .rec = {.command_id = spec.command_id.empty() ? NewUuidV4() : spec.command_id,
              .node_id = spec.node_id,
              .tool = spec.tool,
              .args_json = spec.args_json.empty() ? "{}" : spec.args_json,
              .security_context = spec.security_context,
              .deadline_ms = spec.deadline.count(),
              .state = kCommandDispatched,
              .created_at_ms = ToEpochMillis(clock_.Now())},
  };
  auto cmd = InvokeToolFor(p.rec, (*edge)->tenant_id, std::move(*args));
  if (!cmd) return std::unexpected(cmd.error());
  p.cmd = std::move(*cmd);
  // The node would refuse a larger message (and the controller could not send it): refuse it
  // here, before anything is stored. A message the node cannot take would end its stream at
  // every resend, so the node's own limit (its agent.max_message_bytes label) counts too.
  const size_t size = p.cmd.ByteSizeLong();
  if (size > max_message_bytes_) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "InvokeTool for node " + spec.node_id + " would be " + std::to_string(size) +
                         " bytes, above grpc.max_message_bytes (" +
                         std::to_string(max_message_bytes_) + " bytes); send smaller args");
  }
  if (const uint64_t node_limit = NodeMaxMessageBytes((*edge)->capabilities_json);
      node_limit > 0 && size > node_limit) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "InvokeTool for node " + spec.node_id + " would be " + std::to_string(size) +
                         " bytes, above the node's edge.max_message_bytes (" +
                         std::to_string(node_limit) + " bytes); send smaller args");
  }
  return p;
}

void Dispatcher::Subscribe(const Prepared& p, const std::shared_ptr<CommandObserver>& observer) {
  if (!observer) return;
  std::lock_guard lock(mu_);
  waiters_.emplace(p.rec.command_id, Waiter{p.rec.node_id, observer});
}

std::shared_ptr<CommandSink> Dispatcher::CurrentStream(const std::string& node_id) const {
  std::lock_guard lock(mu_);
  auto it = streams_.find(node_id);
  return it == streams_.end() ? nullptr : it->second;
}

Result<std::string> Dispatcher::SendStored(const Prepared& p, CommandObserver* observer) {
  const std::string& id = p.rec.command_id;
  // The node's stream now, not the one Prepare saw: a fleet's sends come one after another.
  auto sink = CurrentStream(p.rec.node_id);
  if (sink && sink->Send(p.cmd)) {
    log::Get("edge")->info("command {} → node {}: {}", id, log::Escape(p.rec.node_id),
                           log::Escape(p.rec.tool));
    return id;
  }
  // Not sent. A stream the node attached since the command was stored has it already (Attach
  // sends every stored command without a result), and the agent runs it: that is its result.
  if (auto now = CurrentStream(p.rec.node_id); now && now != sink) {
    log::Get("edge")->info("command {} → node {}: {} (with the node's new stream)", id,
                           log::Escape(p.rec.node_id), log::Escape(p.rec.tool));
    return id;
  }
  // The stream ended between the lookup and the send: the command never left.
  (void)store_.CompleteCommand(id, p.rec.node_id,
                               {.outcome = "error",
                                .error_code = "UNAVAILABLE",
                                .message = "the node disconnected before the command was sent"},
                               ToEpochMillis(clock_.Now()));
  if (observer) Unsubscribe(id, observer);
  return MakeError(ErrorCode::kUnavailable, "node " + p.rec.node_id + " is not connected");
}

Result<std::string> Dispatcher::Invoke(const InvokeSpec& spec,
                                       std::shared_ptr<CommandObserver> observer) {
  auto p = Prepare(spec);
  if (!p) return std::unexpected(p.error());
  // Subscribed before the command is stored: from then on a resend on a new stream can bring
  // its result.
  Subscribe(*p, observer);
  std::vector<Prepared> ready;
  ready.push_back(std::move(*p));
  return std::move(StoreAndSend(ready, {std::move(observer)}, /*each_alone=*/true).front());
}

void Dispatcher::InvokeAsync(const InvokeSpec& spec, std::shared_ptr<CommandObserver> observer,
                             InvokeDone done) {
  auto p = Prepare(spec);
  if (!p) return done(std::unexpected(p.error()));
  // Subscribed by the invokes thread, just before the store: a node that drops or comes back
  // while the command waits in the queue is no news to its observer, not yet accepted.
  invokes_.Push(QueuedInvoke{std::move(*p), std::move(observer), std::move(done)});
}

void Dispatcher::StoreInvokes(std::vector<QueuedInvoke>& batch) {
  std::vector<Prepared> ready;
  std::vector<std::shared_ptr<CommandObserver>> observers;
  ready.reserve(batch.size());
  observers.reserve(batch.size());
  for (auto& q : batch) {
    Subscribe(q.p, q.observer);
    ready.push_back(std::move(q.p));
    observers.push_back(std::move(q.observer));
  }
  std::vector<Result<std::string>> ids;
  try {
    ids = StoreAndSend(ready, observers, /*each_alone=*/true);
  } catch (const std::exception& e) {
    // Every caller still hears once: a command may be stored and not sent (the node's next
    // stream gets it, as after a controller restart), so the answer says it may still run.
    const std::string why = e.what();
    for (size_t k = 0; k < batch.size(); ++k) {
      if (observers[k]) Unsubscribe(ready[k].rec.command_id, observers[k].get());
      batch[k].done(MakeError(ErrorCode::kInternal,
                              "command " + ready[k].rec.command_id +
                                  " failed inside the controller while being stored or sent (" +
                                  why + "); it may still run: look it up before sending it again"));
    }
    throw;  // logged by the invokes thread
  }
  for (size_t k = 0; k < batch.size(); ++k)
    batch[k].done(std::move(ids[k]));
}

std::vector<Result<std::string>> Dispatcher::StoreAndSend(
    const std::vector<Prepared>& ready,
    const std::vector<std::shared_ptr<CommandObserver>>& observers, bool each_alone) {
  auto observer_of = [&](size_t k) { return k < observers.size() ? observers[k].get() : nullptr; };
  std::vector<CommandRecord> recs;
  recs.reserve(ready.size());
  for (const auto& p : ready)
    recs.push_back(p.rec);
  std::vector<Status> stored(ready.size(), store_.InsertCommands(recs));
  if (!stored.front() && each_alone && ready.size() > 1) {
    for (size_t k = 0; k < ready.size(); ++k)
      stored[k] = store_.InsertCommand(ready[k].rec);
  } else if (!stored.front() && !each_alone) {
    const Error& e = stored.front().error();
    const std::string message =
        "none of the " + std::to_string(ready.size()) + " commands was stored: " + e.message;
    for (auto& st : stored)
      st = MakeError(e.code, message);
  }
  std::vector<Result<std::string>> out;
  out.reserve(ready.size());
  for (size_t k = 0; k < ready.size(); ++k) {
    if (stored[k]) {
      out.emplace_back(std::string());
      continue;
    }
    if (auto* o = observer_of(k)) Unsubscribe(ready[k].rec.command_id, o);
    out.emplace_back(std::unexpected(stored[k].error()));
  }
  // Every one is accepted before any is sent (a resend on a new stream could otherwise bring
  // progress ahead of its acceptance).
  for (size_t k = 0; k < ready.size(); ++k) {
    if (auto* o = observer_of(k); o && out[k]) o->OnAccepted(ready[k].rec.command_id);
  }
  for (size_t k = 0; k < ready.size(); ++k) {
    if (out[k]) out[k] = SendStored(ready[k], observer_of(k));
  }
  return out;
}

std::vector<Result<std::string>> Dispatcher::InvokeMany(
    const std::vector<InvokeSpec>& specs,
    const std::vector<std::shared_ptr<CommandObserver>>& observers) {
  std::vector<Result<std::string>> out;
  out.reserve(specs.size());
  std::vector<Prepared> ready;
  std::vector<std::shared_ptr<CommandObserver>> ready_observers;
  std::vector<size_t> index;  // ready[k] is specs[index[k]]
  for (size_t i = 0; i < specs.size(); ++i) {
    auto p = Prepare(specs[i]);
    if (!p) {
      out.emplace_back(std::unexpected(p.error()));
      continue;
    }
    out.emplace_back(std::string());
    index.push_back(i);
    ready_observers.push_back(i < observers.size() ? observers[i] : nullptr);
    Subscribe(*p, ready_observers.back());
    ready.push_back(std::move(*p));
  }
  if (ready.empty()) return out;
  auto sent = StoreAndSend(ready, ready_observers, /*each_alone=*/false);
  for (size_t k = 0; k < ready.size(); ++k)
    out[index[k]] = std::move(sent[k]);
  return out;
}

void Dispatcher::Unsubscribe(const std::string& command_id, const CommandObserver* observer) {
  std::lock_guard lock(mu_);
  auto [b, e] = waiters_.equal_range(command_id);
  for (auto it = b; it != e;) {
    it = it->second.observer.get() == observer ? waiters_.erase(it) : std::next(it);
  }
}

Status Dispatcher::Cancel(const std::string& command_id, const std::string& reason) {
  if (command_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "command_id is required");
  auto cmd = store_.GetCommand(command_id);
  if (!cmd) return std::unexpected(cmd.error());
  if (!*cmd) return MakeError(ErrorCode::kNotFound, "command " + command_id + " not found");
  if ((*cmd)->state == kCommandCompleted) {
    return MakeError(
        ErrorCode::kFailedPrecondition,
        "command " + command_id + " already completed (" + (*cmd)->result.outcome + ")");
  }
  pb::EdgeCommand c;
  c.mutable_cancel()->set_command_id(command_id);
  c.mutable_cancel()->set_reason(reason.empty() ? "cancelled by the operator" : reason);
  if (auto st = SendTo((*cmd)->node_id, c); !st) return st;
  log::Get("edge")->info("command {}: cancel sent to node {}", log::Escape(command_id),
                         log::Escape((*cmd)->node_id));
  return OkStatus();
}

Status Dispatcher::Drain(const std::string& node_id) {
  pb::EdgeCommand c;
  c.mutable_drain();
  if (auto st = SendTo(node_id, c); !st) return st;
  log::Get("edge")->info("node {}: drain sent", log::Escape(node_id));
  return OkStatus();
}

Status Dispatcher::Shutdown(const std::string& node_id, std::chrono::milliseconds grace) {
  if (grace.count() < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "grace " + std::to_string(grace.count()) + " ms is negative");
  }
  pb::EdgeCommand c;
  SetDuration(c.mutable_shutdown()->mutable_grace(), grace);
  if (auto st = SendTo(node_id, c); !st) return st;
  log::Get("edge")->info("node {}: shutdown sent (grace {} ms)", log::Escape(node_id),
                         grace.count());
  return OkStatus();
}

Status Dispatcher::PushConfig(const std::string& node_id, const std::string& delta,
                              const std::string& version) {
  if (delta.empty()) return MakeError(ErrorCode::kInvalidArgument, "config delta is empty");
  pb::EdgeCommand c;
  c.mutable_push_config()->set_config_delta(delta);
  c.mutable_push_config()->set_version(version);
  if (auto st = SendTo(node_id, c); !st) return st;
  if (auto st = store_.SetConfigVersion(node_id, version); !st) return st;
  log::Get("edge")->info("node {}: config delta version {} sent ({} bytes)", log::Escape(node_id),
                         log::Escape(version), delta.size());
  return OkStatus();
}

std::vector<std::shared_ptr<OutputPacer>> Dispatcher::OnProgress(const std::string& node_id,
                                                                 const std::string& command_id,
                                                                 pb::Chunk chunk) {
  std::vector<std::shared_ptr<CommandObserver>> tell;
  {
    std::lock_guard lock(mu_);
    auto [b, e] = waiters_.equal_range(command_id);
    for (auto it = b; it != e; ++it)
      if (it->second.node_id == node_id) tell.push_back(it->second.observer);
  }
  std::vector<std::shared_ptr<OutputPacer>> congested;
  for (size_t i = 0; i < tell.size(); ++i) {
    tell[i]->OnProgress(i + 1 == tell.size() ? std::move(chunk) : chunk);
    if (auto p = tell[i]->pacer(); p && p->Congested()) congested.push_back(std::move(p));
  }
  return congested;
}

Dispatcher::Dispatcher(Store& store, NodeTokenAuthority& tokens, Clock& clock,
                       size_t max_message_bytes)
    : store_(store),
      tokens_(tokens),
      clock_(clock),
      max_message_bytes_(max_message_bytes),
      // Bounded: a stream that hands in results faster than the disk takes them waits, as it
      // did when it stored them itself (gRPC's flow control then slows the node down).
      results_(
          {.name = "ctl-results", .log_module = "edge"},
          [this](std::vector<CommandCompletion>& batch) { StoreResults(batch); },
          [](const CommandCompletion& c) {
            return c.result.payload_json.size() + c.result.message.size();
          }),
      invokes_(
          {.name = "ctl-invokes", .log_module = "edge"},
          [this](std::vector<QueuedInvoke>& batch) { StoreInvokes(batch); },
          [](const QueuedInvoke& q) { return q.p.cmd.ByteSizeLong(); }) {}

Dispatcher::~Dispatcher() {
  StopQueues();
}

void Dispatcher::OnResult(const std::string& node_id, const std::string& command_id,
                          const pb::EdgeResult& result) {
  results_.Push(CommandCompletion{command_id, node_id, OutcomeFromResult(result),
                                  ToEpochMillis(clock_.Now())});
}

void Dispatcher::FlushResults() {
  results_.Flush();
}

void Dispatcher::FlushInvokes() {
  invokes_.Flush();
}

void Dispatcher::StopQueues() {
  // Commands first: their sends come before any result of theirs could.
  invokes_.Stop();
  results_.Stop();
}

void Dispatcher::StoreResults(const std::vector<CommandCompletion>& batch) {
  auto log = log::Get("edge");
  // Synced, not relaxed (stop 26's review): a node keeps the results of the commands it ran
  // for idempotency, but not its refusals (caps, draining, a bad user token), nor a result it
  // failed to store. Should a power cut undo this write, the command would be resent after
  // the restart and run, after its caller was told it was refused. One transaction for the
  // batch: one wait for the disk for every result in it.
  const std::vector<Result<bool>> stored = store_.CompleteCommands(batch);
  for (size_t i = 0; i < batch.size(); ++i) {
    const CommandCompletion& c = batch[i];
    if (!stored[i]) {
      log->warn("node {}: result for command {} not stored: {}", log::Escape(c.node_id),
                log::Escape(c.command_id), log::Escape(stored[i].error().ToString(), 512));
      continue;
    }
    if (!*stored[i]) {
      log->debug("node {}: duplicate result for command {} ignored (the first one is kept)",
                 log::Escape(c.node_id), log::Escape(c.command_id));
      continue;
    }
    log->info("command {} on node {} completed: {}", log::Escape(c.command_id),
              log::Escape(c.node_id), c.result.outcome);
    auto rec = store_.GetCommand(c.command_id);
    if (!rec || !*rec) continue;
    std::vector<std::shared_ptr<CommandObserver>> tell;
    {
      std::lock_guard lock(mu_);
      auto [b, e] = waiters_.equal_range(c.command_id);
      for (auto it = b; it != e; ++it)
        tell.push_back(it->second.observer);
      waiters_.erase(c.command_id);
    }
    for (auto& o : tell)
      o->OnResult(**rec);
  }
}

}  // namespace edge::controller
