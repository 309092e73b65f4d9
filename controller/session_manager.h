// SessionManager: the operator sessions of the controller (wire.md §5.2–§5.5) — the session
// table with its states INIT → RUNNING ⇄ DETACHED → TERMINATED, the one-time WebSocket
// tickets, each live session's relay, and the commands that drive the session's process on
// its node. Doors: SessionApi (REST + WebSocket) calls it; the edge stream tells it when a
// node's tools change.
//
// A session is one `session.start` InvokeTool on the node (deadline `session_deadline`): its
// CommandProgress chunks are the process's output (SessionOutput turns them into frames for
// the relay), its CommandResult ends the session (session.ended {exit_code, outcome,
// message}). Control frames from the sockets become commands of their own:
//   control.prompt.request, control.interaction.response → session.input {session_id, line}
//       where line = {"type","message_id","turn_id","payload"} as one JSON line;
//   control.interrupt → session.signal {session_id, signal: "INT"};
//   control.file.search → file.search {path: workspace, query, limit}; its result is relayed
//       as session.file.candidates (payload: the tool's result, plus ref_message_id);
//   control.file.search.cancel → Cancel of the search in flight;
//   control.session.close → Cancel of session.start (the agent kills the process group).
// A command that fails is reported in the stream as session.error {code, message,
// ref_message_id}. session.usage frames are stored (Store::InsertUsage) for the metrics and
// relayed. The session is RUNNING once the node reports output or a status for it (the POST
// answers then, or with INIT after `start_wait`); DETACHED when its last socket closes; a
// session without a socket for `reattach_window` (from creation, or from its last socket) is
// ended, which kills its process group. A node's stream ending sends session.error
// NODE_DISCONNECTED to the sockets (the process lives on: the agent keeps running it).
// Sessions left open by a previous controller process are ended at Start() (their relays
// and sockets died with it) and their session.start commands cancelled.
//
// Tenancy: every call takes the caller's claims; a session of another tenant, or of another
// user of the same tenant, is NOT_FOUND (wire.md §5.1: nothing leaks).
// Thread-safe. Borrows the store, the fleet, the clock and the timer queue; owns the relays.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "common/timer_queue.h"
#include "controller/edge_api_limits.h"
#include "controller/edge_fleet.h"
#include "controller/sessions/session_output.h"
#include "controller/sessions/session_relay.h"
#include "controller/sessions/session_tickets.h"
#include "controller/store.h"
#include "controller/tenant_tokens.h"

namespace edge::controller {

inline constexpr const char* kSessionInit = "INIT";
inline constexpr const char* kSessionRunning = "RUNNING";
inline constexpr const char* kSessionDetached = "DETACHED";
inline constexpr const char* kSessionTerminated = "TERMINATED";

struct SessionSettings {
  std::set<std::string, std::less<>> denied_tools;  // http.denied_tools
  std::chrono::milliseconds start_wait{5000};
  std::chrono::milliseconds session_deadline{std::chrono::hours(12)};
  std::chrono::milliseconds node_stale{90'000};  // a node whose heartbeat is older is offline
};

class SessionManager {
 public:
  SessionManager(Store& store, EdgeFleet& fleet, Clock& clock, TimerQueue& timers,
                 SessionSettings settings);
  ~SessionManager();
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  // Ends the sessions a previous controller process left open, and listens to the nodes'
  // capability reports on `dispatcher` (until Stop).
  void Start(Dispatcher& dispatcher);
  // Closes every socket (1001) and forgets the live sessions; their processes are left to
  // the next Start() (controller stop).
  void Stop();

  struct Created {
    OperatorSessionRecord session;
    std::string ticket;
  };
  using CreatedCallback = std::function<void(Result<Created>)>;
  // POST /v1/edge/nodes/{id}/sessions. Errors: NOT_FOUND node; UNAVAILABLE the node is not
  // connected (NODE_OFFLINE); DRAINING (NODE_DRAINING); INVALID_ARGUMENT agent_name not an
  // interactive tool of the node, or a bad workspace_path; ABORTED the node ended
  // session.start before it ran (NODE_ERROR). `done` is called once, on another thread or
  // this one.
  void Create(const TenantTokenClaims& who, const std::string& node_id,
              const std::string& agent_name, const std::string& workspace_path,
              CreatedCallback done);
  // POST /v1/edge/sessions/{id}/tickets: FAILED_PRECONDITION for an ended session.
  Result<std::string> IssueTicket(const TenantTokenClaims& who, const std::string& session_id);
  // GET /v1/edge/sessions (status "" = every state but TERMINATED).
  Result<std::vector<OperatorSessionRecord>> List(const TenantTokenClaims& who,
                                                  const std::string& status,
                                                  const std::string& node_id);
  // GET /v1/edge/sessions/{id}/history (any state).
  Result<OperatorSessionRecord> Get(const TenantTokenClaims& who, const std::string& session_id);
  // DELETE /v1/edge/sessions/{id}: ends it (the process group is killed on the node).
  Status End(const TenantTokenClaims& who, const std::string& session_id);

