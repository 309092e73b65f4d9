#include "agent/worker_rpc/worker_rpc_handler.h"

#include <algorithm>
#include <array>
#include <iterator>

#include <boost/asio/post.hpp>

#include "agent/identity/worker_token.h"
#include "common/json_parse.h"
#include "common/log.h"
#include "common/utf8.h"
#include "sandbox/tool_registry.h"

namespace edge::workerrpc {
namespace {

using nlohmann::json;

constexpr size_t kMaxRequestIdBytes = 128;
constexpr int64_t kMaxLogLines = 10'000;
// NDJSON bytes that may wait for the socket before the process's output is no longer read.
constexpr size_t kStreamWindowBytes = 1 << 20;

std::string Dump(const json& j) {
  return DumpJson(j);  // j.dump(-1, ' ', false, replace), faster on long strings
}

std::shared_ptr<spdlog::logger> Log() {
  return log::Get("worker_rpc");
}

// A request id fit to echo: printable ASCII without spaces, at most 128 bytes.
bool UsableRequestId(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdBytes) return false;
  for (unsigned char c : id) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

std::unexpected<Error> Bad(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message));
}

Result<std::string> Str(const json& p, const char* key, bool required) {
  auto it = p.find(key);
  if (it == p.end() || it->is_null()) {
    if (required) return Bad(std::string("params.") + key + " is required");
    return std::string();
  }
  if (!it->is_string()) {
    return Bad(std::string("params.") + key + " must be a string, got " + it->type_name());
  }
  if (required && it->get_ref<const std::string&>().empty()) {
    return Bad(std::string("params.") + key + " must not be empty");
  }
  return it->get<std::string>();
}

// Moves the keys of `params` named in `keys` (present and not null) into an args object,
// renaming where the executor's name differs (wire → tool). Moved, not copied: a file's
// content can be hundreds of MB. What is left in `params` of those keys is null.
json Pick(json& params, const std::vector<std::pair<const char*, const char*>>& keys) {
  json out = json::object();
  for (const auto& [wire, tool] : keys) {
    auto it = params.find(wire);
    if (it != params.end() && !it->is_null()) out[tool] = std::move(*it);
  }
  return out;
}

json SandboxJson(const sandbox::SandboxInfo& s, const std::string& worker_id) {
  json meta = json::object();
  for (const auto& [k, v] : s.metadata)
    meta[k] = v;
  return {{"sandbox_id", s.id},
          {"runtime_id", s.runtime_id},
          {"state", sandbox::SandboxStateName(s.state)},
          {"provider", s.provider},
          {"worker_id", worker_id},
          {"metadata", std::move(meta)}};
}

}  // namespace

struct WorkerRpcHandler::Call {
  std::shared_ptr<http::Exchange> exchange;
  http::Headers headers;  // added to every answer (X-Request-ID)
  RpcRequest request;
  std::string request_id;
  std::string worker_id;

  // A string of 8 MiB or more in the answer (file_read's content) is written from where it
  // is, between the pieces of the envelope around it (DumpJsonPieces), not copied into it.
  void Send(unsigned status, json body) const {
    Log()->info("rpc {} id={} request_id={} -> {}", log::Escape(request.method, 64),
                log::Escape(request.id, 64), request_id.empty() ? "-" : request_id, status);
    auto pieces = DumpJsonPieces(std::move(body));
    http::Response r{.status = status, .headers = headers, .body = std::move(pieces[0])};
    r.more_body.assign(std::make_move_iterator(pieces.begin() + 1),
                       std::make_move_iterator(pieces.end()));
    exchange->Respond(std::move(r));
  }
  void Ok(json result) const {
    Send(200, ResultEnvelope(request.id, worker_id, std::move(result)));
  }
  void Fail(const Error& e) const {
    Send(HttpStatus(e.code), ErrorEnvelope(request.id, worker_id, e));
  }
};

WorkerRpcHandler::WorkerRpcHandler(sandbox::ExecutorApi& executor,
                                   const identity::WorkerAuthenticator& auth,
                                   WorkerRpcOptions options)
    : executor_(executor), auth_(auth), options_(std::move(options)) {}

WorkerRpcHandler::~WorkerRpcHandler() {
  CancelAll("the worker RPC door is stopping");
  pool_.join();
}

