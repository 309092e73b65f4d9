// EdgeFleet: the operator's operations on the edge fleet as plain calls over the controller's
// parts (Store, JoinTokenIssuer, Dispatcher) — what the admin socket (AdminServiceImpl) and
// the operator's REST API call, so neither door holds a rule of its own (wire.md §5 builds
// on it). Each operation validates its arguments (INVALID_ARGUMENT naming the field and the
// value), does its work, and writes the admin / audit log lines an operator action deserves.
// Borrows everything; thread-safe (the Store and the Dispatcher are).
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
#include "controller/edge_api_limits.h"
#include "controller/join_token_issuer.h"
#include "controller/store.h"
#include "node_cluster.pb.h"

namespace edge::controller {

// The controller at a glance.
struct FleetSummary {
  size_t nodes = 0;
  size_t active_join_tokens = 0;
};

// A node as an operator sees it: its record, whether its stream is up, and — once it
// enrolled on the edge stream — its edge record and last reported capabilities.
struct NodeView {
  NodeRecord node;
  bool connected = false;
  int64_t connected_since_ms = 0;  // when its current stream attached (0 = not connected)
  std::optional<EdgeNodeRecord> edge;
  aegis::cluster::v1::EdgeCapabilities capabilities;
  NodeTags tags;  // the operator's tags (never the node's labels)
};

// The operator API's view of a node's liveness (wire.md §5.2), one rule for every caller:
// offline = no live edge stream, not edge-enrolled, or its last heartbeat older than `stale`;
// draining = it reported so (a Drain or its CapabilityUpdate) or the controller marked it.
bool NodeIsOffline(const NodeView& node, int64_t now_ms, std::chrono::milliseconds stale);
bool NodeIsDraining(const NodeView& node);
// The node's interactive tools (wire.md §5.5), as its agent reports them in the
// `agent.interactive_tools` label (comma-separated); empty when it reports none.
std::vector<std::string> InteractiveTools(const NodeView& node);

// What a PushConfig did.
struct PushedConfig {
  std::string version;  // the node's part was sent as this version; "" = nothing for the node
  std::optional<int64_t> limits_version;  // set when the delta had edge_api: the version now
};

class EdgeFleet {
 public:
  // `default_limits`: the controller's edge_api.limits (every node's until it has its own).
  EdgeFleet(Store& store, JoinTokenIssuer& tokens, Dispatcher& dispatcher, Clock& clock,
            EdgeApiLimits default_limits = {})
      : store_(store),
        tokens_(tokens),
        dispatcher_(dispatcher),
        clock_(clock),
        default_limits_(std::move(default_limits)) {}

  // Called (on the pushing thread) each time a node's limits version rose; set before the
  // admin and HTTP servers serve.
  using LimitsListener = std::function<void(const std::string& node_id, int64_t version)>;
  void SetLimitsListener(LimitsListener listener) { limits_listener_ = std::move(listener); }

  // Counts that fail to read are left at 0 (a status call answers all the same).
  FleetSummary Summary() const;

  Result<MintedJoinToken> CreateJoinToken(const std::string& node_id, const std::string& tenant_id,
                                          std::chrono::seconds ttl, bool replace);
  Status RevokeJoinToken(const std::string& token_id);
  Result<std::vector<JoinTokenRecord>> ListJoinTokens(bool include_inactive) const;

  Result<std::vector<NodeView>> ListNodes() const;
  // The nodes bound to `tenant_id` (the edge record's tenant, else the node record's),
  // revoked ones left out: what an operator user of that tenant sees (wire.md §5.1).
  // INVALID_ARGUMENT for an empty tenant.
  Result<std::vector<NodeView>> ListTenantNodes(const std::string& tenant_id) const;
  // One node of ListTenantNodes: NOT_FOUND "node <id> not found" alike for an unknown node,
  // another tenant's and a revoked one (nothing leaks); INVALID_ARGUMENT for an empty id.
  Result<NodeView> GetTenantNode(const std::string& tenant_id, const std::string& node_id) const;
  // Revoked nodes stay revoked until a join token created with `replace` re-enrolls them;
  // the node's stream is closed with PERMISSION_DENIED.
  Status RevokeNode(const std::string& node_id);
  // What a node of `tenant_id` did in [since_ms, until_ms) (usage, commands, latest error);
  // NOT_FOUND as GetTenantNode.
  Result<NodeActivity> GetNodeActivity(const std::string& tenant_id, const std::string& node_id,
                                       int64_t since_ms, int64_t until_ms) const;

  // The operator's tags of a node (fleet_selector.h has the rules). NOT_FOUND for an unknown
  // node; INVALID_ARGUMENT for an empty id.
  Result<NodeTags> GetNodeTags(const std::string& node_id) const;
  // Validates every key and value (INVALID_ARGUMENT naming it), then applies the removals
  // and the new values in one store transaction (see Store::UpdateNodeTags; at most
  // kMaxTagsPerNode per node) and audit-logs the change. Returns the node's tags afterwards.
  Result<NodeTags> UpdateNodeTags(const std::string& node_id, const NodeTags& set,
                                  const std::vector<TagRemoval>& remove);

  // See Dispatcher::Invoke and InvokeAsync; a refusal is logged.
  Result<std::string> Invoke(const InvokeSpec& spec, std::shared_ptr<CommandObserver> observer);
  void InvokeAsync(const InvokeSpec& spec, std::shared_ptr<CommandObserver> observer,
                   Dispatcher::InvokeDone done);
  // NOT_FOUND "command <id> not found"; INVALID_ARGUMENT for an empty id.
  Result<CommandRecord> GetCommand(const std::string& command_id) const;
  // The newest first, at most `limit` (0 = the store's default); INVALID_ARGUMENT for a
  // negative limit.
  Result<std::vector<CommandRecord>> ListCommands(const std::string& node_id, int limit) const;
  Status CancelCommand(const std::string& command_id, const std::string& reason);
  Status DrainNode(const std::string& node_id);
  Status ShutdownNode(const std::string& node_id, std::chrono::milliseconds grace);
  // Takes `delta` apart (config::SplitPushConfigDelta) and checks both parts before anything
  // changes. The node's part (ValidateConfigDelta) is sent as `version` (or "v<epoch ms>"
  // when empty); its `edge_api.limits` are the controller's: applied over the node's current
  // limits and stored, their version rising when they changed (the listener is told). The
  // node's part goes first: a node that is not connected fails the push (UNAVAILABLE) before
  // the limits change. A limits-only delta needs no connection, only an edge-enrolled node
  // (NOT_FOUND otherwise).
  Result<PushedConfig> PushConfig(const std::string& node_id, const std::string& delta,
                                  const std::string& version);
  // The limits in force for a node: its own after a PushConfig of edge_api.limits, else the
  // controller's (version 0, effective since its enrollment).
  NodeLimits LimitsOf(const EdgeNodeRecord& edge) const;
  // The same by id; a node that is not edge-enrolled (or unreadable) has the controller's.
  NodeLimits LimitsOf(const std::string& node_id) const;

  // OK when `delta` is a partial agent config the agent would accept on its own (keys,
  // types and ranges; references to tools or contexts defined only on the node are not
  // checked); INVALID_ARGUMENT listing the problems otherwise.
  static Status ValidateConfigDelta(const std::string& delta);

 private:
  Store& store_;
  JoinTokenIssuer& tokens_;
  Dispatcher& dispatcher_;
  Clock& clock_;
  const EdgeApiLimits default_limits_;
  LimitsListener limits_listener_;
};

}  // namespace edge::controller
