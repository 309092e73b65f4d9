#include "agent/worker_rpc/control_plane_client.h"

#include <cctype>

#include "agent/identity/worker_token.h"
#include "agent/worker_rpc/rpc_envelope.h"
#include "common/json_parse.h"
#include "http/client.h"

namespace edge::workerrpc {
namespace {

using nlohmann::json;

// Path segments from the wire (resource ids) are percent-encoded.
std::string Escape(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', hex[c >> 4], hex[c & 15]};
    }
  }
  return out;
}

}  // namespace

ControlPlaneClient::ControlPlaneClient(ControlPlaneUrl url, std::string worker_id,
                                       const config::WorkerAuth& auth, Clock& clock,
                                       std::chrono::milliseconds timeout,
                                       config::ClientTlsConfig tls)
    : url_(std::move(url)),
      worker_id_(std::move(worker_id)),
      timeout_(timeout),
      tls_(std::move(tls)),
      credentials_(auth, clock) {}

Result<std::string> ControlPlaneClient::Token() const {
  return credentials_.TokenFor(worker_id_, identity::kWorkerControlPlaneAudience,
                               std::chrono::minutes(5),
                               identity::WorkerCredentials::Prefer::kStatic);
}

Result<json> ControlPlaneClient::Post(const std::string& path, const json& body) {
  auto token = Token();
  if (!token) return std::unexpected(token.error());
  http::ClientOptions o;
  o.timeout = timeout_;
  if (url_.tls) {
    o.tls = http::ClientTls{.ca_file = tls_.ca_file,
                            .insecure_skip_verify = tls_.insecure_skip_verify,
                            .cert_file = tls_.cert_file,
                            .key_file = tls_.key_file,
                            .server_name = url_.host};
  }
  auto client = http::Client::Connect(url_.host, url_.port, o);
  if (!client) return std::unexpected(client.error());
  auto r = (*client)->Send({.method = "POST",
                            .target = url_.base_path + path,
                            .headers = {{"X-Worker-ID", worker_id_},
                                        {"X-Worker-Token", *token},
                                        {"Content-Type", "application/json"}},
                            .body = body.dump(-1, ' ', false, json::error_handler_t::replace),
                            .keep_alive = false});
  if (!r) return std::unexpected(r.error());
  auto j = ParseJsonBounded(r->body, "control plane answer");
  if (r->status < 200 || r->status > 299) {
    std::string msg = "control plane answered " + std::to_string(r->status);
    if (j && j->is_object()) {
      for (const char* k : {"error", "message"}) {
        if (auto it = j->find(k); it != j->end() && it->is_string()) {
          msg += ": " + it->get<std::string>().substr(0, 512);
          break;
        }
      }
    }
    return MakeError(r->status == 401 || r->status == 403 ? ErrorCode::kPermissionDenied
                     : r->status == 409                   ? ErrorCode::kFailedPrecondition
                                                          : ErrorCode::kUnavailable,
                     msg);
  }
  if (!j) return std::unexpected(j.error());
  return *j;
}

Result<sandbox::Lease> ControlPlaneClient::RenewLease(const sandbox::Lease& presented,
                                                      std::string_view ttl) {
  json body = {{"resource_id", presented.resource_id}, {"lease", LeaseToJson(presented)}};
  if (!ttl.empty()) body["ttl"] = ttl;
  auto answer = Post("/api/v1/worker/" + Escape(worker_id_) + "/leases/" +
                         Escape(presented.resource_id) + "/renew",
                     body);
  if (!answer) return std::unexpected(answer.error());
  const json& l = answer->contains("lease") ? (*answer)["lease"] : *answer;
  auto parsed = ParseRpcRequest(json{{"method", "renew"}, {"lease", l}}.dump());
  if (!parsed || !parsed->lease) {
    return MakeError(ErrorCode::kUnavailable,
                     "the control plane's renewed lease is malformed: " +
                         (parsed ? std::string("no lease") : parsed.error().message));
  }
  return *parsed->lease;
}

Result<json> ControlPlaneClient::Heartbeat(const json& body) {
  return Post("/api/v1/worker/" + Escape(worker_id_) + "/heartbeat", body);
}

}  // namespace edge::workerrpc
