// Store on an embedded SQLite database (data_dir/controller.db), through the common SqliteDb
// (common/sqlite_db.h: 0600, WAL, cached statements, explicit transactions), with a versioned
// schema applied by ordered migrations (component "controller" in `schema_migrations`).
// Thread-safe: one connection, one mutex; single-winner transitions are conditional UPDATEs
// inside BEGIN IMMEDIATE transactions, so they also hold between processes sharing the file.
// The SQL stays portable (explicit transactions, conditional UPDATEs, ON CONFLICT) for a
// PostgreSQL backend. The store owns its SqliteDb.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/sqlite_db.h"
#include "controller/store.h"

namespace edge::controller {

class SqliteStore final : public Store {
 public:
  // Opens (creating if needed) and migrates the database at `path`.
  static Result<std::unique_ptr<SqliteStore>> Open(const std::string& path);
  ~SqliteStore() override = default;

  int schema_version() const { return schema_version_; }

  // In-process only: this controller is the database's one writer.
  std::optional<uint64_t> AuthGeneration() const override {
    return auth_generation_.load(std::memory_order_acquire);
  }

  Status InsertJoinToken(const JoinTokenRecord& rec) override;
  Result<std::optional<JoinTokenRecord>> FindJoinTokenByHash(const std::string& hash) override;
  Result<JoinTokenRecord> ConsumeJoinToken(const std::string& hash, const std::string& node_id,
                                           int64_t now_ms) override;
  Status UnconsumeJoinToken(const std::string& hash) override;
  Status RevokeJoinToken(const std::string& token_id, int64_t now_ms) override;
  Result<std::vector<JoinTokenRecord>> ListJoinTokens(bool include_inactive,
                                                      int64_t now_ms) override;

  Status UpsertNode(const NodeRecord& node) override;
  Result<std::optional<NodeRecord>> GetNode(const std::string& node_id) override;
  Result<std::vector<NodeRecord>> ListNodes() override;
  Status SetNodeState(const std::string& node_id, const std::string& state) override;

  Result<EdgeNodeRecord> EnrollEdgeNode(const EdgeEnrollment& enrollment) override;
  Result<std::optional<EdgeNodeRecord>> GetEdgeNode(const std::string& node_id) override;
  Result<std::vector<EdgeNodeRecord>> ListEdgeNodes() override;
  Status RecordHello(const std::string& node_id, const std::string& capabilities_json,
                     bool draining, int64_t now_ms) override;
  Status RecordHeartbeat(const std::string& node_id, int64_t now_ms) override;
  Status UpdateCapabilities(const std::string& node_id, const std::string& capabilities_json,
                            bool draining, int64_t now_ms) override;
  Result<int64_t> SetEdgeNodeLimits(const std::string& node_id, const std::string& limits_json,
                                    int64_t now_ms) override;
  Status SetConfigVersion(const std::string& node_id, const std::string& version) override;
  Result<std::vector<std::string>> MarkStaleNodes(int64_t cutoff_ms) override;
  Status RevokeNode(const std::string& node_id, int64_t now_ms) override;

  Status InsertNodeToken(const NodeTokenRecord& token) override;
  Result<std::optional<NodeTokenRecord>> GetNodeToken(const std::string& jti) override;
  Result<EdgeNodeRecord> RotateEdgeKey(const KeyRotation& rotation) override;
  Status PruneExpired(int64_t cutoff_ms) override;

  Status InsertCommand(const CommandRecord& command) override;
  Status InsertCommands(const std::vector<CommandRecord>& commands) override;
  Result<bool> CompleteCommand(const std::string& command_id, const std::string& node_id,
                               const CommandOutcomeRecord& result, int64_t now_ms) override;
  std::vector<Result<bool>> CompleteCommands(
      const std::vector<CommandCompletion>& results) override;
  Result<std::optional<CommandRecord>> GetCommand(const std::string& command_id) override;
  Result<std::vector<CommandRecord>> ListCommands(const std::string& node_id, int limit) override;
  Result<std::vector<CommandRecord>> ListPendingCommands(const std::string& node_id,
                                                         int64_t since_ms) override;

  // Operator tags and fleet commands (sqlite_store_fleet.cc).
  Result<NodeTags> GetNodeTags(const std::string& node_id) override;
  Result<std::map<std::string, NodeTags>> ListNodeTags() override;
  Result<NodeTags> UpdateNodeTags(const std::string& node_id, const NodeTags& set,
                                  const std::vector<TagRemoval>& remove, size_t max_tags,
                                  int64_t now_ms) override;
  Status InsertFleetCommand(const FleetCommandRecord& fleet) override;
  Status SetFleetPartError(const std::string& fleet_id, const std::string& node_id,
                           const std::string& code, const std::string& message) override;
  Status MarkFleetCancelled(const std::string& fleet_id, int64_t now_ms) override;
  Result<std::optional<FleetCommandRecord>> GetFleetCommand(const std::string& fleet_id) override;
  Result<std::vector<FleetCommandRecord>> ListFleetCommands(int limit) override;
  // Operator sessions and usage (sqlite_store_sessions.cc).
  Status UpsertSession(const OperatorSessionRecord& session) override;
  Result<std::optional<OperatorSessionRecord>> GetSession(const std::string& session_id) override;
  Result<std::vector<OperatorSessionRecord>> ListSessions(const std::string& tenant_id,
                                                          const std::string& user_id,
                                                          const std::string& node_id,
                                                          const std::string& status,
                                                          int limit) override;
  Result<std::vector<OperatorSessionRecord>> ListOpenSessions() override;
  Status InsertUsage(const UsageRecord& usage) override;
  Result<NodeActivity> GetNodeActivity(const std::string& node_id, int64_t since_ms,
                                       int64_t until_ms) override;

  // Worker leases and workers (sqlite_store_workers.cc).
  Result<LeaseRecord> AcquireLease(const std::string& resource_id, const std::string& holder_id,
                                   int64_t ttl_ms, int64_t now_ms) override;
  Result<LeaseRecord> RenewLease(const std::string& resource_id, const std::string& holder_id,
                                 std::optional<int64_t> expected_generation, int64_t ttl_ms,
                                 int64_t now_ms) override;
  Status ReleaseLease(const std::string& resource_id, const std::string& holder_id,
                      int64_t now_ms) override;
  Result<std::optional<LeaseRecord>> GetLease(const std::string& resource_id) override;
  Status RecordWorkerHeartbeat(const WorkerRecord& worker) override;
  Result<std::optional<WorkerRecord>> GetWorker(const std::string& worker_id) override;
  Result<std::vector<WorkerRecord>> ListWorkers() override;

 private:
  explicit SqliteStore(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}

  // Called once a transaction that changed what authenticates a node has committed — after,
  // never before, so a decision made while the change was in flight carries the older value
  // and is made again.
  void BumpAuthGeneration() { auth_generation_.fetch_add(1, std::memory_order_acq_rel); }

  std::unique_ptr<SqliteDb> db_;
  int schema_version_ = 0;
  std::atomic<uint64_t> auth_generation_{1};
};

}  // namespace edge::controller
