// OperatorApi, part two: node metrics, the session endpoints and the WebSocket relay's door
// (wire.md §5.2, §5.3). The session rules live in SessionManager; this file only translates
// HTTP and WebSocket to its calls and back.
#include <chrono>
#include <mutex>

#include "common/json_parse.h"
#include "common/log.h"
#include "common/rfc3339.h"
#include "controller/operator_api.h"
#include "controller/session_manager.h"
#include "http/query.h"
#include "http/websocket.h"

namespace edge::controller {
namespace {

using nlohmann::json;
namespace chr = std::chrono;

std::shared_ptr<spdlog::logger> Log() {
  return log::Get("operator_api");
}

std::string At(int64_t ms) {
  return FormatRfc3339(FromEpochMillis(ms));
}

// Bridges one accepted WebSocket and the session's relay: what the relay sends goes to the
// socket; what the socket receives goes to the manager. Messages that arrive before the
// socket is attached to the relay wait in `early_`.
class SocketBridge final : public http::WebSocketHandler,
                           public RelaySocket,
                           public std::enable_shared_from_this<SocketBridge> {
 public:
  SocketBridge(SessionManager& sessions, std::string session_id)
      : sessions_(sessions), session_id_(std::move(session_id)) {}

  void SetSocket(std::shared_ptr<http::WebSocket> ws) {
    std::lock_guard lock(mu_);
    ws_ = std::move(ws);
  }
  // Attached to the relay as `id`: hands over what arrived before.
  void Attached(uint64_t id) {
    std::vector<std::string> early;
    bool closed;
    {
      std::lock_guard lock(mu_);
      id_ = id;
      early.swap(early_);
      closed = closed_;
    }
    for (auto& t : early)
      sessions_.OnSocketText(session_id_, id, t);
    if (closed) sessions_.OnSocketClosed(session_id_, id);
  }

  // RelaySocket
  void Send(std::string frame) override {
    if (auto ws = Socket()) (void)ws->SendText(std::move(frame));
  }
  size_t pending_bytes() const override {
    auto ws = Socket();
    return ws ? ws->queued_bytes() : 0;
  }
  void Close(uint16_t code, std::string reason) override {
    if (code == kCloseTryAgainLater) {
      log::Get("sessions")
          ->warn("session {}: a socket fell behind and was closed with 1013: {}", session_id_,
                 reason);
    }
    if (auto ws = Socket())
      ws->Close(code, std::move(reason),
                code == kCloseTryAgainLater ? http::WebSocket::Pending::kDrop
                                            : http::WebSocket::Pending::kFlush);
  }

  // WebSocketHandler
  void OnText(std::string text) override {
    uint64_t id;
    {
      std::lock_guard lock(mu_);
      if (id_ == 0) {
        early_.push_back(std::move(text));
        return;
      }
      id = id_;
    }
    sessions_.OnSocketText(session_id_, id, text);
  }
  void OnWritten() override {
    uint64_t id;
    {
      std::lock_guard lock(mu_);
      id = id_;
    }
    if (id != 0) sessions_.OnSocketWritable(session_id_, id);
  }
  void OnClosed(uint16_t, std::string) override {
    uint64_t id;
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      id = id_;
      ws_.reset();
    }
    if (id != 0) sessions_.OnSocketClosed(session_id_, id);
  }

 private:
  std::shared_ptr<http::WebSocket> Socket() const {
    std::lock_guard lock(mu_);
    return ws_;
  }

  SessionManager& sessions_;
  const std::string session_id_;
  mutable std::mutex mu_;
  std::shared_ptr<http::WebSocket> ws_;
  uint64_t id_ = 0;
  bool closed_ = false;
  std::vector<std::string> early_;
};

json SessionJson(const OperatorSessionRecord& s, bool history) {
  json j = {{"session_id", s.session_id},
            {"node_id", s.node_id},
            {"agent_name", s.agent_name},
            {"status", s.status},
            {"created_at", At(s.created_at_ms)},
            {"last_activity_at", At(s.last_activity_at_ms)},
            {"pinned_config_versions",
             {{"limits", s.limits_version}, {"capabilities", s.capabilities_version}}}};
  if (history) {
    j["workspace_path"] = s.workspace_path;
    j["ended_at"] = s.ended_at_ms ? json(At(s.ended_at_ms)) : json(nullptr);
    j["exit_code"] = s.exit_code ? json(*s.exit_code) : json(nullptr);
    j["end_reason"] = s.end_reason;
    j["pinned_tools"] =
        ParseJsonBounded(s.pinned_tools_json, "pinned tools").value_or(json::array());
  }
  return j;
}

}  // namespace