void WorkerRpcHandler::CancelAll(const std::string& reason) {
  std::map<uint64_t, sandbox::CancelSource> all;
  {
    std::lock_guard lock(mu_);
    all = running_;
  }
  for (auto& [id, source] : all)
    source.Cancel(reason);
}

namespace {

// X-Request-ID, when usable, to echo on every answer.
http::Headers EchoHeaders(const http::Request& req) {
  http::Headers headers;
  if (auto rid = req.Header("X-Request-ID"); rid && UsableRequestId(*rid)) {
    headers.emplace_back("X-Request-ID", std::string(*rid));
  }
  return headers;
}

}  // namespace

std::optional<http::Response> WorkerRpcHandler::Gate(const http::Request& req,
                                                     const http::Headers& headers,
                                                     identity::AuthOk& auth) const {
  auto plain = [&](unsigned status, std::string_view code, std::string message,
                   http::Headers extra = {}) {
    http::Headers h = headers;
    h.insert(h.end(), extra.begin(), extra.end());
    return http::Response{.status = status,
                          .headers = std::move(h),
                          .body = Dump({{"code", code}, {"message", std::move(message)}})};
  };
  const std::string_view path = req.Path();
  if (path == "/health") {
    if (req.method != "GET") {
      return plain(405, "METHOD_NOT_ALLOWED", "use GET for /health", {{"Allow", "GET"}});
    }
    return std::nullopt;
  }
  if (path != "/rpc") return plain(404, "NOT_FOUND", "no such path (use POST /rpc)");
  if (req.method != "POST") {
    return plain(405, "METHOD_NOT_ALLOWED", "use POST for /rpc", {{"Allow", "POST"}});
  }
  auto ok = auth_.Authenticate([&req](std::string_view name) { return req.Header(name); },
                               identity::kWorkerRpcAudience);
  if (!ok) {
    Log()->warn("rpc refused from {} request_id={}: {}", req.remote,
                headers.empty() ? "-" : headers[0].second, ok.error().message);
    return plain(ok.error().status, ok.error().status == 401 ? "UNAUTHORIZED" : "FORBIDDEN",
                 ok.error().message);
  }
  auth = std::move(*ok);
  return std::nullopt;
}

std::optional<http::Response> WorkerRpcHandler::Screen(const http::Request& head) {
  identity::AuthOk auth;
  return Gate(head, EchoHeaders(head), auth);
}

void WorkerRpcHandler::Handle(std::shared_ptr<http::Exchange> exchange) {
  const auto& req = exchange->request();
  http::Headers headers = EchoHeaders(req);
  identity::AuthOk auth;
  if (auto refusal = Gate(req, headers, auth)) return exchange->Respond(std::move(*refusal));
  if (req.Path() == "/health") {
    exchange->Respond({.status = 200,
                       .headers = headers,
                       .body = Dump({{"status", executor_.spawns_draining() ? "draining" : "ok"},
                                     {"worker_id", options_.worker_id}})});
    return;
  }
  HandleRpc(exchange, std::move(headers), std::move(auth.scopes));
}

namespace {

// The token scope a method needs (the header's table); "" for a method with none (an unknown
// one, refused later as such).
std::string_view RequiredScope(std::string_view method) {
  if (method == "worker.spawn") return "worker:spawn";
  if (method == "worker.destroy" || method == "worker.shutdown") return "worker:destroy";
  if (method == "worker.status") return "worker:status";
  if (method == "worker.exec" || method == "worker.exec_stream") return "worker:exec";
  if (method.starts_with("worker.file_")) return "worker:files";
  if (method == "worker.logs") return "worker:logs";
  if (method == "worker.renew_lease") return "worker:lease";
  return "";
}

}  // namespace

