// The controller's persistent state behind one interface (design.md §1): join tokens, nodes,
// the edge registry (node keys, tenant binding, capabilities, heartbeats), NodeSecurityTokens
// and their blacklist, rotation nonces, dispatched commands with their results, the
// operator's node tags and fleet commands (one command per matching node under one id). SqliteStore
// is the embedded default; the SQL is kept portable (explicit transactions, conditional
// UPDATEs for single-winner transitions) so a PostgreSQL backend can implement the same
// interface. Plain data in, plain data out: no protobuf types cross this interface.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace edge::controller {

struct JoinTokenRecord {
  std::string token_id;
  std::string token_hash;  // hex SHA-256 of the token bytes; the token itself is never stored
  std::string node_id;     // bound node, empty = any
  std::string tenant_id;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  int64_t consumed_at_ms = 0;  // 0 = not consumed
  int64_t revoked_at_ms = 0;   // 0 = not revoked
  std::string consumed_by;     // node id that redeemed it
  // May re-enroll `node_id` although the controller already knows it (and lift a
  // revocation): `edge-controller token create --node N --replace`. Only with a node_id.
  bool replace = false;
  // Output of ConsumeJoinToken only: the state of the existing node this token re-enrolls
  // ("" = the node id was new).
  std::string replaced_node_state;
};

struct NodeRecord {
  std::string node_id;
  std::string tenant_id;
  std::string state;            // "enrolled", "healthy", "unhealthy", "draining", "revoked"
  std::string cert_serial_hex;  // serial of the node certificate minted at enrollment
  int64_t enrolled_at_ms = 0;
  int64_t last_seen_ms = 0;
};

// Node states (nodes.state).
inline constexpr const char* kNodeEnrolled = "enrolled";  // holds a certificate, no stream yet
inline constexpr const char* kNodeHealthy = "healthy";
inline constexpr const char* kNodeUnhealthy = "unhealthy";  // no heartbeat within the threshold
inline constexpr const char* kNodeDraining = "draining";
inline constexpr const char* kNodeRevoked = "revoked";

// An edge-enrolled node (ChallengeNode with its enrollment token): its tenant binding, its
// Ed25519 key(s) and what its stream last reported.
struct EdgeNodeRecord {
  std::string node_id;
  std::string tenant_id;
  std::string public_key;         // raw 32 bytes
  std::string prev_public_key;    // the key replaced by the last rotation, empty = none
  int64_t prev_key_until_ms = 0;  // the previous key is accepted until then (overlap window)
  int64_t edge_enrolled_at_ms = 0;
  std::string enrollment_jti;  // jti of the join token that enrolled it
  int64_t key_rotated_at_ms = 0;
  std::string capabilities_json;  // {"os","arch","local_tools","mount_points","custom_labels"}
  int64_t last_heartbeat_ms = 0;
  std::string config_version;  // version of the last PushConfig sent
  // Rises by 1 whenever a Hello or CapabilityUpdate changes the node's tool list (the first
  // report of a non-empty list included); 0 = no tools reported yet. The operator API's
  // config_versions.capabilities (wire.md §5.2).
  int64_t capabilities_version = 0;
  int64_t capabilities_changed_ms = 0;  // when capabilities_version last rose (0 = never)
  // The node's own edge_api.limits (edge_api_limits.h), "" = the controller's; their
  // config_versions.limits (+1 each PushConfig that changed them) and when it last rose.
  std::string limits_json;
  int64_t limits_version = 0;
  int64_t limits_changed_ms = 0;
  // Output of EnrollEdgeNode only: true when it replaced an existing edge identity.
  bool identity_replaced = false;
};

// A NodeSecurityToken the controller issued (the token itself is not stored: it is a JWT the
// controller can verify; this row is its revocation state).
struct NodeTokenRecord {
  std::string jti;
  std::string node_id;
  int64_t issued_at_ms = 0;
  int64_t expires_at_ms = 0;
  int64_t revoked_at_ms = 0;  // 0 = valid; else blacklisted
  std::string revoke_reason;  // "rotated", "node revoked", ...
  // A token blacklisted by a rotation may still sign envelopes on a stream opened before the
  // rotation until then (the overlap window); never for a new stream.
  int64_t grace_until_ms = 0;
};