Result<std::pair<int64_t, int64_t>> OperatorApi::PeriodWindow(std::string_view period,
                                                              Clock::WallTime now) {
  const auto today = chr::floor<chr::days>(now);
  chr::sys_days start;
  if (period == "today" || period.empty()) {
    start = today;
  } else if (period == "week") {
    // ISO weeks start on Monday.
    const chr::weekday wd{today};
    start = today - chr::days((wd.c_encoding() + 6) % 7);
  } else if (period == "month") {
    const chr::year_month_day ymd{today};
    start = chr::sys_days{ymd.year() / ymd.month() / chr::day{1}};
  } else {
    return MakeError(ErrorCode::kInvalidArgument, "period \"" + std::string(period.substr(0, 32)) +
                                                      "\" is not today, week or month");
  }
  const int64_t since = chr::duration_cast<chr::milliseconds>(start.time_since_epoch()).count();
  return std::make_pair(since, ToEpochMillis(now) + 1);
}

void OperatorApi::RegisterSessions(http::Router& router) {
  router.Add("GET", "/v1/edge/nodes/{id}/metrics",
             [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) {
               NodeMetrics(ex, p);
             });
  if (!sessions_) return;
  router.Add("POST", "/v1/edge/nodes/{id}/sessions",
             [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) {
               CreateSession(ex, p);
             });
  router.Add(
      "GET", "/v1/edge/sessions",
      [this](std::shared_ptr<http::Exchange> ex, const http::PathParams&) { ListSessions(ex); });
  router.Add("POST", "/v1/edge/sessions/{id}/tickets",
             [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) {
               auto user = Authenticate(ex);
               if (!user) return;
               auto t = sessions_->IssueTicket(*user, p.at("id"));
               // An ended session's ticket is refused as its upgrade would be: 410 (§5.3), so
               // a client stops asking (the fleet page marks the session ended on 404/410).
               if (!t && t.error().code == ErrorCode::kFailedPrecondition) {
                 return http_.Refuse(ex, 410, "GONE", t.error().message);
               }
               if (!t) return Fail(ex, t.error());
               http::RespondEchoingRequestId(
                   ex,
                   http::Response{
                       .status = 201,
                       .body = json{{"session_id", p.at("id")}, {"edge_ws_ticket", *t}}.dump()});
             });
  router.Add("DELETE", "/v1/edge/sessions/{id}",
             [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) {
               auto user = Authenticate(ex);
               if (!user) return;
               if (auto st = sessions_->End(*user, p.at("id")); !st) return Fail(ex, st.error());
               http::RespondEchoingRequestId(
                   ex, http::Response{.status = 204, .body = "", .content_type = ""});
             });
  router.Add("GET", "/v1/edge/sessions/{id}/history",
             [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) {
               auto user = Authenticate(ex);
               if (!user) return;
               auto s = sessions_->Get(*user, p.at("id"));
               if (!s) return Fail(ex, s.error());
               http::RespondEchoingRequestId(
                   ex, http::Response{.status = 200, .body = SessionJson(*s, true).dump()});
             });
  router.Add(
      "GET", "/v1/edge/ws/stream",
      [this](std::shared_ptr<http::Exchange> ex, const http::PathParams&) { OpenStream(ex); });
}

