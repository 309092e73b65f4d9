// FleetCommands: one tool run on every node a selector matches, under one fleet command id
// (issue 12; seeds/000 "fleet cancel <fleet-command-id>", output "tagged with node_id"). The
// domain layer of the admin socket's FleetAdmin (`edge-controller fleet …`) and of the REST
// extension `/v1/edge/fleet/commands` (FleetApi): neither holds a rule of its own.
//
// Each part is an ordinary command of the Dispatcher — persisted before it is sent, listed by
// `edge-controller commands`, exactly one terminal result, the agent's outbox and the resend
// on reconnect unchanged. What this adds:
//   - who takes part: the nodes the selector (fleet_selector.h) matches that are live at
//     creation — a live edge stream, edge-enrolled, not revoked. Offline nodes are left out
//     (not failed parts): a fleet command is about the fleet as it is now, and a node that is
//     gone for good would otherwise fail every one of them. No live match is NOT_FOUND, and
//     nothing is stored. A tenant-scoped call (the REST API) sees only that tenant's nodes.
//   - the record: the fleet command (id, tenant, creator, selector, tool, args, deadline,
//     creation time) and its parts (node id + command id) are stored in one transaction with
//     the command ids minted up front, before any part is sent; then the parts' commands are
//     stored together in one more transaction (Dispatcher::InvokeMany: one wait for the disk,
//     not one per node) and each is sent. A part the dispatcher refuses (its node disconnected
//     in between, args too large for that node) keeps the refusal as its error.
//   - a part's state: `pending` (stored, not sent yet — or the controller stopped before it
//     was sent), `running` (sent, no result yet), then the command's outcome: `ok` (with the
//     tool's exit code), `error`, `timed_out`, `cancelled`. A refused part is `error` with the
//     refusal's code. `duration_ms` of an ended part runs from its dispatch to its result as
//     the controller saw them.
//   - cancel: a Cancel to every part that is still running (the others are left as they
//     are); the fleet command records when it was first cancelled.
// Borrows the Store, EdgeFleet, Dispatcher and clock; thread-safe (they are).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "controller/dispatcher.h"
#include "controller/edge_fleet.h"
#include "controller/store.h"

namespace edge::controller {

struct FleetInvokeSpec {
  std::string selector;
  std::string tool;
  std::string args_json;  // a JSON object ("" = {})
  std::string security_context;
  std::chrono::milliseconds deadline{0};  // each part's deadline on its node; 0 = the agent's
  std::string tenant_id;                  // "" = any tenant's nodes (the admin socket)
  std::string created_by;                 // who asked ("operator", a user)
};

// Part states (FleetPartView::state).
inline constexpr const char* kPartPending = "pending";
inline constexpr const char* kPartRunning = "running";

// A part as the operator sees it.
struct FleetPartView {
  std::string node_id;
  std::string command_id;  // "" when it never became a command (refused before it was stored)
  std::string state;       // pending, running, ok, error, timed_out, cancelled
  std::optional<int32_t> exit_code;    // ok parts: the tool's exit code
  std::optional<int64_t> duration_ms;  // ended parts
  std::string error_code;              // error (the code), timed_out, cancelled
  std::string error_message;
  // Ok parts whose node's output cap dropped output: OutputCapNote's message; "" otherwise.
  std::string output_cap_note;
};

struct FleetCommandView {
  FleetCommandRecord record;
  std::vector<FleetPartView> parts;  // ordered by node id
  // No part is pending or running.
  bool finished() const;
  // Every part ended ok with exit code 0.
  bool all_succeeded() const;
};

// What a fleet cancel did to one part.
struct FleetPartCancel {
  std::string node_id;
  std::string command_id;
  // "sent" (a Cancel went to the node), "ended" (the part had ended already, or never ran),
  // "not_delivered" (its node is not connected: the part goes on; cancel again later)
  std::string outcome;
  std::string message;
};

// Observing a fleet invoke as it runs (the admin FleetInvoke stream).
struct FleetHooks {
  // The fleet command and its parts are stored; no part has been sent yet.
  std::function<void(const FleetCommandRecord&)> planned;
  // The observer of one part's command, subscribed before it is sent (null = none).
  std::function<std::shared_ptr<CommandObserver>(const std::string& node_id)> observer;
};

class FleetCommands {
 public:
  FleetCommands(Store& store, EdgeFleet& fleet, Dispatcher& dispatcher, Clock& clock)
      : store_(store), fleet_(fleet), dispatcher_(dispatcher), clock_(clock) {}

  // INVALID_ARGUMENT: a bad selector (naming the term), no tool, args not a JSON object, a
  // negative deadline. NOT_FOUND: no live node matches (saying how many match but are not
  // live). Otherwise the stored fleet command with each part as it stands after sending.
  Result<FleetCommandView> Invoke(const FleetInvokeSpec& spec, const FleetHooks& hooks = {});
  // `tenant_id` "" = any; a fleet command created for another tenant (or on the admin socket,
  // when a tenant is given) is NOT_FOUND, as an unknown id is.
  Result<FleetCommandView> Get(const std::string& fleet_id, const std::string& tenant_id) const;
  // Newest first, at most `limit` (0 = 100); INVALID_ARGUMENT for a negative limit.
  Result<std::vector<FleetCommandView>> List(int limit) const;
  // A Cancel to every running part (see FleetPartCancel); NOT_FOUND as Get.
  Result<std::vector<FleetPartCancel>> Cancel(const std::string& fleet_id,
                                              const std::string& tenant_id,
                                              const std::string& reason);

  // A part's view from its record and its command (nullopt: no command row).
  static FleetPartView PartView(const FleetPartRecord& part,
                                const std::optional<CommandRecord>& command);

 private:
  Result<FleetCommandView> ViewOf(FleetCommandRecord record) const;

  Store& store_;
  EdgeFleet& fleet_;
  Dispatcher& dispatcher_;
  Clock& clock_;
};

}  // namespace edge::controller