// First edge enrollment (ChallengeNode with bootstrap_proof), applied in one transaction.
struct EdgeEnrollment {
  std::string jti;              // the join token's jti, redeemed once
  std::string join_token_hash;  // JoinTokenIssuer::HashToken of the join token
  std::string node_id;
  std::string tenant_id;   // the join token's tid
  std::string public_key;  // raw 32 bytes, from AttestNode
  int64_t now_ms = 0;
  NodeTokenRecord token;  // the NodeSecurityToken issued with it
};

// RotateEdgeKey, applied in one transaction.
struct KeyRotation {
  std::string node_id;
  std::string expected_public_key;  // the key the proof was verified against (its current key)
  std::string new_public_key;       // equal to the current key: a token refresh
  std::string nonce;                // raw bytes; must never have been seen before
  std::string old_token_jti;        // blacklisted
  int64_t overlap_until_ms = 0;
  int64_t now_ms = 0;
  NodeTokenRecord new_token;
};

// The terminal outcome of a command, as stored (the admin API shows it as is).
struct CommandOutcomeRecord {
  std::string outcome;  // "ok", "error", "timed_out", "cancelled"
  int32_t exit_code = 0;
  std::string error_code;    // Err.code
  std::string message;       // Err.message or Cancelled.reason
  std::string payload_json;  // Ok.payload as JSON, "" = none
  int64_t duration_ms = 0;   // Ok.duration, or TimedOut.deadline
};

// One node's result of a command, for Store::CompleteCommands.
struct CommandCompletion {
  std::string command_id;
  std::string node_id;  // who sent it (authenticated)
  CommandOutcomeRecord result;
  int64_t now_ms = 0;
};

// An operator's session on a node (wire.md §5.2, §5.5), as the controller keeps it: live ones
// while they run, ended ones as their history.
struct OperatorSessionRecord {
  std::string session_id;  // UUIDv4
  std::string node_id;
  std::string tenant_id;
  std::string user_id;
  std::string agent_name;
  std::string workspace_path;
  std::string status;            // INIT, RUNNING, DETACHED, TERMINATED
  std::string start_command_id;  // the session.start command
  int64_t limits_version = 0;    // pinned when the session was created
  int64_t capabilities_version = 0;
  std::string pinned_tools_json = "[]";  // the node's tools then
  int64_t created_at_ms = 0;
  int64_t last_activity_at_ms = 0;
  int64_t ended_at_ms = 0;           // 0 = not ended
  std::optional<int32_t> exit_code;  // of the session's process, when it exited
  std::string end_reason;            // why it ended ("" while it runs)
};

// One session.usage frame of a session's process (wire.md §5.2 metrics).
struct UsageRecord {
  std::string node_id;
  std::string session_id;
  int64_t at_ms = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double estimated_cost = 0;
  int64_t tool_invocations = 0;
};

// What a node did in a period (GET /v1/edge/nodes/{id}/metrics).
struct NodeActivity {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double estimated_cost = 0;
  int64_t commands = 0;                  // InvokeTools created in the period
  int64_t session_tool_invocations = 0;  // reported by session.usage frames
  // The latest failed command (outcome other than ok, or ok with a non-zero exit) or session
  // error: "" = none.
  std::string last_error;
  int64_t last_error_at_ms = 0;
};

inline constexpr const char* kCommandDispatched = "dispatched";
inline constexpr const char* kCommandCompleted = "completed";

struct CommandRecord {
  std::string command_id;
  std::string node_id;
  std::string tool;
  std::string args_json;
  std::string security_context;
  int64_t deadline_ms = 0;  // 0 = the agent's default
  std::string state;        // kCommandDispatched or kCommandCompleted
  int64_t created_at_ms = 0;
  int64_t completed_at_ms = 0;
  CommandOutcomeRecord result;  // set when completed
};

