#include "agent/worker_rpc/control_plane_client.h"

#include <cctype>
#include <charconv>

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

Result<ControlPlaneUrl> ParseControlPlaneUrl(std::string_view url) {
  auto bad = [&](std::string why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "worker.control_plane_url \"" + std::string(url) + "\": " + why);
  };
  ControlPlaneUrl u;
  std::string_view rest;
  if (url.starts_with("https://")) {
    u.tls = true;
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else {
    return bad("must start with http:// or https://");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (path.ends_with('/'))
      path.remove_suffix(1);
    u.base_path = std::string(path);
  }
  u.port = u.tls ? 443 : 80;
  std::string_view host = authority;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unbalanced [ in the host");
    host = authority.substr(1, close - 1);
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() != ':') return bad("junk after the host");
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    authority = authority.substr(colon);
  } else {
    authority = {};
  }
  if (authority.starts_with(':')) {
    std::string_view p = authority.substr(1);
    unsigned v = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc() || end != p.data() + p.size() || v == 0 || v > 65535) {
      return bad("the port must be 1-65535");
    }
    u.port = static_cast<uint16_t>(v);
  }
  if (host.empty()) return bad("no host");
  u.host = std::string(host);
  return u;
}

ControlPlaneClient::ControlPlaneClient(ControlPlaneUrl url, std::string worker_id,
                                       const config::WorkerAuth& auth, Clock& clock,
                                       std::chrono::milliseconds timeout)
    : url_(std::move(url)),
      worker_id_(std::move(worker_id)),
      clock_(clock),
      timeout_(timeout),
      shared_(auth.worker_token, auth.worker_token_file),
      signing_key_(auth.worker_signing_key, auth.worker_signing_key_file) {
  if (auto it = auth.worker_tokens.find(worker_id_); it != auth.worker_tokens.end()) {
    per_worker_ = it->second;
  }
}

Result<std::string> ControlPlaneClient::Token() const {
  if (per_worker_) return *per_worker_;
  if (shared_.configured()) return shared_.Get();
  if (signing_key_.configured()) {
    auto claims =
        identity::WorkerToken::NewClaims(worker_id_, std::chrono::minutes(5), clock_.Now(),
                                         std::string(identity::kWorkerControlPlaneAudience));
    return identity::WorkerToken::Issue(claims, signing_key_.Get());
  }
  return MakeError(ErrorCode::kUnauthenticated,
                   "no worker credential for the control plane (worker.auth)");
}

Result<json> ControlPlaneClient::Post(const std::string& path, const json& body) {
  auto token = Token();
  if (!token) return std::unexpected(token.error());
  http::ClientOptions o;
  o.timeout = timeout_;
  if (url_.tls) o.tls = http::ClientTls{.server_name = url_.host};
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