void WorkerRpcHandler::HandleRpc(const std::shared_ptr<http::Exchange>& exchange,
                                 http::Headers headers, std::vector<std::string> scopes) {
  auto call = std::make_shared<Call>();
  call->exchange = exchange;
  call->headers = std::move(headers);
  if (!call->headers.empty()) call->request_id = call->headers[0].second;
  call->worker_id = options_.worker_id;
  auto parsed = ParseRpcRequestInPlace(exchange->TakeBody());
  if (!parsed) {
    Log()->info("rpc bad request request_id={}: {}",
                call->request_id.empty() ? "-" : call->request_id, parsed.error().message);
    http::Response r{.status = 400,
                     .headers = call->headers,
                     .body = Dump({{"code", "BAD_REQUEST"}, {"message", parsed.error().message}})};
    exchange->Respond(std::move(r));
    return;
  }
  call->request = std::move(*parsed);
  if (!call->request.worker_id.empty() && call->request.worker_id != options_.worker_id) {
    return call->Send(
        403, ErrorEnvelope(call->request.id, options_.worker_id,
                           {ErrorCode::kPermissionDenied,
                            "request worker_id \"" + log::Escape(call->request.worker_id, 64) +
                                "\" is not this worker (\"" + options_.worker_id + "\")"}));
  }
  if (const auto need = RequiredScope(call->request.method);
      !scopes.empty() && !need.empty() &&
      std::find(scopes.begin(), scopes.end(), need) == scopes.end()) {
    std::string granted;
    for (const auto& sc : scopes)
      granted += (granted.empty() ? "" : ", ") + log::Escape(sc, 64);
    return call->Send(
        403, ErrorEnvelope(call->request.id, options_.worker_id,
                           {ErrorCode::kPermissionDenied,
                            call->request.method + " needs the token scope " + std::string(need) +
                                "; this token's scopes are [" + granted + "]"}));
  }
  Dispatch(call);
}

void WorkerRpcHandler::RunSync(const std::shared_ptr<Call>& call,
                               std::function<Result<json>()> work) {
  ++in_flight_;
  boost::asio::post(pool_, [this, call, work = std::move(work)] {
    Result<json> r = [&]() -> Result<json> {
      try {
        return work();
      } catch (const std::exception& e) {
        return MakeError(ErrorCode::kInternal, std::string("internal error: ") + e.what());
      }
    }();
    if (r) {
      call->Ok(std::move(*r));
    } else {
      call->Fail(r.error());
    }
    --in_flight_;
  });
}

std::optional<sandbox::InvokeRequest::DoorLimit> WorkerRpcHandler::DoorLimit() const {
  if (options_.max_concurrent == 0) return std::nullopt;
  return sandbox::InvokeRequest::DoorLimit{
      .door = "worker", .key = "worker.max_concurrent", .max_concurrent = options_.max_concurrent};
}

void WorkerRpcHandler::RunTool(const std::shared_ptr<Call>& call, const std::string& tool,
                               json args, std::function<json(json payload)> shape) {
  auto sandbox_id = Str(call->request.params, "sandbox_id", true);
  if (!sandbox_id) return call->Fail(sandbox_id.error());
  sandbox::InvokeRequest req;
  req.tool = tool;
  req.args = std::move(args);
  req.sandbox_id = *sandbox_id;
  req.lease = call->request.lease;
  req.max_result_bytes = options_.max_result_bytes;
  req.door_limit = DoorLimit();
  sandbox::CancelSource source;
  uint64_t key;
  {
    std::lock_guard lock(mu_);
    key = next_++;
    running_.emplace(key, source);
  }
  ++in_flight_;
  // As exec: a client that goes away cancels the file method (a recursive delete, a glob's or
  // a search's walk stop at their next check; a write not yet renamed into place leaves nothing).
  call->exchange->OnClientGone([source]() mutable { source.Cancel("the client disconnected"); });
  executor_.Invoke(
      std::move(req), source.token(), nullptr,
      [this, call, key, shape = std::move(shape), sid = *sandbox_id](sandbox::InvokeResult r) {
        {
          std::lock_guard lock(mu_);
          running_.erase(key);
        }
        if (r.outcome == sandbox::Outcome::kOk) {
          json out = shape(std::move(r.payload));
          out["sandbox_id"] = sid;
          call->Ok(std::move(out));
        } else {
          call->Fail(r.error);
        }
        --in_flight_;
      });
}