// A lease on a worker resource (a sandbox id), held by one worker (the worker contract's
// cluster-store semantics). A released lease keeps its row (holder "" and expiry 0) so its
// generation never goes back: a worker refuses a generation lower than one it accepted.
struct LeaseRecord {
  std::string resource_id;
  std::string holder_id;   // "" = released
  int64_t generation = 0;  // +1 on every acquire and renew
  int64_t expires_at_ms = 0;
  int64_t updated_at_ms = 0;
};

// A worker as its last heartbeat described it (POST /api/v1/worker/{id}/heartbeat).
struct WorkerRecord {
  std::string worker_id;
  std::string hostname;
  std::string status;  // as reported: "online" or "draining"
  std::string rpc_url;
  std::string preview_domain;
  int64_t max_sandboxes = 0;
  int64_t max_sandboxes_per_owner = 0;
  std::string providers_json;     // JSON array of strings
  std::string capabilities_json;  // JSON array of strings
  std::string remote_addr;        // the heartbeat's peer "ip:port"
  int64_t first_seen_ms = 0;
  int64_t last_heartbeat_ms = 0;
  int64_t heartbeats = 0;  // how many were recorded
};

// A node's operator tags (key → value): set only by the operator (`edge-controller tag`), never
// by the node — a Hello's or CapabilityUpdate's labels are a separate thing (seeds/000).
using NodeTags = std::map<std::string, std::string>;

// A tag to remove: `value` set = only when the tag has that value.
struct TagRemoval {
  std::string key;
  std::optional<std::string> value;
};

// One node's part of a fleet command: the ordinary command sent to it. The command id is
// minted (and stored here) before the command is sent; a part the dispatcher refused (its
// node disconnected in between, args too large for it, ...) keeps the refusal as its error.
struct FleetPartRecord {
  std::string node_id;
  std::string command_id;
  std::string error_code;  // "" = sent (or not sent yet)
  std::string error_message;
};

// A fleet command: one tool run on every node its selector matched when it was created.
struct FleetCommandRecord {
  std::string fleet_id;    // UUIDv4
  std::string tenant_id;   // "" = created on the admin socket (any tenant's nodes)
  std::string created_by;  // "operator" (admin socket) or the user token's subject
  std::string selector;
  std::string tool;
  std::string args_json;
  std::string security_context;
  int64_t deadline_ms = 0;
  int64_t created_at_ms = 0;
  int64_t cancelled_at_ms = 0;         // 0 = never cancelled
  std::vector<FleetPartRecord> parts;  // ordered by node id
};

class Store {
 public:
  virtual ~Store() = default;

  // A counter that rises after every committed change to what authenticates an edge node: its
  // registered keys or a node token's revocation (EnrollEdgeNode, RevokeNode, RotateEdgeKey,
  // PruneExpired when it deleted a token). A caller may reuse an authentication decision made under
  // the same value (EdgeAuthCache); nullopt = not tracked, decide afresh every time (the safe
  // default for wrappers and fakes). Read it before reading the state the decision rests on.
  virtual std::optional<uint64_t> AuthGeneration() const { return std::nullopt; }

  virtual Status InsertJoinToken(const JoinTokenRecord& rec) = 0;
  virtual Result<std::optional<JoinTokenRecord>> FindJoinTokenByHash(const std::string& hash) = 0;
  // The single-use transition: marks the token consumed by `node_id` at `now_ms` if, and only
  // if, it exists, is not consumed, not revoked, not expired and not bound to another node.
  // Exactly one of any number of concurrent callers wins. Errors, as the contract's table:
  // NOT_FOUND unknown; FAILED_PRECONDITION expired/revoked/consumed; PERMISSION_DENIED bound
  // to another node.
  // A node id the controller already knows (a `nodes` or `edge_nodes` row, whatever its
  // state, revoked included) is re-enrolled only by a token bound to it with `replace`:
  // PERMISSION_DENIED for an unbound token, FAILED_PRECONDITION for a bound one without
  // `replace` (checked only after the token itself is valid, so it reveals nothing to a
  // caller without one). A new id is reserved in the same transaction (a `nodes` row in
  // state enrolled), so two unbound tokens cannot both claim it.
  virtual Result<JoinTokenRecord> ConsumeJoinToken(const std::string& hash,
                                                   const std::string& node_id, int64_t now_ms) = 0;
  // Gives a consumed token back (used when enrollment fails after consuming, e.g. minting),
  // and forgets the node id it reserved when that id was new.
  virtual Status UnconsumeJoinToken(const std::string& hash) = 0;
  virtual Status RevokeJoinToken(const std::string& token_id, int64_t now_ms) = 0;
  virtual Result<std::vector<JoinTokenRecord>> ListJoinTokens(bool include_inactive,
                                                              int64_t now_ms) = 0;

