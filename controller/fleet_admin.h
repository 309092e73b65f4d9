// The FleetAdmin service on the admin socket (proto/fleet_admin.proto): operator node tags
// and fleet commands, a thin translation of EdgeFleet (tags) and FleetCommands (which hold
// the rules); errors map with ToGrpcStatus. FleetInvoke is a server-streaming reactor that
// observes every part's command through the Dispatcher (one observer per part, each event
// tagged with its node id; one write in flight) and ends once every part has its result.
// Whoever reaches the admin socket is the operator: any tenant's nodes, any tool (the REST
// extension's http.denied_tools does not apply here). Borrows everything.
#pragma once

#include "controller/dispatcher.h"
#include "controller/edge_fleet.h"
#include "controller/fleet_commands.h"
#include "fleet_admin.grpc.pb.h"

namespace edge::controller {

class FleetAdminImpl final : public edge::admin::v1::FleetAdmin::CallbackService {
 public:
  FleetAdminImpl(EdgeFleet& fleet, FleetCommands& commands, Dispatcher& dispatcher)
      : fleet_(fleet), commands_(commands), dispatcher_(dispatcher) {}

  grpc::ServerUnaryReactor* GetNodeTags(grpc::CallbackServerContext* ctx,
                                        const edge::admin::v1::GetNodeTagsRequest* req,
                                        edge::admin::v1::NodeTagsResponse* resp) override;
  grpc::ServerUnaryReactor* UpdateNodeTags(grpc::CallbackServerContext* ctx,
                                           const edge::admin::v1::UpdateNodeTagsRequest* req,
                                           edge::admin::v1::NodeTagsResponse* resp) override;
  grpc::ServerWriteReactor<edge::admin::v1::FleetInvokeEvent>* FleetInvoke(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::FleetInvokeRequest* req) override;
  grpc::ServerUnaryReactor* GetFleetCommand(grpc::CallbackServerContext* ctx,
                                            const edge::admin::v1::GetFleetCommandRequest* req,
                                            edge::admin::v1::FleetCommandInfo* resp) override;
  grpc::ServerUnaryReactor* ListFleetCommands(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::ListFleetCommandsRequest* req,
      edge::admin::v1::ListFleetCommandsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelFleetCommand(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::CancelFleetCommandRequest* req,
      edge::admin::v1::CancelFleetCommandResponse* resp) override;

  // The proto of a fleet command and of one part (shared with tests).
  static void FillFleet(const FleetCommandView& view, edge::admin::v1::FleetCommandInfo* out);
  static void FillPart(const FleetPartView& part, edge::admin::v1::FleetPart* out);

 private:
  EdgeFleet& fleet_;
  FleetCommands& commands_;
  Dispatcher& dispatcher_;  // the FleetInvoke stream's subscriptions
};

}  // namespace edge::controller