  // The WebSocket upgrade (before it is accepted): the session must be live (NOT_FOUND
  // unknown → 404, FAILED_PRECONDITION ended → 410), then the ticket is consumed
  // (UNAUTHENTICATED → 401, PERMISSION_DENIED another session's → 403).
  Result<TicketGrant> AdmitSocket(const std::string& ticket, const std::string& session_id);
  // The accepted socket joins the session (replaying after `last_seq`); returns its id for
  // OnSocketText / OnSocketWritable / OnSocketClosed. NOT_FOUND if the session ended since.
  Result<uint64_t> AttachSocket(const std::string& session_id, std::shared_ptr<RelaySocket> socket,
                                std::optional<uint64_t> last_seq);
  void OnSocketText(const std::string& session_id, uint64_t socket_id, std::string_view text);
  void OnSocketWritable(const std::string& session_id, uint64_t socket_id);
  void OnSocketClosed(const std::string& session_id, uint64_t socket_id);

  // The node's tools may have changed (Hello, CapabilityUpdate): when its capabilities
  // version rose, node.config.changed goes to every socket of its sessions.
  void OnCapabilitiesReported(const std::string& node_id);
  // The limits of a node changed to `version` (PushConfig of edge_api.limits, see
  // EdgeFleet::SetLimitsListener): node.config.changed goes to every socket of its sessions,
  // which keep the limits they were created with.
  void OnLimitsChanged(const std::string& node_id, int64_t version);

  // Live sessions of a node (GET /v1/edge/nodes: active_sessions_count).
  size_t ActiveSessions(const std::string& node_id) const;
  // The limits a live session runs with (its node's when it was created); NOT_FOUND once it
  // ended.
  Result<EdgeApiLimits> SessionLimits(const std::string& session_id) const;

 private:
  struct Live;
  class StartObserver;
  class CommandResultObserver;

  std::shared_ptr<Live> Find(const std::string& session_id) const;
  // The caller's live-or-ended record, or NOT_FOUND alike for another tenant or user.
  Result<OperatorSessionRecord> Owned(const TenantTokenClaims& who,
                                      const std::string& session_id) const;
  // Stores live.rec; the caller holds live.mu, so that writers of the record store it in the
  // order they changed it.
  void Save(Live& live);
  // Save, taking live.mu (for callers that do not hold it).
  void SaveLocking(Live& live);
  void MarkRunning(const std::shared_ptr<Live>& live);
  void OnStartProgress(const std::shared_ptr<Live>& live, const aegis::cluster::v1::Chunk& chunk);
  void OnStartResult(const std::shared_ptr<Live>& live, const CommandRecord& command);
  void OnNodeDisconnected(const std::shared_ptr<Live>& live);
  void Act(const std::shared_ptr<Live>& live, const ControlFrame& frame);
  // Sends a command for the session; its failure is published as session.error.
  void Invoke(const std::shared_ptr<Live>& live, const std::string& tool, nlohmann::json args,
              const std::string& ref_message_id,
              std::function<void(const CommandRecord&)> on_ok = nullptr,
              std::string* command_id_out = nullptr);
  void EndLive(const std::shared_ptr<Live>& live, const std::string& reason);
  void ArmReattach(const std::shared_ptr<Live>& live);
  void PublishError(const std::shared_ptr<Live>& live, const std::string& code,
                    const std::string& message, const std::string& ref);
  int64_t NowMs() const;

  Store& store_;
  EdgeFleet& fleet_;
  Clock& clock_;
  TimerQueue& timers_;
  const SessionSettings settings_;
  SessionTickets tickets_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Live>> live_;  // session id → live session
  std::map<std::string, int64_t> caps_version_;        // node → last capabilities version seen
  // session.start commands to cancel when their node next says Hello, by node: those of
  // sessions a previous controller left open, and those of sessions ended while their node
  // was offline.
  std::map<std::string, std::vector<std::string>> orphans_;
  bool stopped_ = false;
  Dispatcher* dispatcher_ = nullptr;
};

}  // namespace edge::controller