  virtual Status UpsertNode(const NodeRecord& node) = 0;
  virtual Result<std::optional<NodeRecord>> GetNode(const std::string& node_id) = 0;
  virtual Result<std::vector<NodeRecord>> ListNodes() = 0;
  // Sets nodes.state. NOT_FOUND for an unknown node.
  virtual Status SetNodeState(const std::string& node_id, const std::string& state) = 0;

  // ---- edge registry -----------------------------------------------------------------
  // In one transaction: the join token (by hash) must exist, not be revoked, and be either
  // consumed by this node (ExchangeJoinToken) or still unconsumed — then it is consumed by
  // this node now; not bound to another node; its jti not redeemed for edge enrollment
  // before (exactly one of any number of concurrent callers wins); a node already bound to
  // another tenant is refused. Then binds node ↔ tenant, stores the key, creates the node
  // row when missing, and records `token`. Errors: NOT_FOUND unknown token;
  // FAILED_PRECONDITION revoked or already redeemed; PERMISSION_DENIED consumed by or bound
  // to another node, or node bound to another tenant.
  // An existing edge identity (an `edge_nodes` row), a revoked node, or a node id known
  // before this token was redeemed for it, is replaced only by a token bound to the node with
  // `replace` (PERMISSION_DENIED unbound, FAILED_PRECONDITION bound without replace); the
  // replacement blacklists every token of the old identity ("replaced") and lifts a
  // revocation (state enrolled). `identity_replaced` says it happened.
  virtual Result<EdgeNodeRecord> EnrollEdgeNode(const EdgeEnrollment& enrollment) = 0;
  virtual Result<std::optional<EdgeNodeRecord>> GetEdgeNode(const std::string& node_id) = 0;
  virtual Result<std::vector<EdgeNodeRecord>> ListEdgeNodes() = 0;
  // Hello: capabilities, heartbeat time, state healthy (draining when `draining`).
  virtual Status RecordHello(const std::string& node_id, const std::string& capabilities_json,
                             bool draining, int64_t now_ms) = 0;
  // Heartbeat: last heartbeat time; an unhealthy node becomes healthy again.
  virtual Status RecordHeartbeat(const std::string& node_id, int64_t now_ms) = 0;
  // CapabilityUpdate at `now_ms`: capabilities; `draining` moves the node to draining.
  virtual Status UpdateCapabilities(const std::string& node_id,
                                    const std::string& capabilities_json, bool draining,
                                    int64_t now_ms) = 0;
  virtual Status SetConfigVersion(const std::string& node_id, const std::string& version) = 0;
  // The node's own edge_api.limits become `limits_json`: when they differ from the stored
  // ones, limits_version rises by 1 and limits_changed_ms becomes `now_ms`. Returns the
  // version afterwards. NOT_FOUND for a node that is not edge-enrolled.
  virtual Result<int64_t> SetEdgeNodeLimits(const std::string& node_id,
                                            const std::string& limits_json, int64_t now_ms) = 0;
  // Healthy and draining edge nodes whose last heartbeat is older than `cutoff_ms` become
  // unhealthy; returns their ids. Not waited on to reach the disk (the node monitor's timed
  // sweep marks again whatever a power cut undid).
  virtual Result<std::vector<std::string>> MarkStaleNodes(int64_t cutoff_ms) = 0;
  // Node state revoked and every token of the node blacklisted.
  virtual Status RevokeNode(const std::string& node_id, int64_t now_ms) = 0;

