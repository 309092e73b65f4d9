#include "controller/session_manager.h"

#include <algorithm>
#include <utility>

#include "common/json_parse.h"
#include "common/log.h"
#include "common/random.h"
#include "common/utf8.h"
#include "controller/command_notes.h"

namespace edge::controller {
namespace {

namespace pb = aegis::cluster::v1;
using nlohmann::json;

// The capability label in which a node lists its interactive tools (agent/edge/README.md).
constexpr size_t kMaxWorkspacePath = 1024;

int64_t ToMs(Clock::WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

Status CheckWorkspacePath(const std::string& p) {
  if (p.size() > kMaxWorkspacePath)
    return MakeError(ErrorCode::kInvalidArgument, "workspace_path is " + std::to_string(p.size()) +
                                                      " bytes, above " +
                                                      std::to_string(kMaxWorkspacePath));
  if (!IsValidUtf8(p) || p.find('\0') != std::string::npos)
    return MakeError(ErrorCode::kInvalidArgument, "workspace_path is not valid UTF-8 text");
  if (!p.empty() && p.front() == '/')
    return MakeError(ErrorCode::kInvalidArgument,
                     "workspace_path \"" + p + "\" must be relative to the node's sandbox root");
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    if (p.compare(start, end - start, "..") == 0)
      return MakeError(ErrorCode::kInvalidArgument,
                       "workspace_path \"" + p + "\" must not contain \"..\"");
    start = end + 1;
  }
  return {};
}

// What a finished command says, for session.error and end reasons.
std::string Describe(const CommandOutcomeRecord& r) {
  std::string s = r.outcome;
  if (!r.error_code.empty()) s += " " + r.error_code;
  if (r.outcome == "ok") s += " (exit code " + std::to_string(r.exit_code) + ")";
  if (!r.message.empty()) s += ": " + r.message;
  return s;
}

}  // namespace

struct SessionManager::Live {
  explicit Live(size_t max_line) : output(max_line) {}
  std::mutex mu;
  OperatorSessionRecord rec;
  std::shared_ptr<SessionRelay> relay;
  SessionOutput output;
  bool ended = false;
  std::string ticket;                    // handed to the creator
  EdgeApiLimits limits;                  // pinned at creation (rec.limits_version)
  std::vector<CreatedCallback> waiters;  // POSTs waiting for RUNNING
  TimerQueue::TimerId start_timer = 0;
  TimerQueue::TimerId reattach_timer = 0;
  std::string search_command_id;
  std::string ending_reason;  // why the controller ended it (EndLive), before the result came
};

// Observes the session.start command.
class SessionManager::StartObserver final : public CommandObserver {
 public:
  StartObserver(SessionManager& m, std::shared_ptr<Live> live) : m_(m), live_(std::move(live)) {}
  void OnAccepted(const std::string&) override {}
  void OnProgress(pb::Chunk chunk) override { m_.OnStartProgress(live_, chunk); }
  void OnResult(const CommandRecord& command) override { m_.OnStartResult(live_, command); }
  void OnNodeDisconnected(const std::string&) override { m_.OnNodeDisconnected(live_); }
  void OnNodeReconnected(const std::string&) override {}

 private:
  SessionManager& m_;
  std::shared_ptr<Live> live_;
};

// Observes a command sent for a control frame: failures become session.error.
class SessionManager::CommandResultObserver final : public CommandObserver {
 public:
  CommandResultObserver(SessionManager& m, std::shared_ptr<Live> live, std::string ref,
                        std::function<void(const CommandRecord&)> on_ok)
      : m_(m), live_(std::move(live)), ref_(std::move(ref)), on_ok_(std::move(on_ok)) {}
  void OnAccepted(const std::string&) override {}
  void OnProgress(pb::Chunk) override {}
  void OnResult(const CommandRecord& c) override {
    if (c.result.outcome == "ok") {
      if (on_ok_) on_ok_(c);
      return;
    }
    m_.PublishError(live_, c.result.error_code.empty() ? "NODE_ERROR" : c.result.error_code,
                    c.tool + " failed: " + Describe(c.result), ref_);
  }
  void OnNodeDisconnected(const std::string&) override {}
  void OnNodeReconnected(const std::string&) override {}

