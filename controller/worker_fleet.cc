#include "controller/worker_fleet.h"

#include "agent/identity/worker_token.h"
#include "common/log.h"
#include "common/rfc3339.h"
#include "config/duration.h"
#include "config/validate.h"
#include "http/url.h"

namespace edge::controller {
namespace {

using nlohmann::json;

Error Invalid(const std::string& field, const json& value, const std::string& why) {
  std::string shown = value.is_string() ? value.get<std::string>() : value.dump();
  if (shown.size() > 80) shown = shown.substr(0, 80) + "…";
  return {ErrorCode::kInvalidArgument, field + " " + log::Escape(shown, 100) + ": " + why};
}

// An optional string field of `obj` (absent or null = ""), at most `max` bytes.
Result<std::string> OptionalString(const json& obj, const char* key, const std::string& path,
                                   size_t max) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return std::unexpected(Invalid(path, *it, "must be a string"));
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > max) {
    return std::unexpected(Invalid(path, *it, "longer than " + std::to_string(max) + " bytes"));
  }
  return s;
}

Result<int64_t> OptionalCount(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return int64_t{0};
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1'000'000) {
    return std::unexpected(Invalid(path, *it, "must be an integer from 0 to 1000000"));
  }
  return it->get<int64_t>();
}

// An optional array of short strings, returned as its JSON text.
Result<std::string> OptionalStringList(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string("[]");
  if (!it->is_array() || it->size() > 256) {
    return std::unexpected(Invalid(path, *it, "must be an array of at most 256 strings"));
  }
  for (const auto& v : *it) {
    if (!v.is_string() || v.get_ref<const std::string&>().size() > 256) {
      return std::unexpected(Invalid(path, v, "must hold strings of at most 256 bytes"));
    }
  }
  return it->dump(-1, ' ', false, json::error_handler_t::replace);
}

// A resource id from the wire or the CLI: 1-256 printable bytes.
Status CheckResourceId(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 256;
  for (unsigned char c : id)
    ok = ok && c > 0x20 && c != 0x7f;
  if (ok) return OkStatus();
  return MakeError(
      ErrorCode::kInvalidArgument,
      "resource id \"" + log::Escape(id, 64) + "\" must be 1-256 printable bytes without spaces");
}

// "5m", "90s" or a number of seconds.
Result<std::chrono::milliseconds> ParseTtl(const json& v, const std::string& path) {
  if (v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() < 86400 * 365) {
    return std::chrono::seconds(v.get<int64_t>());
  }
  if (v.is_string()) {
    if (auto d = config::ParseDuration(v.get<std::string>()); d && d->count() > 0) return *d;
  }
  return std::unexpected(
      Invalid(path, v, "must be a duration (\"5m\", \"90s\") or a positive number of seconds"));
}

}  // namespace

WorkerFleet::WorkerFleet(Store& store, Clock& clock, WorkerFleetSettings settings,
                         const config::WorkerAuth& auth)
    : store_(store), clock_(clock), settings_(settings), credentials_(auth, clock) {}

int64_t WorkerFleet::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now().time_since_epoch())
      .count();
}

json WorkerFleet::LeaseJson(const LeaseRecord& l) {
  return {
      {"resource_id", l.resource_id},
      {"holder_id", l.holder_id},
      {"generation", l.generation},
      {"expires_at", FormatRfc3339(Clock::WallTime(std::chrono::milliseconds(l.expires_at_ms)))}};
}

Status WorkerFleet::RecordHeartbeat(const std::string& worker_id, const json& body,
                                    const std::string& remote) {
  if (!body.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("heartbeat body must be a JSON object, got ") + body.type_name());
  }
  WorkerRecord w{.worker_id = worker_id, .remote_addr = remote, .last_heartbeat_ms = NowMs()};
  auto hostname = OptionalString(body, "hostname", "hostname", 253);
  if (!hostname) return std::unexpected(hostname.error());
  w.hostname = *hostname;
  auto status = OptionalString(body, "status", "status", 32);
  if (!status) return std::unexpected(status.error());
  w.status = status->empty() ? kWorkerOnline : *status;
  if (w.status != kWorkerOnline && w.status != kWorkerDraining) {
    return std::unexpected(Invalid("status", body["status"], "must be online or draining"));
  }
  auto providers = OptionalStringList(body, "providers", "providers");
  if (!providers) return std::unexpected(providers.error());
  w.providers_json = *providers;
  auto caps = OptionalStringList(body, "capabilities", "capabilities");
  if (!caps) return std::unexpected(caps.error());
  w.capabilities_json = *caps;
  if (auto it = body.find("capacity"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return std::unexpected(Invalid("capacity", *it, "must be an object"));
    auto max = OptionalCount(*it, "max_sandboxes", "capacity.max_sandboxes");
    if (!max) return std::unexpected(max.error());
    auto per_owner =
        OptionalCount(*it, "max_sandboxes_per_owner", "capacity.max_sandboxes_per_owner");
    if (!per_owner) return std::unexpected(per_owner.error());
    auto preview = OptionalString(*it, "preview_domain", "capacity.preview_domain", 253);
    if (!preview) return std::unexpected(preview.error());
    auto url = OptionalString(*it, "rpc_url", "capacity.rpc_url", 2048);
    if (!url) return std::unexpected(url.error());
    if (!url->empty()) {
      if (auto parsed = http::ParseUrl(*url, "capacity.rpc_url"); !parsed) {
        return std::unexpected(parsed.error());
      }
    }
    w.max_sandboxes = *max;
    w.max_sandboxes_per_owner = *per_owner;
    w.preview_domain = *preview;
    w.rpc_url = *url;
  }
  return store_.RecordWorkerHeartbeat(w);
}

