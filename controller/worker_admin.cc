#include "controller/worker_admin.h"

#include "common/grpc_status.h"
#include "common/log.h"

namespace edge::controller {

namespace apb = edge::admin::v1;

grpc::ServerUnaryReactor* WorkerAdminImpl::ListWorkers(grpc::CallbackServerContext* ctx,
                                                       const apb::ListWorkersRequest*,
                                                       apb::ListWorkersResponse* resp) {
  auto* r = ctx->DefaultReactor();
  auto workers = fleet_.List();
  if (!workers) {
    r->Finish(ToGrpcStatus(workers.error()));
    return r;
  }
  for (const auto& v : *workers) {
    const auto& w = v.record;
    auto* out = resp->add_workers();
    out->set_worker_id(w.worker_id);
    out->set_state(v.state);
    out->set_reported_status(w.status);
    out->set_hostname(w.hostname);
    out->set_rpc_url(w.rpc_url);
    out->set_preview_domain(w.preview_domain);
    out->set_max_sandboxes(w.max_sandboxes);
    out->set_max_sandboxes_per_owner(w.max_sandboxes_per_owner);
    for (const auto& [json_text, field] :
         {std::pair{&w.providers_json, out->mutable_providers()},
          std::pair{&w.capabilities_json, out->mutable_capabilities()}}) {
      auto list = nlohmann::json::parse(*json_text, nullptr, false);
      if (!list.is_array()) continue;
      for (const auto& s : list)
        if (s.is_string()) field->Add(s.get<std::string>());
    }
    out->set_last_heartbeat_epoch_ms(w.last_heartbeat_ms);
    out->set_first_seen_epoch_ms(w.first_seen_ms);
    out->set_heartbeats(w.heartbeats);
    out->set_remote_addr(w.remote_addr);
  }
  resp->set_heartbeat_interval_ms(fleet_.settings().heartbeat_interval.count());
  r->Finish(grpc::Status::OK);
  return r;
}

grpc::ServerUnaryReactor* WorkerAdminImpl::PrepareWorkerCall(
    grpc::CallbackServerContext* ctx, const apb::PrepareWorkerCallRequest* req,
    apb::PrepareWorkerCallResponse* resp) {
  auto* r = ctx->DefaultReactor();
  if (req->lease_ttl_ms() < 0) {
    r->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "lease_ttl_ms " + std::to_string(req->lease_ttl_ms()) +
                               ": must be 0 (worker.lease_ttl) or a positive number of ms"));
    return r;
  }
  auto plan = fleet_.PrepareCall(req->worker_id(), req->lease_resource(),
                                 std::chrono::milliseconds(req->lease_ttl_ms()));
  if (!plan) {
    r->Finish(ToGrpcStatus(plan.error()));
    return r;
  }
  resp->set_rpc_url(plan->rpc_url);
  resp->set_token(plan->token);
  resp->set_worker_state(plan->state);
  if (plan->lease) {
    auto j = WorkerFleet::LeaseJson(*plan->lease);
    auto* l = resp->mutable_lease();
    l->set_resource_id(plan->lease->resource_id);
    l->set_holder_id(plan->lease->holder_id);
    l->set_generation(plan->lease->generation);
    l->set_expires_at(j["expires_at"].get<std::string>());
    log::Get("worker_admin")
        ->info("operator acquired the lease on {} for worker {} (generation {})",
               log::Escape(plan->lease->resource_id, 128), plan->worker_id,
               plan->lease->generation);
  }
  r->Finish(grpc::Status::OK);
  return r;
}

grpc::ServerUnaryReactor* WorkerAdminImpl::ReleaseWorkerLease(
    grpc::CallbackServerContext* ctx, const apb::ReleaseWorkerLeaseRequest* req,
    apb::ReleaseWorkerLeaseResponse*) {
  auto* r = ctx->DefaultReactor();
  auto st = fleet_.ReleaseLease(req->resource_id(), req->worker_id());
  r->Finish(st ? grpc::Status::OK : ToGrpcStatus(st.error()));
  return r;
}

}  // namespace edge::controller