 private:
  SessionManager& m_;
  std::shared_ptr<Live> live_;
  std::string ref_;
  std::function<void(const CommandRecord&)> on_ok_;
};

SessionManager::SessionManager(Store& store, EdgeFleet& fleet, Clock& clock, TimerQueue& timers,
                               SessionSettings settings)
    : store_(store),
      fleet_(fleet),
      clock_(clock),
      timers_(timers),
      settings_(std::move(settings)),
      tickets_(clock) {}

SessionManager::~SessionManager() {
  Stop();
}

int64_t SessionManager::NowMs() const {
  return ToMs(clock_.Now());
}

void SessionManager::Start(Dispatcher& dispatcher) {
  dispatcher_ = &dispatcher;
  dispatcher.SetCapabilitiesListener(
      [this](const std::string& node_id) { OnCapabilitiesReported(node_id); });
  auto open = store_.ListOpenSessions();
  if (!open) {
    log::Get("sessions")->warn("cannot read the open sessions: {}", open.error().ToString());
    return;
  }
  for (auto& rec : *open) {
    rec.status = kSessionTerminated;
    rec.ended_at_ms = NowMs();
    rec.end_reason = "the controller restarted";
    if (auto st = store_.UpsertSession(rec); !st)
      log::Get("sessions")->warn("session {}: {}", rec.session_id, st.error().ToString());
    std::lock_guard lock(mu_);
    orphans_[rec.node_id].push_back(rec.start_command_id);
  }
  if (!open->empty())
    log::Get("sessions")
        ->info("{} sessions of the previous controller process ended", open->size());
}

void SessionManager::Stop() {
  std::map<std::string, std::shared_ptr<Live>> live;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    live.swap(live_);
  }
  if (dispatcher_) dispatcher_->SetCapabilitiesListener(nullptr);
  for (auto& [id, l] : live) {
    std::lock_guard lock(l->mu);
    if (l->start_timer) timers_.Cancel(l->start_timer);
    if (l->reattach_timer) timers_.Cancel(l->reattach_timer);
    l->relay->CloseAll(kCloseGoingAway, "the controller is stopping");
  }
}

std::shared_ptr<SessionManager::Live> SessionManager::Find(const std::string& session_id) const {
  std::lock_guard lock(mu_);
  auto it = live_.find(session_id);
  return it == live_.end() ? nullptr : it->second;
}

void SessionManager::Save(Live& live) {
  if (auto st = store_.UpsertSession(live.rec); !st)
    log::Get("sessions")
        ->warn("session {}: cannot store: {}", live.rec.session_id, st.error().ToString());
}

void SessionManager::SaveLocking(Live& live) {
  // Under the lock: the gRPC thread's MarkRunning writes rec (and stores it) meanwhile, and a
  // copy stored after its RUNNING would put INIT back.
  std::lock_guard lock(live.mu);
  Save(live);
}