void WorkerRpcHandler::RunExec(const std::shared_ptr<Call>& call, bool stream, bool ndjson) {
  const json& p = call->request.params;
  auto sandbox_id = Str(p, "sandbox_id", true);
  if (!sandbox_id) return call->Fail(sandbox_id.error());
  sandbox::InvokeRequest req;
  req.tool = "exec";
  req.args = Pick(call->request.params, {{"command", "command"},
                                         {"args", "args"},
                                         {"mode", "mode"},
                                         {"workdir", "cwd"},
                                         {"env", "env"},
                                         {"stdin", "stdin"},
                                         {"timeout", "timeout"}});
  req.sandbox_id = *sandbox_id;
  req.lease = call->request.lease;
  req.collect_output = !stream;
  if (stream) {
    // One NDJSON line per chunk of up to 1 MiB (the streaming output policy).
    req.output_window_bytes = sandbox::kStreamingOutputWindowBytes;
    req.output_linger = sandbox::kStreamingOutputLinger;
  }
  req.door_limit = DoorLimit();
  sandbox::CancelSource source;
  uint64_t key;
  {
    std::lock_guard lock(mu_);
    key = next_++;
    running_.emplace(key, source);
  }
  ++in_flight_;
  // A client that goes away cancels its command (its process group is killed).
  call->exchange->OnClientGone([source]() mutable { source.Cancel("the client disconnected"); });

  struct StreamState {
    std::mutex mu;
    json chunks = json::array();  // buffered exec_stream
    bool begun = false;           // NDJSON: the 200 and its headers went out
    size_t unwritten = 0;         // NDJSON bytes handed to the connection, not yet written
    // Per stream (stdout, stderr): the start of a character that the end of its last chunk
    // cut off (Utf8IncompleteTail), put in front of its next chunk, or sent alone when the
    // command ends: a character split across two reads arrives whole, as text, instead of
    // making both chunks bytes that are not UTF-8 (U+FFFD in `data`, and `data_base64`).
    std::array<std::string, 2> carry;
  };
  auto state = std::make_shared<StreamState>();
  const std::string sid = *sandbox_id;
  auto line = [call](json body) { return Dump(body) + "\n"; };
  // A chunk as the answer carries it: {stream, data}, with data_base64 beside a `data` made
  // valid when the bytes are not UTF-8 text.
  auto entry = [](sandbox::OutputStream s, const std::string& data) {
    json c = json::object();
    c["stream"] = sandbox::OutputStreamName(s);
    sandbox::PutBytes(c, "data", data);
    return c;
  };
  // Its NDJSON line: straight into a string when it is text, else through json.
  auto chunk_line = [call, line, entry](sandbox::OutputStream s, const std::string& data) {
    if (auto fast = NdjsonChunkLine(call->request.id, call->worker_id, sandbox::OutputStreamName(s),
                                    data)) {
      return std::move(*fast);
    }
    return line(ResultEnvelope(call->request.id, call->worker_id, entry(s, data)));
  };

  sandbox::ChunkSink sink;
  if (stream) {
    sink = [call, state, ndjson, entry, chunk_line](sandbox::OutputChunk chunk,
                                                    std::function<void()> ack) {
      {
        std::lock_guard lock(state->mu);
        std::string& carry = state->carry[chunk.stream == sandbox::OutputStream::kStdout ? 0 : 1];
        if (!carry.empty()) {
          chunk.data.insert(0, carry);
          carry.clear();
        }
        const size_t cut = Utf8IncompleteTail(chunk.data);
        carry.assign(chunk.data, chunk.data.size() - cut, cut);
        chunk.data.resize(chunk.data.size() - cut);
      }
      if (chunk.data.empty()) {  // all of it waits for the rest of its character
        ack();
        return;
      }
      if (!ndjson) {
        json c = entry(chunk.stream, chunk.data);
        {
          std::lock_guard lock(state->mu);
          state->chunks.push_back(std::move(c));
        }
        ack();
        return;
      }
      {
        std::lock_guard lock(state->mu);
        if (!state->begun) {
          state->begun = true;
          http::Headers h = call->headers;
          h.emplace_back("X-Worker-Stream", "ndjson");
          call->exchange->BeginStream(200, std::move(h), "application/x-ndjson");
        }
      }
      // Back-pressure with a small window: the next chunk is read from the process at once
      // while less than kStreamWindowBytes wait for the socket, else when this one is written.
      std::string text = chunk_line(chunk.stream, chunk.data);
      const size_t n = text.size();
      bool ack_now;
      {
        std::lock_guard lock(state->mu);
        state->unwritten += n;
        ack_now = state->unwritten <= kStreamWindowBytes;
      }
      auto later = ack_now ? std::function<void()>() : std::move(ack);
      call->exchange->WriteChunk(std::move(text), [state, n, later = std::move(later)](bool) {
        {
          std::lock_guard lock(state->mu);
          state->unwritten -= n;
        }
        if (later) later();
      });
      if (ack_now) ack();
    };
  }

  executor_.Invoke(
      std::move(req), source.token(), std::move(sink),
      [this, call, key, state, stream, ndjson, sid, line, entry,
       chunk_line](sandbox::InvokeResult r) {
        {
          std::lock_guard lock(mu_);
          running_.erase(key);
        }
        const bool ok = r.outcome == sandbox::Outcome::kOk;
        bool begun;
        std::array<std::string, 2> carry;  // what the last chunks held back, sent now
        {
          std::lock_guard lock(state->mu);
          begun = state->begun;
          carry = std::move(state->carry);
        }
        const bool held = !carry[0].empty() || !carry[1].empty();
        constexpr sandbox::OutputStream kStreams[] = {sandbox::OutputStream::kStdout,
                                                      sandbox::OutputStream::kStderr};
        if (ndjson && (begun || ok || held)) {
          if (!begun) {
            http::Headers h = call->headers;
            h.emplace_back("X-Worker-Stream", "ndjson");
            call->exchange->BeginStream(200, std::move(h), "application/x-ndjson");
          }
          for (int i = 0; i < 2; ++i) {
            if (!carry[i].empty())
              call->exchange->WriteChunk(chunk_line(kStreams[i], carry[i]), nullptr);
          }
          // The last line: the exit code, or the error that ended the command.
          json last = ok ? ResultEnvelope(call->request.id, call->worker_id,
                                          {{"exit_code", r.exit_code}, {"done", true}})
                         : ErrorEnvelope(call->request.id, call->worker_id, r.error);
          Log()->info("rpc {} id={} request_id={} -> stream {}", call->request.method,
                      log::Escape(call->request.id, 64),
                      call->request_id.empty() ? "-" : call->request_id,
                      sandbox::OutcomeName(r.outcome));
          call->exchange->WriteChunk(line(std::move(last)), nullptr);
          call->exchange->EndStream();
        } else if (!ok) {
          call->Fail(r.error);
        } else if (stream) {
          json chunks;
          {
            std::lock_guard lock(state->mu);
            chunks = std::move(state->chunks);
          }
          for (int i = 0; i < 2; ++i) {
            if (!carry[i].empty()) chunks.push_back(entry(kStreams[i], carry[i]));
          }
          call->Ok(
              {{"sandbox_id", sid}, {"exit_code", r.exit_code}, {"chunks", std::move(chunks)}});
        } else {
          json out = {{"sandbox_id", sid}, {"exit_code", r.exit_code}};
          for (const char* k : {"stdout", "stderr", "stdout_base64", "stderr_base64",
                                "output_truncated", "signal"}) {
            if (auto it = r.payload.find(k); it != r.payload.end()) out[k] = *it;
          }
          out["stdout"] = out.value("stdout", "");
          out["stderr"] = out.value("stderr", "");
          call->Ok(std::move(out));
        }
        --in_flight_;
      });
}

