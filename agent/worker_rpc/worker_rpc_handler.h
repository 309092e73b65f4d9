// WorkerRpcHandler: the worker RPC door (wire.md §4) — `GET /health` and `POST /rpc` — as an
// http::Handler over sandbox::ExecutorApi. It authenticates (WorkerAuthenticator), parses
// the envelope, maps each method to executor calls and maps the answers back; every rule
// (leases, paths, caps, deadlines, drain) is the executor's. Commands and file methods go
// through ExecutorApi::Invoke (their `done` answers the exchange); the synchronous sandbox
// calls run on the door's own small pool, never on the HTTP threads. The door keeps only
// cancel handles: a client that goes away from an exec cancels its command, and CancelAll
// (the service's Stop) cancels what is left.
//
// Methods: worker.spawn, destroy, status, exec, exec_stream (buffered, or NDJSON with
// `X-Worker-Stream: ndjson`), file_write, file_read, file_list, file_delete, file_move,
// file_chmod, file_stat, file_glob, logs, renew_lease, shutdown; worker.heartbeat is
// answered 400 (it is sent to the control plane, not served).
//
// Token scopes (the contract's worker:* list): a signed token that lists scopes may call only
// the methods they grant — spawn: worker:spawn; destroy and shutdown (draining the worker):
// worker:destroy; status: worker:status; exec, exec_stream: worker:exec; file_*:
// worker:files; logs: worker:logs; renew_lease: worker:lease. Other scopes in the list grant
// nothing. A token that lists none, and the static tokens, are not restricted. Refused: 403
// naming the method, the scope it needs and the token's scopes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "agent/identity/worker_authenticator.h"
#include "agent/worker_rpc/rpc_envelope.h"
#include "common/clock.h"
#include "http/message.h"
#include "sandbox/cancel.h"
#include "sandbox/executor_api.h"

namespace edge::workerrpc {

struct WorkerRpcOptions {
  std::string worker_id;
  // The largest file_read answer (its base64 content) the door sends; 0 = no limit.
  uint64_t max_result_bytes = 64ull << 20;
  // The door's concurrency cap (worker.max_concurrent): commands (exec, exec_stream, file_*)
  // running at once through /rpc; past it the executor refuses with RESOURCE_EXHAUSTED → 429.
  // 0 = only the executor-wide caps.
  size_t max_concurrent = 0;
  // How worker.renew_lease asks the control plane for the renewed lease; unset = the
  // control plane is not configured and renew_lease fails with 409 after checking the lease.
  // Returns the renewed lease, or an error (its message is passed on).
  std::function<Result<sandbox::Lease>(const sandbox::Lease& presented, std::string_view ttl)>
      renew_upstream;
};

class WorkerRpcHandler final : public http::Handler {
 public:
  WorkerRpcHandler(sandbox::ExecutorApi& executor, const identity::WorkerAuthenticator& auth,
                   WorkerRpcOptions options);
  ~WorkerRpcHandler() override;

  void Handle(std::shared_ptr<http::Exchange> exchange) override;
  // Path, method and credential, from the headers alone: a caller without a valid credential
  // is answered before its body (up to worker.max_body_bytes) is read. Handle runs the same
  // Gate again for the request that passed (an HMAC and a look at the key files: a few
  // microseconds), rather than carry the result across the server.
  std::optional<http::Response> Screen(const http::Request& head) override;

  // Cancels every command this door started (reason is logged and put in their results).
  void CancelAll(const std::string& reason);
  // Commands and synchronous calls started and not yet answered.
  size_t in_flight() const { return in_flight_.load(); }

 private:
  struct Call;
  // The answer to a request that does not reach an envelope (a wrong path or method, a refused
  // credential: logged); nullopt for GET /health and for POST /rpc whose credential passed
  // (`auth` is then set).
  std::optional<http::Response> Gate(const http::Request& req, const http::Headers& headers,
                                     identity::AuthOk& auth) const;
  void HandleRpc(const std::shared_ptr<http::Exchange>& exchange, http::Headers headers,
                 std::vector<std::string> scopes);
  // Sends a call to its method: the synchronous sandbox calls below, a file tool, exec.
  void Dispatch(const std::shared_ptr<Call>& call);
  // The synchronous methods (run on the door's pool, never on an HTTP thread).
  Result<nlohmann::json> Spawn(const Call& call);
  Result<nlohmann::json> SandboxStatus(const Call& call);
  Result<nlohmann::json> Logs(const Call& call);
  Result<nlohmann::json> RenewLease(const Call& call);
  void RunSync(const std::shared_ptr<Call>& call, std::function<Result<nlohmann::json>()> work);
  // The worker.max_concurrent cap as the executor counts it (nullopt when unlimited).
  std::optional<sandbox::InvokeRequest::DoorLimit> DoorLimit() const;
  void RunTool(const std::shared_ptr<Call>& call, const std::string& tool, nlohmann::json args,
               std::function<nlohmann::json(nlohmann::json payload)> shape);
  void RunExec(const std::shared_ptr<Call>& call, bool stream, bool ndjson);
  // worker.destroy: asks on the pool, answers when the executor does (its commands ended).
  void Destroy(const std::shared_ptr<Call>& call);

  sandbox::ExecutorApi& executor_;
  const identity::WorkerAuthenticator& auth_;
  WorkerRpcOptions options_;
  boost::asio::thread_pool pool_{2};
  std::atomic<size_t> in_flight_{0};
  mutable std::mutex mu_;
  uint64_t next_ = 1;
  std::map<uint64_t, sandbox::CancelSource> running_;
};

}  // namespace edge::workerrpc