void SessionManager::Create(const TenantTokenClaims& who, const std::string& node_id,
                            const std::string& agent_name, const std::string& workspace_path,
                            CreatedCallback done) {
  auto view = fleet_.GetTenantNode(who.tenant_id, node_id);
  if (!view) return done(std::unexpected(view.error()));
  // The same rule as the node list's status: a node shown offline is refused as offline.
  if (NodeIsOffline(*view, NowMs(), settings_.node_stale)) {
    return done(MakeError(
        ErrorCode::kUnavailable,
        "node " + node_id +
            (view->connected ? " is offline (its last heartbeat is older than " +
                                   std::to_string(settings_.node_stale.count() / 1000) + " s)"
                             : " is not connected")));
  }
  if (NodeIsDraining(*view))
    return done(MakeError(ErrorCode::kDraining, "node " + node_id + " is draining"));
  if (agent_name.empty())
    return done(MakeError(ErrorCode::kInvalidArgument, "agent_name is required"));
  const auto interactive = InteractiveTools(*view);
  if (std::find(interactive.begin(), interactive.end(), agent_name) == interactive.end()) {
    std::string list;
    for (const auto& t : interactive)
      list += (list.empty() ? "" : ", ") + t;
    return done(MakeError(ErrorCode::kInvalidArgument,
                          "agent_name \"" + agent_name + "\" is not an interactive tool of node " +
                              node_id +
                              " (its interactive tools: " + (list.empty() ? "none" : list) + ")"));
  }
  if (auto st = CheckWorkspacePath(workspace_path); !st) return done(std::unexpected(st.error()));

  const NodeLimits node_limits =
      view->edge ? fleet_.LimitsOf(*view->edge) : fleet_.LimitsOf(node_id);
  const EdgeApiLimits& limits = node_limits.limits;
  auto live = std::make_shared<Live>(static_cast<size_t>(limits.max_frame_size));
  live->limits = limits;
  auto& rec = live->rec;
  rec.session_id = NewUuidV4();
  rec.node_id = node_id;
  rec.tenant_id = who.tenant_id;
  rec.user_id = who.subject;
  rec.agent_name = agent_name;
  rec.workspace_path = workspace_path;
  rec.status = kSessionInit;
  rec.limits_version = node_limits.version;
  rec.capabilities_version = view->edge ? view->edge->capabilities_version : 0;
  json tools = json::array();
  RelaySettings rs;
  for (const auto& t : view->capabilities.local_tools()) {
    tools.push_back(t);
    rs.pinned_tools.insert(t);
  }
  rec.pinned_tools_json = tools.dump();
  rec.created_at_ms = rec.last_activity_at_ms = NowMs();
  rs.rate_limit = static_cast<size_t>(limits.rate_limit);
  rs.max_frame_size = static_cast<size_t>(limits.max_frame_size);
  rs.max_buffer_size = static_cast<size_t>(limits.max_buffer_size);
  rs.policy = limits.buffer_overflow_policy == "disconnect" ? OverflowPolicy::kDisconnect
                                                            : OverflowPolicy::kDropOldest;
  rs.denied_tools = settings_.denied_tools;
  live->relay = std::make_shared<SessionRelay>(rec.session_id, clock_, std::move(rs));
  auto ticket = tickets_.Issue({rec.session_id, who.subject, who.tenant_id});
  if (!ticket) return done(std::unexpected(ticket.error()));
  live->ticket = *ticket;
  live->waiters.push_back(std::move(done));
  {
    std::lock_guard lock(mu_);
    if (stopped_)
      return live->waiters.front()(
          MakeError(ErrorCode::kUnavailable, "the controller is stopping"));
    live_[rec.session_id] = live;
    caps_version_.try_emplace(node_id, rec.capabilities_version);
  }
  SaveLocking(*live);

  InvokeSpec spec;
  spec.node_id = node_id;
  spec.tool = "session.start";
  spec.args_json = json{
      {"session_id", rec.session_id},
      {"agent_name", agent_name},
      {"workspace_path",
       workspace_path}}.dump();
  spec.deadline = settings_.session_deadline;
  auto id = fleet_.Invoke(spec, std::make_shared<StartObserver>(*this, live));
  std::vector<CreatedCallback> waiters;
  {
    std::lock_guard lock(live->mu);
    if (!id) {
      live->ended = true;
      rec.status = kSessionTerminated;
      rec.ended_at_ms = NowMs();
      rec.end_reason = "the node refused session.start: " + id.error().message;
      waiters.swap(live->waiters);
    } else {
      rec.start_command_id = *id;
      if (!live->ended && !live->waiters.empty()) {
        std::weak_ptr<Live> weak = live;
        live->start_timer = timers_.After(settings_.start_wait, [weak] {
          auto l = weak.lock();
          if (!l) return;
          std::vector<CreatedCallback> w;
          Created c;
          {
            std::lock_guard lock(l->mu);
            l->start_timer = 0;
            w.swap(l->waiters);
            c = Created{l->rec, l->ticket};
          }
          for (auto& cb : w)
            cb(c);
        });
      }
    }
  }
  if (!id) {
    {
      std::lock_guard lock(mu_);
      live_.erase(rec.session_id);
    }
    tickets_.RevokeSession(rec.session_id);
    SaveLocking(*live);
    for (auto& cb : waiters)
      cb(std::unexpected(id.error()));
    return;
  }
  SaveLocking(*live);
  ArmReattach(live);
  log::Get("sessions")
      ->info("session {} of {} on node {} ({}) created", rec.session_id, log::Escape(who.subject),
             log::Escape(node_id), log::Escape(agent_name));
}