Result<json> WorkerRpcHandler::Spawn(const Call& call) {
  const json& p = call.request.params;
  sandbox::SpawnRequest s;
  auto id = Str(p, "sandbox_id", true);
  if (!id) return std::unexpected(id.error());
  s.id = *id;
  auto provider = Str(p, "provider", false);
  if (!provider) return std::unexpected(provider.error());
  s.provider = *provider;
  auto owner = Str(p, "owner_id", false);
  if (!owner) return std::unexpected(owner.error());
  s.owner = *owner;
  for (const char* k : {"image"}) {
    if (auto v = Str(p, k, false); !v) return std::unexpected(v.error());
  }
  for (const char* k : {"memory_mb", "vcpus"}) {
    auto it = p.find(k);
    if (it != p.end() && !it->is_null() && !it->is_number_integer()) {
      return Bad(std::string("params.") + k + " must be an integer, got " + it->type_name());
    }
  }
  if (auto it = p.find("ttl"); it != p.end() && !it->is_null()) {
    auto ttl = sandbox::ParseDurationArg(*it, "params.ttl");
    if (!ttl) return std::unexpected(ttl.error());
    // Rounded up to whole seconds (the registry keeps seconds): a positive ttl under a second
    // is one second, never 0, which means "no ttl".
    s.ttl = std::chrono::ceil<std::chrono::seconds>(*ttl);
  }
  if (auto it = p.find("metadata"); it != p.end() && !it->is_null()) {
    if (!it->is_object()) {
      return Bad(std::string("params.metadata must be an object of strings, got ") +
                 it->type_name());
    }
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) return Bad("params.metadata." + k + " must be a string");
      s.metadata[k] = v.get<std::string>();
    }
  }
  const sandbox::Lease* lease = call.request.lease ? &*call.request.lease : nullptr;
  auto info = executor_.Spawn(s, lease);
  if (!info) return std::unexpected(info.error());
  return SandboxJson(*info, options_.worker_id);
}