void OperatorApi::NodeMetrics(const std::shared_ptr<http::Exchange>& ex,
                              const http::PathParams& params) {
  auto user = Authenticate(ex);
  if (!user) return;
  auto query = http::ParseQuery(ex->request().Query());
  if (!query) return Fail(ex, query.error());
  if (auto bad = query->FirstKeyOutside({"period"}))
    return Fail(ex, {ErrorCode::kInvalidArgument, "unknown query parameter \"" + *bad + "\""});
  auto period = query->Unique("period");
  if (!period) return Fail(ex, period.error());
  // Absent or empty (`?period=`) is the default, and the answer names it.
  const std::string name = period->value_or("").empty() ? "today" : **period;
  const auto now = clock_.Now();
  auto window = PeriodWindow(name, now);
  if (!window) return Fail(ex, window.error());
  const std::string& node_id = params.at("id");
  auto node = fleet_.GetTenantNode(user->tenant_id, node_id);
  if (!node) return Fail(ex, node.error());
  auto a = fleet_.GetNodeActivity(user->tenant_id, node_id, window->first, window->second);
  if (!a) return Fail(ex, a.error());
  const int64_t uptime_ms = node->connected && node->connected_since_ms
                                ? ToEpochMillis(now) - node->connected_since_ms
                                : 0;
  json body = {{"node_id", node_id},
               {"period", name},
               {"aggregated_usage",
                {{"total_input_tokens", a->input_tokens},
                 {"total_output_tokens", a->output_tokens},
                 {"estimated_cost", a->estimated_cost},
                 {"total_tool_invocations", a->commands + a->session_tool_invocations}}},
               {"health",
                {{"uptime_seconds", uptime_ms / 1000},
                 {"last_error", a->last_error.empty() ? json(nullptr) : json(a->last_error)}}}};
  http::RespondEchoingRequestId(ex, http::Response{.status = 200, .body = body.dump()});
}

void OperatorApi::CreateSession(const std::shared_ptr<http::Exchange>& ex,
                                const http::PathParams& params) {
  auto user = Authenticate(ex);
  if (!user) return;
  auto body = ParseJsonBounded(ex->request().body, "session request body");
  if (!body) return Fail(ex, body.error());
  if (!body->is_object())
    return Fail(ex, {ErrorCode::kInvalidArgument, "the body must be a JSON object"});
  std::string agent_name, workspace;
  for (auto it = body->begin(); it != body->end(); ++it) {
    if (it.key() != "agent_name" && it.key() != "workspace_path")
      return Fail(ex, {ErrorCode::kInvalidArgument, "unknown field \"" + log::Escape(it.key(), 64) +
                                                        "\" (agent_name, workspace_path)"});
    if (!it->is_string())
      return Fail(ex, {ErrorCode::kInvalidArgument, it.key() + " must be a string"});
    (it.key() == "agent_name" ? agent_name : workspace) = it->get<std::string>();
  }
  sessions_->Create(
      *user, params.at("id"), agent_name, workspace,
      [this, ex](Result<SessionManager::Created> created) {
        if (!created) return Fail(ex, created.error());
        const auto& s = created->session;
        json out = {{"session_id", s.session_id},
                    {"edge_ws_ticket", created->ticket},
                    {"status", s.status},
                    {"pinned_config_versions",
                     {{"limits", s.limits_version}, {"capabilities", s.capabilities_version}}}};
        http::RespondEchoingRequestId(ex, http::Response{.status = 201, .body = out.dump()});
      });
}

void OperatorApi::ListSessions(const std::shared_ptr<http::Exchange>& ex) {
  auto user = Authenticate(ex);
  if (!user) return;
  auto query = http::ParseQuery(ex->request().Query());
  if (!query) return Fail(ex, query.error());
  if (auto bad = query->FirstKeyOutside({"status", "node_id"}))
    return Fail(ex, {ErrorCode::kInvalidArgument, "unknown query parameter \"" + *bad + "\""});
  auto status = query->Unique("status");
  if (!status) return Fail(ex, status.error());
  auto node = query->Unique("node_id");
  if (!node) return Fail(ex, node.error());
  auto list = sessions_->List(*user, status->value_or(""), node->value_or(""));
  if (!list) return Fail(ex, list.error());
  json out = json::array();
  for (const auto& s : *list)
    out.push_back(SessionJson(s, false));
  http::RespondEchoingRequestId(
      ex, http::Response{.status = 200, .body = json{{"sessions", std::move(out)}}.dump()});
}