void SessionManager::MarkRunning(const std::shared_ptr<Live>& live) {
  std::vector<CreatedCallback> waiters;
  Created c;
  {
    std::lock_guard lock(live->mu);
    if (live->ended || live->rec.status != kSessionInit) return;
    live->rec.status = kSessionRunning;
    live->rec.last_activity_at_ms = NowMs();
    Save(*live);
    OutFrame f;
    f.type = "session.started";
    f.session_id = live->rec.session_id;
    f.payload = {{"node_id", live->rec.node_id},
                 {"agent_name", live->rec.agent_name},
                 {"workspace_path", live->rec.workspace_path}};
    live->relay->Publish(std::move(f));
    if (live->start_timer) timers_.Cancel(live->start_timer);
    live->start_timer = 0;
    waiters.swap(live->waiters);
    c = Created{live->rec, live->ticket};
  }
  for (auto& cb : waiters)
    cb(c);
}

void SessionManager::OnStartProgress(const std::shared_ptr<Live>& live, const pb::Chunk& chunk) {
  MarkRunning(live);
  if (!chunk.has_stdout() && !chunk.has_stderr()) return;
  std::lock_guard lock(live->mu);
  if (live->ended) return;
  live->rec.last_activity_at_ms = NowMs();
  const bool err = chunk.has_stderr();
  live->output.Append(err, err ? chunk.stderr() : chunk.stdout(), [&](ProcessFrame pf) {
    if (pf.type == "session.usage") {
      auto num = [&](const char* k) -> int64_t {
        auto it = pf.payload.find(k);
        return it != pf.payload.end() && it->is_number_integer() && it->get<int64_t>() >= 0
                   ? it->get<int64_t>()
                   : 0;
      };
      UsageRecord u{.node_id = live->rec.node_id,
                    .session_id = live->rec.session_id,
                    .at_ms = NowMs(),
                    .input_tokens = num("input_tokens"),
                    .output_tokens = num("output_tokens")};
      if (auto c = pf.payload.find("estimated_cost"); c != pf.payload.end() && c->is_number())
        u.estimated_cost = std::max(0.0, c->get<double>());
      u.tool_invocations = num("tool_invocations");
      if (auto st = store_.InsertUsage(u); !st)
        log::Get("sessions")
            ->warn("session {}: usage not stored: {}", live->rec.session_id, st.error().ToString());
    }
    OutFrame f;
    f.type = std::move(pf.type);
    f.session_id = live->rec.session_id;
    f.turn_id = std::move(pf.turn_id);
    f.payload = std::move(pf.payload);
    live->relay->Publish(std::move(f));
  });
}