  // ---- NodeSecurityTokens ------------------------------------------------------------
  virtual Status InsertNodeToken(const NodeTokenRecord& token) = 0;
  virtual Result<std::optional<NodeTokenRecord>> GetNodeToken(const std::string& jti) = 0;
  // In one transaction: the nonce is recorded (seen before → INVALID_ARGUMENT), the node's
  // current key must still be `expected_public_key` (else ABORTED: a concurrent rotation
  // won), the key is replaced (the old one kept until overlap_until_ms), the old token is
  // blacklisted and the new one recorded. NOT_FOUND for a node that is not edge-enrolled.
  virtual Result<EdgeNodeRecord> RotateEdgeKey(const KeyRotation& rotation) = 0;
  // Forgets tokens and rotation nonces that expired before `cutoff_ms` (a replayed rotation
  // older than that fails on its expired token anyway). Not waited on to reach the disk, like
  // MarkStaleNodes.
  virtual Status PruneExpired(int64_t cutoff_ms) = 0;

  // ---- commands ----------------------------------------------------------------------
  // ALREADY_EXISTS for a duplicate id.
  virtual Status InsertCommand(const CommandRecord& command) = 0;
  // Every one in one transaction (one wait for the disk): all stored, or none and the error —
  // ALREADY_EXISTS naming the first duplicate id.
  virtual Status InsertCommands(const std::vector<CommandRecord>& commands) = 0;
  // Stores the first result of a command: true when this call stored it, false when the
  // command already had one (a duplicate delivery). NOT_FOUND for an unknown command;
  // PERMISSION_DENIED when the command was sent to another node.
  virtual Result<bool> CompleteCommand(const std::string& command_id, const std::string& node_id,
                                       const CommandOutcomeRecord& result, int64_t now_ms) = 0;
  // CompleteCommand for several results in one transaction (one wait for the disk for all of
  // them): for each, in order, what CompleteCommand would answer (a second result of the same
  // command later in the batch is a duplicate). Should the transaction fail, each result is
  // stored alone (one bad statement does not cost the others; a failing disk fails each with
  // its error). This default stores them one by one.
  virtual std::vector<Result<bool>> CompleteCommands(
      const std::vector<CommandCompletion>& results) {
    std::vector<Result<bool>> out;
    out.reserve(results.size());
    for (const auto& c : results)
      out.push_back(CompleteCommand(c.command_id, c.node_id, c.result, c.now_ms));
    return out;
  }
  virtual Result<std::optional<CommandRecord>> GetCommand(const std::string& command_id) = 0;
  // Newest first; `node_id` empty = every node; `limit` 0 = 100.
  virtual Result<std::vector<CommandRecord>> ListCommands(const std::string& node_id,
                                                          int limit) = 0;
  // The node's commands that have no result yet (state dispatched) created at or after
  // `since_ms`, oldest first: what the dispatcher sends again when the node reconnects.
  virtual Result<std::vector<CommandRecord>> ListPendingCommands(const std::string& node_id,
                                                                 int64_t since_ms) = 0;

  // ---- operator tags (stored on the controller only) ---------------------------------------
  // NOT_FOUND "node N not found" for a node without a `nodes` row.
  virtual Result<NodeTags> GetNodeTags(const std::string& node_id) = 0;
  // Every node's tags (nodes without tags left out).
  virtual Result<std::map<std::string, NodeTags>> ListNodeTags() = 0;
  // In one transaction: removes `remove` (NOT_FOUND for a key the node does not have;
  // FAILED_PRECONDITION when its value is not the one named), then sets `set` (a key present
  // gets the new value); RESOURCE_EXHAUSTED when the node would have more than `max_tags`.
  // NOT_FOUND for an unknown node. Returns the node's tags afterwards. Nothing changes on
  // an error.
  virtual Result<NodeTags> UpdateNodeTags(const std::string& node_id, const NodeTags& set,
                                          const std::vector<TagRemoval>& remove, size_t max_tags,
                                          int64_t now_ms) = 0;