bool OperatorApi::OriginAllowed(const http::Request& req) const {
  auto origin = req.Header("Origin");
  if (!origin) return true;  // not a browser: the ticket alone authenticates
  auto host = req.Header("Host");
  if (host &&
      (*origin == "http://" + std::string(*host) || *origin == "https://" + std::string(*host)))
    return true;
  for (const auto& o : settings_.allowed_origins)
    if (*origin == o) return true;
  return false;
}

void OperatorApi::OpenStream(const std::shared_ptr<http::Exchange>& ex) {
  const auto& req = ex->request();
  auto refuse = [&](unsigned status, const char* code, const std::string& message) {
    Log()->info("GET /v1/edge/ws/stream from {}: {} {}", req.remote, status,
                log::Escape(message, 256));
    http::RespondEchoingRequestId(ex, http::JsonError(status, code, message));
  };
  if (auto st = http::CheckWebSocketUpgrade(req); !st)
    return refuse(400, "INVALID_ARGUMENT", st.error().message);
  if (!OriginAllowed(req))
    return refuse(403, "PERMISSION_DENIED",
                  "Origin \"" + log::Escape(*req.Header("Origin"), 128) +
                      "\" is neither this controller nor in http.allowed_origins");
  auto query = http::ParseQuery(req.Query());
  if (!query) return refuse(400, "INVALID_ARGUMENT", query.error().message);
  if (auto bad = query->FirstKeyOutside({"ticket", "session_id", "last_seq"}))
    return refuse(400, "INVALID_ARGUMENT", "unknown query parameter \"" + *bad + "\"");
  auto ticket = query->Unique("ticket");
  auto session = query->Unique("session_id");
  auto last = query->Unique("last_seq");
  if (!ticket || !session || !last)
    return refuse(400, "INVALID_ARGUMENT",
                  (!ticket    ? ticket.error()
                   : !session ? session.error()
                              : last.error())
                      .message);
  if (!*ticket) return refuse(401, "UNAUTHENTICATED", "the ticket query parameter is required");
  if (!*session)
    return refuse(400, "INVALID_ARGUMENT", "the session_id query parameter is required");
  std::optional<uint64_t> last_seq;
  if (*last) {
    const std::string& t = **last;
    if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos)
      return refuse(400, "INVALID_ARGUMENT",
                    "last_seq \"" + log::Escape(t, 32) + "\" is not a number of 1 to 18 digits");
    last_seq = std::stoull(t);
  }
  auto grant = sessions_->AdmitSocket(**ticket, **session);
  if (!grant) {
    switch (grant.error().code) {
      case ErrorCode::kUnauthenticated:
        return refuse(401, "UNAUTHENTICATED", grant.error().message);
      case ErrorCode::kPermissionDenied:
        return refuse(403, "PERMISSION_DENIED", grant.error().message);
      case ErrorCode::kNotFound:
        return refuse(404, "NOT_FOUND", grant.error().message);
      case ErrorCode::kFailedPrecondition:
        return refuse(410, "GONE", grant.error().message);
      default:
        return refuse(500, "INTERNAL", grant.error().message);
    }
  }
  const std::string session_id = **session;
  auto bridge = std::make_shared<SocketBridge>(*sessions_, session_id);
  http::WebSocketOptions opts;
  auto limits = sessions_->SessionLimits(session_id);
  if (!limits) return refuse(410, "GONE", limits.error().message);
  opts.max_frame_size = static_cast<size_t>(limits->max_frame_size);
  opts.ping_interval = settings_.ws_ping_interval;
  opts.idle_timeout = settings_.ws_idle_timeout;
  opts.response_headers.emplace_back("X-Request-ID", http::RequestId(req));
  auto ws = ex->AcceptWebSocket(opts, bridge);
  if (!ws) {
    Log()->warn("session {}: upgrade failed: {}", session_id, ws.error().ToString());
    return;
  }
  bridge->SetSocket(*ws);
  auto id = sessions_->AttachSocket(session_id, bridge, last_seq);
  if (!id) {
    (*ws)->Close(kCloseNormal, "session ended");
    return;
  }
  bridge->Attached(*id);
  Log()->info("session {}: socket {} of {} from {} (last_seq {})", session_id, *id,
              log::Escape(grant->user, 128), req.remote,
              last_seq ? std::to_string(*last_seq) : std::string("none"));
}

}  // namespace edge::controller