void SessionManager::OnStartResult(const std::shared_ptr<Live>& live,
                                   const CommandRecord& command) {
  std::vector<CreatedCallback> waiters;
  {
    std::lock_guard lock(live->mu);
    const auto& r = command.result;
    if (r.outcome == "ok") live->rec.exit_code = r.exit_code;
    if (!live->ended) {
      live->output.Flush([&](ProcessFrame pf) {
        OutFrame f;
        f.type = std::move(pf.type);
        f.session_id = live->rec.session_id;
        f.turn_id = std::move(pf.turn_id);
        f.payload = std::move(pf.payload);
        live->relay->Publish(std::move(f));
      });
      // A session whose context caps its output is ended past the cap (sandbox/executor.h):
      // the note says so, where the outcome alone would read as a plain TERM.
      const auto capped = OutputCapNote(command);
      OutFrame f;
      f.type = "session.ended";
      f.session_id = live->rec.session_id;
      f.payload = {{"exit_code", r.outcome == "ok" ? json(r.exit_code) : json(nullptr)},
                   {"outcome", r.outcome},
                   {"message", capped ? *capped : ToValidUtf8(r.message)}};
      live->relay->Publish(std::move(f));
      live->ended = true;
      live->rec.status = kSessionTerminated;
      live->rec.ended_at_ms = NowMs();
      if (!live->ending_reason.empty()) {
        live->rec.end_reason = live->ending_reason;
      } else if (capped) {
        live->rec.end_reason = *capped;
      } else if (r.outcome == "ok") {
        live->rec.end_reason = "the process exited with code " + std::to_string(r.exit_code);
      } else {
        live->rec.end_reason = "session.start ended " + Describe(r);
      }
      live->relay->CloseAll(kCloseNormal, "session ended", /*flush_first=*/true);
      if (live->start_timer) timers_.Cancel(live->start_timer);
      if (live->reattach_timer) timers_.Cancel(live->reattach_timer);
      live->start_timer = live->reattach_timer = 0;
      waiters.swap(live->waiters);
    }
    Save(*live);
  }
  {
    std::lock_guard lock(mu_);
    live_.erase(live->rec.session_id);
  }
  tickets_.RevokeSession(live->rec.session_id);
  for (auto& cb : waiters)
    cb(MakeError(ErrorCode::kAborted,
                 "the session ended before it ran: " + Describe(command.result)));
  log::Get("sessions")
      ->info("session {} ended: {}", live->rec.session_id, log::Escape(live->rec.end_reason));
}

void SessionManager::OnNodeDisconnected(const std::shared_ptr<Live>& live) {
  PublishError(
      live, "NODE_DISCONNECTED",
      "node " + live->rec.node_id + " disconnected; the session resumes when it reconnects", "");
}

void SessionManager::PublishError(const std::shared_ptr<Live>& live, const std::string& code,
                                  const std::string& message, const std::string& ref) {
  std::lock_guard lock(live->mu);
  if (live->ended) return;
  live->relay->Publish(SessionError(live->rec.session_id, code, message, ref));
}

void SessionManager::Invoke(const std::shared_ptr<Live>& live, const std::string& tool, json args,
                            const std::string& ref, std::function<void(const CommandRecord&)> on_ok,
                            std::string* command_id_out) {
  InvokeSpec spec;
  spec.node_id = live->rec.node_id;
  spec.tool = tool;
  spec.args_json = args.dump(-1, ' ', false, json::error_handler_t::replace);
  auto id = fleet_.Invoke(
      spec, std::make_shared<CommandResultObserver>(*this, live, ref, std::move(on_ok)));
  if (!id) {
    PublishError(live, id.error().code == ErrorCode::kUnavailable ? "NODE_OFFLINE" : "NODE_ERROR",
                 tool + " could not be sent: " + id.error().message, ref);
    return;
  }
  if (command_id_out) *command_id_out = *id;
}

