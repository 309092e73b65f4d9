// The WorkerAdmin service on the admin socket (proto/worker_admin.proto): the worker list and
// what `edge-controller worker call` / `sandbox …` need to call a worker (its rpc_url, a
// minted token, the lease). A thin translation of WorkerFleet; errors map with ToGrpcStatus.
// Whoever reaches the admin socket is the operator. Borrows the fleet.
#pragma once

#include "controller/worker_fleet.h"
#include "worker_admin.grpc.pb.h"

namespace edge::controller {

class WorkerAdminImpl final : public edge::admin::v1::WorkerAdmin::CallbackService {
 public:
  explicit WorkerAdminImpl(WorkerFleet& fleet) : fleet_(fleet) {}

  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* ctx,
                                        const edge::admin::v1::ListWorkersRequest* req,
                                        edge::admin::v1::ListWorkersResponse* resp) override;
  grpc::ServerUnaryReactor* PrepareWorkerCall(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::PrepareWorkerCallRequest* req,
      edge::admin::v1::PrepareWorkerCallResponse* resp) override;
  grpc::ServerUnaryReactor* ReleaseWorkerLease(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::ReleaseWorkerLeaseRequest* req,
      edge::admin::v1::ReleaseWorkerLeaseResponse* resp) override;

 private:
  WorkerFleet& fleet_;
};

}  // namespace edge::controller