void WorkerRpcHandler::Destroy(const std::shared_ptr<Call>& call) {
  auto id = Str(call->request.params, "sandbox_id", true);
  if (!id) return call->Fail(id.error());
  // The lease check and the registry read are database work: on the pool, as the other
  // sandbox methods. The answer comes once the sandbox's commands have ended and its
  // workspace is gone; no thread of the door waits for that.
  ++in_flight_;
  boost::asio::post(pool_, [this, call, id = std::move(*id)] {
    const sandbox::Lease* lease = call->request.lease ? &*call->request.lease : nullptr;
    auto answered = std::make_shared<std::atomic<bool>>(false);
    auto answer = [this, call, answered](Result<json> r) {
      if (answered->exchange(true)) return;  // once, whichever way it ends
      if (r) {
        call->Ok(std::move(*r));
      } else {
        call->Fail(r.error());
      }
      --in_flight_;
    };
    try {  // as RunSync: a throw is an INTERNAL answer, never an unanswered call
      executor_.Destroy(id, lease, [this, answer](Result<sandbox::SandboxInfo> info) {
        if (!info) return answer(std::unexpected(info.error()));
        try {
          answer(SandboxJson(*info, options_.worker_id));
        } catch (const std::exception& e) {
          answer(MakeError(ErrorCode::kInternal, std::string("internal error: ") + e.what()));
        }
      });
    } catch (const std::exception& e) {
      answer(MakeError(ErrorCode::kInternal, std::string("internal error: ") + e.what()));
    }
  });
}

Result<json> WorkerRpcHandler::SandboxStatus(const Call& call) {
  auto id = Str(call.request.params, "sandbox_id", true);
  if (!id) return std::unexpected(id.error());
  auto info = executor_.Status(*id);
  if (!info) return std::unexpected(info.error());
  json out = SandboxJson(*info, options_.worker_id);
  out["error"] = "";
  return out;
}

Result<json> WorkerRpcHandler::Logs(const Call& call) {
  const json& p = call.request.params;
  auto id = Str(p, "sandbox_id", true);
  if (!id) return std::unexpected(id.error());
  int64_t n = 100;
  if (auto it = p.find("lines"); it != p.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxLogLines) {
      return Bad("params.lines must be an integer between 0 and " + std::to_string(kMaxLogLines));
    }
    n = it->get<int64_t>();
    if (n == 0) n = 100;
  }
  auto lines = executor_.Logs(*id, static_cast<size_t>(n));
  if (!lines) return std::unexpected(lines.error());
  json arr = json::array();
  for (const auto& l : *lines) {
    json holder = json::object();
    sandbox::PutBytes(holder, "l", l);
    arr.push_back(holder["l"]);
  }
  return json{{"sandbox_id", *id}, {"lines", std::move(arr)}};
}

Result<json> WorkerRpcHandler::RenewLease(const Call& call) {
  const json& p = call.request.params;
  auto rid = Str(p, "resource_id", false);
  if (!rid) return std::unexpected(rid.error());
  std::string ttl;
  if (auto it = p.find("ttl"); it != p.end() && !it->is_null()) {
    if (!it->is_string() && !it->is_number()) {
      return Bad(std::string("params.ttl must be a duration such as \"5m\", got ") +
                 it->type_name());
    }
    ttl = it->is_string() ? it->get<std::string>() : it->dump() + "s";
  }
  if (!call.request.lease) {
    return MakeError(ErrorCode::kLeaseRejected, "worker.renew_lease requires a lease");
  }
  sandbox::Lease presented = *call.request.lease;
  if (!rid->empty() && *rid != presented.resource_id) {
    return MakeError(ErrorCode::kLeaseRejected, "lease.resource_id \"" + presented.resource_id +
                                                    "\" does not match params.resource_id \"" +
                                                    *rid + "\"");
  }
  // The executor checks the presented lease (holder, expiry, generation, a current
  // lease to renew) before the control plane is asked.
  if (auto st = executor_.RenewLease(presented); !st) return std::unexpected(st.error());
  if (!options_.renew_upstream) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "the lease is valid but cannot be renewed: worker.control_plane_url is "
                     "not configured");
  }
  auto renewed = options_.renew_upstream(presented, ttl);
  if (!renewed) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "the control plane did not renew the lease: " + renewed.error().message);
  }
  auto recorded = executor_.RenewLease(*renewed);
  if (!recorded) return std::unexpected(recorded.error());
  return json{{"lease", LeaseToJson(*recorded)}};
}