Result<std::chrono::milliseconds> WorkerFleet::CheckTtl(std::chrono::milliseconds ttl) const {
  if (ttl.count() == 0) return settings_.lease_ttl;
  if (ttl > settings_.max_lease_ttl) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "lease ttl " + config::FormatDuration(ttl) +
                         " is longer than worker.max_lease_ttl (" +
                         config::FormatDuration(settings_.max_lease_ttl) + ")");
  }
  return ttl;
}

Result<LeaseRecord> WorkerFleet::RenewForWorker(const std::string& worker_id,
                                                const std::string& resource_id, const json& body) {
  if (auto st = CheckResourceId(resource_id); !st) return std::unexpected(st.error());
  if (!body.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("renew body must be a JSON object, got ") + body.type_name());
  }
  if (auto it = body.find("resource_id"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || it->get_ref<const std::string&>() != resource_id) {
      return std::unexpected(
          Invalid("resource_id", *it, "must equal the resource in the path (" + resource_id + ")"));
    }
  }
  std::chrono::milliseconds ttl{0};
  if (auto it = body.find("ttl"); it != body.end() && !it->is_null() &&
                                  !(it->is_string() && it->get_ref<const std::string&>().empty())) {
    auto parsed = ParseTtl(*it, "ttl");
    if (!parsed) return std::unexpected(parsed.error());
    ttl = *parsed;
  }
  auto checked = CheckTtl(ttl);
  if (!checked) return std::unexpected(checked.error());
  auto it = body.find("lease");
  if (it == body.end() || !it->is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "lease: the presented lease object is required");
  }
  const json& lease = *it;
  auto holder = lease.find("holder_id");
  if (holder == lease.end() || !holder->is_string() ||
      holder->get_ref<const std::string&>() != worker_id) {
    return std::unexpected(Invalid("lease.holder_id", holder == lease.end() ? json() : *holder,
                                   "must be the renewing worker (" + worker_id + ")"));
  }
  auto res = lease.find("resource_id");
  if (res == lease.end() || !res->is_string() ||
      res->get_ref<const std::string&>() != resource_id) {
    return std::unexpected(Invalid("lease.resource_id", res == lease.end() ? json() : *res,
                                   "must be the resource in the path (" + resource_id + ")"));
  }
  auto gen = lease.find("generation");
  if (gen == lease.end() || !gen->is_number_integer() || gen->get<int64_t>() < 0) {
    return std::unexpected(Invalid("lease.generation", gen == lease.end() ? json() : *gen,
                                   "must be a non-negative integer"));
  }
  return store_.RenewLease(resource_id, worker_id, gen->get<int64_t>(), checked->count(), NowMs());
}

std::string WorkerFleet::StateOf(const WorkerRecord& w) const {
  if (NowMs() - w.last_heartbeat_ms > 2 * settings_.heartbeat_interval.count()) {
    return kWorkerStale;
  }
  return w.status;
}

Result<std::vector<WorkerView>> WorkerFleet::List() const {
  auto workers = store_.ListWorkers();
  if (!workers) return std::unexpected(workers.error());
  std::vector<WorkerView> out;
  out.reserve(workers->size());
  for (auto& w : *workers) {
    std::string state = StateOf(w);
    out.push_back({std::move(w), std::move(state)});
  }
  return out;
}

Result<WorkerCallPlan> WorkerFleet::PrepareCall(const std::string& worker_id,
                                                const std::string& lease_resource,
                                                std::chrono::milliseconds lease_ttl) {
  if (!config::IsValidNodeId(worker_id)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "worker id \"" + log::Escape(worker_id, 64) +
                         "\" is not a worker id ([A-Za-z0-9._-]{1,64})");
  }
  auto worker = store_.GetWorker(worker_id);
  if (!worker) return std::unexpected(worker.error());
  if (!*worker) {
    return MakeError(ErrorCode::kNotFound, "worker \"" + worker_id +
                                               "\" is unknown: it never sent a heartbeat to "
                                               "this controller (`edge-controller workers`)");
  }
  if ((*worker)->rpc_url.empty()) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "worker \"" + worker_id + "\" advertises no rpc_url in its heartbeat");
  }
  WorkerCallPlan plan{
      .worker_id = worker_id, .rpc_url = (*worker)->rpc_url, .state = StateOf(**worker)};
  auto token = credentials_.TokenFor(
      worker_id, identity::kWorkerRpcAudience,
      std::chrono::duration_cast<std::chrono::seconds>(settings_.call_token_ttl),
      identity::WorkerCredentials::Prefer::kSigned);
  if (!token) return std::unexpected(token.error());
  plan.token = std::move(*token);
  if (!lease_resource.empty()) {
    if (auto st = CheckResourceId(lease_resource); !st) return std::unexpected(st.error());
    auto ttl = CheckTtl(lease_ttl);
    if (!ttl) return std::unexpected(ttl.error());
    auto lease = store_.AcquireLease(lease_resource, worker_id, ttl->count(), NowMs());
    if (!lease) return std::unexpected(lease.error());
    plan.lease = *lease;
  }
  return plan;
}

Status WorkerFleet::ReleaseLease(const std::string& resource_id, const std::string& worker_id) {
  return store_.ReleaseLease(resource_id, worker_id, NowMs());
}

}  // namespace edge::controller