void SessionManager::Act(const std::shared_ptr<Live>& live, const ControlFrame& f) {
  std::string session_id, workspace, start_id;
  {
    std::lock_guard lock(live->mu);
    if (live->ended) return;
    live->rec.last_activity_at_ms = NowMs();
    session_id = live->rec.session_id;
    workspace = live->rec.workspace_path;
    start_id = live->rec.start_command_id;
  }
  if (f.type == "control.prompt.request" || f.type == "control.interaction.response") {
    json line = {{"type", f.type}, {"message_id", f.message_id}, {"payload", f.payload}};
    line["turn_id"] = f.turn_id ? json(*f.turn_id) : json(nullptr);
    Invoke(live, "session.input",
           {{"session_id", session_id},
            {"line", line.dump(-1, ' ', false, json::error_handler_t::replace)}},
           f.message_id);
  } else if (f.type == "control.interrupt") {
    Invoke(live, "session.signal", {{"session_id", session_id}, {"signal", "INT"}}, f.message_id);
  } else if (f.type == "control.file.search") {
    json args = {{"path", workspace.empty() ? "." : workspace},
                 {"query", f.payload.value("query", "")},
                 {"limit", f.payload.value("limit", 20)}};
    std::string ref = f.message_id;
    std::string id;
    std::weak_ptr<Live> weak = live;
    Invoke(
        live, "file.search", std::move(args), ref,
        [weak, ref](const CommandRecord& c) {
          auto l = weak.lock();
          if (!l) return;
          std::lock_guard lock(l->mu);
          if (l->ended) return;
          OutFrame out;
          out.type = "session.file.candidates";
          out.session_id = l->rec.session_id;
          auto payload = ParseJsonBounded(c.result.payload_json, "file.search result");
          out.payload = payload && payload->is_object() ? *payload : json::object();
          out.payload["ref_message_id"] = ref;
          l->relay->Publish(std::move(out));
        },
        &id);
    std::lock_guard lock(live->mu);
    live->search_command_id = id;
  } else if (f.type == "control.file.search.cancel") {
    std::string id;
    {
      std::lock_guard lock(live->mu);
      id.swap(live->search_command_id);
    }
    if (!id.empty()) (void)fleet_.CancelCommand(id, "control.file.search.cancel");
  } else if (f.type == "control.session.close") {
    EndLive(live, "closed from a socket (control.session.close)");
  }
}

void SessionManager::EndLive(const std::shared_ptr<Live>& live, const std::string& reason) {
  std::string command_id;
  {
    std::lock_guard lock(live->mu);
    if (live->ended) return;
    command_id = live->rec.start_command_id;
    if (live->ending_reason.empty()) live->ending_reason = reason;
  }
  // The agent kills the process group; its result ends the session (OnStartResult).
  auto st = fleet_.CancelCommand(command_id, reason);
  if (st) return;
  // The node cannot be told now (offline): the session ends here, and the cancel is sent when
  // the node next says Hello (as for sessions a previous controller left open).
  log::Get("sessions")
      ->warn("session {}: cancel not delivered ({}); it is sent when node {} reconnects",
             live->rec.session_id, st.error().ToString(), log::Escape(live->rec.node_id));
  if (!command_id.empty()) {
    std::lock_guard lock(mu_);
    orphans_[live->rec.node_id].push_back(command_id);
  }
  CommandRecord c;
  c.tool = "session.start";
  c.result.outcome = "cancelled";
  c.result.message = reason;
  OnStartResult(live, c);
}

void SessionManager::ArmReattach(const std::shared_ptr<Live>& live) {
  std::lock_guard lock(live->mu);
  if (live->ended || live->reattach_timer) return;
  std::weak_ptr<Live> weak = live;
  const auto window = std::chrono::seconds(live->limits.reattach_window);
  live->reattach_timer = timers_.After(window, [this, weak, window] {
    auto l = weak.lock();
    if (!l) return;
    {
      std::lock_guard lock(l->mu);
      l->reattach_timer = 0;
      if (l->relay->sockets() > 0) return;
    }
    EndLive(l, "no socket for reattach_window (" + std::to_string(window.count()) + " s)");
  });
}