  // ---- fleet commands ----------------------------------------------------------------------
  // The command and its parts, in one transaction. ALREADY_EXISTS for a duplicate id.
  virtual Status InsertFleetCommand(const FleetCommandRecord& fleet) = 0;
  // Records why a part was not sent. NOT_FOUND for an unknown fleet command or part.
  virtual Status SetFleetPartError(const std::string& fleet_id, const std::string& node_id,
                                   const std::string& code, const std::string& message) = 0;
  // The first cancel's time is kept. NOT_FOUND for an unknown fleet command.
  virtual Status MarkFleetCancelled(const std::string& fleet_id, int64_t now_ms) = 0;
  virtual Result<std::optional<FleetCommandRecord>> GetFleetCommand(
      const std::string& fleet_id) = 0;
  // Newest first, with their parts; `limit` 0 = 100.
  virtual Result<std::vector<FleetCommandRecord>> ListFleetCommands(int limit) = 0;
  // ---- operator sessions and their usage (wire.md §5) ------------------------------------
  // Inserts or replaces the session's row.
  virtual Status UpsertSession(const OperatorSessionRecord& session) = 0;
  virtual Result<std::optional<OperatorSessionRecord>> GetSession(
      const std::string& session_id) = 0;
  // The sessions of `tenant_id` (and `user_id`, `node_id`, `status` when not empty), newest
  // first, at most `limit`; TERMINATED ones only when `status` asks for them.
  virtual Result<std::vector<OperatorSessionRecord>> ListSessions(const std::string& tenant_id,
                                                                  const std::string& user_id,
                                                                  const std::string& node_id,
                                                                  const std::string& status,
                                                                  int limit) = 0;
  // Sessions not TERMINATED (what a restarted controller ends).
  virtual Result<std::vector<OperatorSessionRecord>> ListOpenSessions() = 0;
  virtual Status InsertUsage(const UsageRecord& usage) = 0;
  // The node's usage, commands and latest error in [since_ms, until_ms).
  virtual Result<NodeActivity> GetNodeActivity(const std::string& node_id, int64_t since_ms,
                                               int64_t until_ms) = 0;

  // ---- worker leases (the worker contract's cluster-store semantics) ----------------------
  // Atomic acquire by resource id, for `holder_id` until now + ttl: succeeds when there is no
  // lease, it is released or expired, or `holder_id` holds it already; the generation goes up
  // by one. ABORTED naming the holder and its expiry when another holder's lease is live.
  // Concurrent acquires serialize on the row (BEGIN IMMEDIATE here; a unique key plus a
  // conditional upsert in PostgreSQL terms), so exactly one of them wins a free lease.
  virtual Result<LeaseRecord> AcquireLease(const std::string& resource_id,
                                           const std::string& holder_id, int64_t ttl_ms,
                                           int64_t now_ms) = 0;
  // Renew by the holder, before expiry; `expected_generation` (when set) must be the current
  // one. NOT_FOUND no lease; ABORTED another holder (or released); FAILED_PRECONDITION
  // expired, or a stale generation.
  virtual Result<LeaseRecord> RenewLease(const std::string& resource_id,
                                         const std::string& holder_id,
                                         std::optional<int64_t> expected_generation, int64_t ttl_ms,
                                         int64_t now_ms) = 0;
  // Release by the holder only (an expired lease of that holder too). NOT_FOUND no lease;
  // ABORTED another holder.
  virtual Status ReleaseLease(const std::string& resource_id, const std::string& holder_id,
                              int64_t now_ms) = 0;
  virtual Result<std::optional<LeaseRecord>> GetLease(const std::string& resource_id) = 0;

  // ---- workers -------------------------------------------------------------------------
  // Inserts or replaces the worker's row with the heartbeat (first_seen_ms is kept, the
  // count goes up).
  virtual Status RecordWorkerHeartbeat(const WorkerRecord& worker) = 0;
  virtual Result<std::optional<WorkerRecord>> GetWorker(const std::string& worker_id) = 0;
  // Ordered by id.
  virtual Result<std::vector<WorkerRecord>> ListWorkers() = 0;
};

}  // namespace edge::controller