namespace {

// The file methods: each one executor tool, its params renamed for the tool, and how its
// payload becomes the result.
struct FileMethod {
  const char* method;
  const char* tool;
  std::vector<std::pair<const char*, const char*>> params;  // wire name → tool argument
  bool size_only = false;                                   // file_write answers {path, size} only
};

const FileMethod* FindFileMethod(std::string_view method) {
  static const std::vector<FileMethod> kMethods = {
      {"worker.file_write",
       "file.write",
       {{"path", "path"}, {"content", "content"}, {"mode", "mode"}},
       true},
      {"worker.file_read",
       "file.read",
       {{"path", "path"}, {"offset", "offset"}, {"length", "length"}}},
      {"worker.file_list", "file.list", {{"path", "path"}}},
      {"worker.file_delete", "file.delete", {{"path", "path"}, {"recursive", "recursive"}}},
      {"worker.file_move", "file.move", {{"old_path", "old_path"}, {"new_path", "new_path"}}},
      {"worker.file_chmod", "file.chmod", {{"path", "path"}, {"mode", "mode"}}},
      {"worker.file_stat", "file.stat", {{"path", "path"}}},
      {"worker.file_glob", "file.glob", {{"pattern", "pattern"}}},
  };
  for (const auto& f : kMethods)
    if (method == f.method) return &f;
  return nullptr;
}

}  // namespace

void WorkerRpcHandler::Dispatch(const std::shared_ptr<Call>& call) {
  const std::string& m = call->request.method;
  using Sync = Result<json> (WorkerRpcHandler::*)(const Call&);
  static const std::map<std::string, Sync, std::less<>> kSync = {
      {"worker.spawn", &WorkerRpcHandler::Spawn},
      {"worker.status", &WorkerRpcHandler::SandboxStatus},
      {"worker.logs", &WorkerRpcHandler::Logs},
      {"worker.renew_lease", &WorkerRpcHandler::RenewLease},
  };
  if (auto it = kSync.find(m); it != kSync.end()) {
    return RunSync(call, [this, call, fn = it->second] { return (this->*fn)(*call); });
  }
  if (const FileMethod* f = FindFileMethod(m)) {
    std::function<json(json)> shape = [](json payload) { return payload; };
    if (f->size_only) {
      shape = [](json payload) {
        return json{{"path", payload.value("path", "")}, {"size", payload.value("size", 0)}};
      };
    }
    return RunTool(call, f->tool, Pick(call->request.params, f->params), std::move(shape));
  }
  if (m == "worker.destroy") return Destroy(call);
  if (m == "worker.exec") return RunExec(call, false, false);
  if (m == "worker.exec_stream") {
    auto mode = call->exchange->request().Header("X-Worker-Stream");
    bool ndjson = mode && (*mode == "ndjson" || *mode == "NDJSON");
    return RunExec(call, true, ndjson);
  }
  if (m == "worker.shutdown") {
    executor_.DrainSpawns();
    Log()->warn("worker.shutdown: draining (new spawns are refused, sandboxes keep working)");
    return call->Ok({{"worker_id", options_.worker_id}, {"status", "draining"}});
  }
  if (m == "worker.heartbeat") {
    return call->Fail({ErrorCode::kInvalidArgument,
                       "worker.heartbeat is sent by a worker to the control plane; this worker "
                       "does not serve it"});
  }
  call->Fail({ErrorCode::kInvalidArgument, "unknown worker method: " + log::Escape(m, 64)});
}

}  // namespace edge::workerrpc