Result<OperatorSessionRecord> SessionManager::Owned(const TenantTokenClaims& who,
                                                    const std::string& session_id) const {
  const auto not_found = [&] {
    return MakeError(ErrorCode::kNotFound, "session " + session_id + " not found");
  };
  if (auto live = Find(session_id)) {
    std::lock_guard lock(live->mu);
    if (live->rec.tenant_id != who.tenant_id || live->rec.user_id != who.subject)
      return not_found();
    return live->rec;
  }
  auto rec = store_.GetSession(session_id);
  if (!rec) return std::unexpected(rec.error());
  if (!*rec || (*rec)->tenant_id != who.tenant_id || (*rec)->user_id != who.subject)
    return not_found();
  return **rec;
}

Result<std::string> SessionManager::IssueTicket(const TenantTokenClaims& who,
                                                const std::string& session_id) {
  auto rec = Owned(who, session_id);
  if (!rec) return std::unexpected(rec.error());
  if (rec->status == kSessionTerminated || !Find(session_id))
    return MakeError(ErrorCode::kFailedPrecondition, "session " + session_id + " has ended");
  return tickets_.Issue({session_id, who.subject, who.tenant_id});
}

Result<std::vector<OperatorSessionRecord>> SessionManager::List(const TenantTokenClaims& who,
                                                                const std::string& status,
                                                                const std::string& node_id) {
  if (!status.empty() && status != kSessionInit && status != kSessionRunning &&
      status != kSessionDetached)
    return MakeError(ErrorCode::kInvalidArgument,
                     "status \"" + status + "\" is not INIT, RUNNING or DETACHED");
  auto rows = store_.ListSessions(who.tenant_id, who.subject, node_id, status, 500);
  if (!rows) return rows;
  // Live records are fresher than their last save.
  for (auto& r : *rows) {
    if (auto live = Find(r.session_id)) {
      std::lock_guard lock(live->mu);
      r = live->rec;
    }
  }
  std::erase_if(*rows, [&](const OperatorSessionRecord& r) {
    return r.status == kSessionTerminated || (!status.empty() && r.status != status);
  });
  return rows;
}

Result<OperatorSessionRecord> SessionManager::Get(const TenantTokenClaims& who,
                                                  const std::string& session_id) {
  return Owned(who, session_id);
}

Status SessionManager::End(const TenantTokenClaims& who, const std::string& session_id) {
  auto rec = Owned(who, session_id);
  if (!rec) return std::unexpected(rec.error());
  auto live = Find(session_id);
  if (!live) return {};  // already ended: DELETE is idempotent
  EndLive(live, "ended by " + who.subject);
  return {};
}

Result<TicketGrant> SessionManager::AdmitSocket(const std::string& ticket,
                                                const std::string& session_id) {
  // An ended session is gone (410) from the moment it ended, also while its entry is still
  // being taken out of the live table.
  auto live = Find(session_id);
  bool ended = !live;
  if (live) {
    std::lock_guard lock(live->mu);
    ended = live->ended;
  }
  if (ended) {
    auto rec = store_.GetSession(session_id);
    if (!rec) return std::unexpected(rec.error());
    if (!*rec) return MakeError(ErrorCode::kNotFound, "session " + session_id + " not found");
    return MakeError(ErrorCode::kFailedPrecondition, "session " + session_id + " has ended");
  }
  auto r = tickets_.Consume(ticket, session_id);
  switch (r.verdict) {
    case SessionTickets::Verdict::kGranted:
      return r.grant;
    case SessionTickets::Verdict::kOtherSession:
      return MakeError(ErrorCode::kPermissionDenied,
                       "the ticket belongs to another session (it is now spent)");
    case SessionTickets::Verdict::kExpired:
      return MakeError(ErrorCode::kUnauthenticated, "the ticket has expired");
    case SessionTickets::Verdict::kUnknown:
      break;
  }
  return MakeError(ErrorCode::kUnauthenticated, "the ticket is unknown or already used");
}

Result<uint64_t> SessionManager::AttachSocket(const std::string& session_id,
                                              std::shared_ptr<RelaySocket> socket,
                                              std::optional<uint64_t> last_seq) {
  auto live = Find(session_id);
  if (!live) return MakeError(ErrorCode::kNotFound, "session " + session_id + " has ended");
  std::lock_guard lock(live->mu);
  if (live->ended) return MakeError(ErrorCode::kNotFound, "session " + session_id + " has ended");
  const uint64_t id = live->relay->Attach(std::move(socket), last_seq);
  if (live->reattach_timer) timers_.Cancel(live->reattach_timer);
  live->reattach_timer = 0;
  if (live->rec.status == kSessionDetached) {
    live->rec.status = kSessionRunning;
    Save(*live);
  }
  return id;
}

void SessionManager::OnSocketText(const std::string& session_id, uint64_t socket_id,
                                  std::string_view text) {
  auto live = Find(session_id);
  if (!live) return;
  auto frame = live->relay->OnText(socket_id, text);
  if (frame) Act(live, *frame);
}

void SessionManager::OnSocketWritable(const std::string& session_id, uint64_t socket_id) {
  if (auto live = Find(session_id)) live->relay->OnWritable(socket_id);
}

void SessionManager::OnSocketClosed(const std::string& session_id, uint64_t socket_id) {
  auto live = Find(session_id);
  if (!live) return;
  {
    std::lock_guard lock(live->mu);
    if (live->relay->Detach(socket_id) > 0 || live->ended) return;
    if (live->rec.status == kSessionRunning) {
      live->rec.status = kSessionDetached;
      Save(*live);
    }
  }
  ArmReattach(live);
}

void SessionManager::OnCapabilitiesReported(const std::string& node_id) {
  std::vector<std::string> orphans;
  std::vector<std::shared_ptr<Live>> sessions;
  {
    std::lock_guard lock(mu_);
    if (auto it = orphans_.find(node_id); it != orphans_.end()) {
      orphans.swap(it->second);
      orphans_.erase(it);
    }
  }
  for (const auto& id : orphans)
    if (!id.empty()) (void)fleet_.CancelCommand(id, "the controller restarted; session ended");
  auto edge = store_.GetEdgeNode(node_id);
  if (!edge || !*edge) return;
  const int64_t version = (*edge)->capabilities_version;
  {
    std::lock_guard lock(mu_);
    auto [it, fresh] = caps_version_.try_emplace(node_id, version);
    if (fresh || it->second >= version) return;
    it->second = version;
    for (auto& [id, l] : live_)
      if (l->rec.node_id == node_id) sessions.push_back(l);
  }
  for (auto& l : sessions) {
    OutFrame f;
    f.type = "node.config.changed";
    f.payload = {{"node_id", node_id},
                 {"changed_scope", "capabilities"},
                 {"config_version", version},
                 {"reason", "the node reported a different tool list"}};
    std::lock_guard lock(l->mu);
    if (!l->ended) l->relay->Publish(std::move(f));
  }
}

void SessionManager::OnLimitsChanged(const std::string& node_id, int64_t version) {
  std::vector<std::shared_ptr<Live>> sessions;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, l] : live_)
      if (l->rec.node_id == node_id) sessions.push_back(l);
  }
  for (auto& l : sessions) {
    OutFrame f;
    f.type = "node.config.changed";
    f.payload = {{"node_id", node_id}, {"changed_scope", "limits"}, {"config_version", version}};
    std::lock_guard lock(l->mu);
    if (!l->ended) l->relay->Publish(std::move(f));
  }
}

Result<EdgeApiLimits> SessionManager::SessionLimits(const std::string& session_id) const {
  auto live = Find(session_id);
  if (!live) return MakeError(ErrorCode::kNotFound, "session " + session_id + " not found");
  std::lock_guard lock(live->mu);
  return live->limits;
}

size_t SessionManager::ActiveSessions(const std::string& node_id) const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(
      live_.begin(), live_.end(), [&](const auto& e) { return e.second->rec.node_id == node_id; }));
}

}  // namespace edge::controller
