// ForwardingStore: a Store that passes every call to another one, for tests that change one
// call (hold it at a gate, count it) and keep the real store behind the rest. Borrows `inner`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "controller/store.h"

namespace edge::controller {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(Store& inner) : s_(inner) {}

  Result<EdgeNodeRecord> RotateEdgeKey(const KeyRotation& r) override {
    return s_.RotateEdgeKey(r);
  }
  Status InsertJoinToken(const JoinTokenRecord& r) override { return s_.InsertJoinToken(r); }
  Result<std::optional<JoinTokenRecord>> FindJoinTokenByHash(const std::string& h) override {
    return s_.FindJoinTokenByHash(h);
  }
  Result<JoinTokenRecord> ConsumeJoinToken(const std::string& h, const std::string& n,
                                           int64_t t) override {
    return s_.ConsumeJoinToken(h, n, t);
  }
  Status UnconsumeJoinToken(const std::string& h) override { return s_.UnconsumeJoinToken(h); }
  Status RevokeJoinToken(const std::string& id, int64_t t) override {
    return s_.RevokeJoinToken(id, t);
  }
  Result<std::vector<JoinTokenRecord>> ListJoinTokens(bool all, int64_t t) override {
    return s_.ListJoinTokens(all, t);
  }
  Status UpsertNode(const NodeRecord& n) override { return s_.UpsertNode(n); }
  Result<std::optional<NodeRecord>> GetNode(const std::string& id) override {
    return s_.GetNode(id);
  }
  Result<std::vector<NodeRecord>> ListNodes() override { return s_.ListNodes(); }
  Status SetNodeState(const std::string& id, const std::string& st) override {
    return s_.SetNodeState(id, st);
  }
  Result<EdgeNodeRecord> EnrollEdgeNode(const EdgeEnrollment& e) override {
    return s_.EnrollEdgeNode(e);
  }
  Result<std::optional<EdgeNodeRecord>> GetEdgeNode(const std::string& id) override {
    return s_.GetEdgeNode(id);
  }
  Result<std::vector<EdgeNodeRecord>> ListEdgeNodes() override { return s_.ListEdgeNodes(); }
  Status RecordHello(const std::string& id, const std::string& caps, bool d, int64_t t) override {
    return s_.RecordHello(id, caps, d, t);
  }
  Status RecordHeartbeat(const std::string& id, int64_t t) override {
    return s_.RecordHeartbeat(id, t);
  }
  Status UpdateCapabilities(const std::string& id, const std::string& caps, bool d,
                            int64_t now_ms) override {
    return s_.UpdateCapabilities(id, caps, d, now_ms);
  }
  Status SetConfigVersion(const std::string& id, const std::string& v) override {
    return s_.SetConfigVersion(id, v);
  }
  Result<int64_t> SetEdgeNodeLimits(const std::string& id, const std::string& l,
                                    int64_t now_ms) override {
    return s_.SetEdgeNodeLimits(id, l, now_ms);
  }
  Result<std::vector<std::string>> MarkStaleNodes(int64_t c) override {
    return s_.MarkStaleNodes(c);
  }
  Status RevokeNode(const std::string& id, int64_t t) override { return s_.RevokeNode(id, t); }
  Status InsertNodeToken(const NodeTokenRecord& t) override { return s_.InsertNodeToken(t); }
  Result<std::optional<NodeTokenRecord>> GetNodeToken(const std::string& jti) override {
    return s_.GetNodeToken(jti);
  }
  Status PruneExpired(int64_t c) override { return s_.PruneExpired(c); }
  Status InsertCommand(const CommandRecord& c) override { return s_.InsertCommand(c); }
  Status InsertCommands(const std::vector<CommandRecord>& c) override {
    return s_.InsertCommands(c);
  }
  Result<bool> CompleteCommand(const std::string& id, const std::string& n,
                               const CommandOutcomeRecord& r, int64_t t) override {
    return s_.CompleteCommand(id, n, r, t);
  }
  std::vector<Result<bool>> CompleteCommands(
      const std::vector<CommandCompletion>& results) override {
    return s_.CompleteCommands(results);
  }
  Result<std::optional<CommandRecord>> GetCommand(const std::string& id) override {
    return s_.GetCommand(id);
  }
  Result<std::vector<CommandRecord>> ListCommands(const std::string& n, int l) override {
    return s_.ListCommands(n, l);
  }
  Result<std::vector<CommandRecord>> ListPendingCommands(const std::string& n,
                                                         int64_t since) override {
    return s_.ListPendingCommands(n, since);
  }
  Result<LeaseRecord> AcquireLease(const std::string& r, const std::string& h, int64_t ttl,
                                   int64_t t) override {
    return s_.AcquireLease(r, h, ttl, t);
  }
  Result<LeaseRecord> RenewLease(const std::string& r, const std::string& h,
                                 std::optional<int64_t> g, int64_t ttl, int64_t t) override {
    return s_.RenewLease(r, h, g, ttl, t);
  }
  Status ReleaseLease(const std::string& r, const std::string& h, int64_t t) override {
    return s_.ReleaseLease(r, h, t);
  }
  Result<std::optional<LeaseRecord>> GetLease(const std::string& r) override {
    return s_.GetLease(r);
  }
  Status RecordWorkerHeartbeat(const WorkerRecord& w) override {
    return s_.RecordWorkerHeartbeat(w);
  }
  Result<std::optional<WorkerRecord>> GetWorker(const std::string& id) override {
    return s_.GetWorker(id);
  }
  Result<std::vector<WorkerRecord>> ListWorkers() override { return s_.ListWorkers(); }
  Result<NodeTags> GetNodeTags(const std::string& id) override { return s_.GetNodeTags(id); }
  Result<std::map<std::string, NodeTags>> ListNodeTags() override { return s_.ListNodeTags(); }
  Result<NodeTags> UpdateNodeTags(const std::string& id, const NodeTags& set,
                                  const std::vector<TagRemoval>& remove, size_t max,
                                  int64_t t) override {
    return s_.UpdateNodeTags(id, set, remove, max, t);
  }
  Status InsertFleetCommand(const FleetCommandRecord& f) override {
    return s_.InsertFleetCommand(f);
  }
  Status SetFleetPartError(const std::string& f, const std::string& n, const std::string& c,
                           const std::string& m) override {
    return s_.SetFleetPartError(f, n, c, m);
  }
  Status MarkFleetCancelled(const std::string& f, int64_t t) override {
    return s_.MarkFleetCancelled(f, t);
  }
  Result<std::optional<FleetCommandRecord>> GetFleetCommand(const std::string& f) override {
    return s_.GetFleetCommand(f);
  }
  Result<std::vector<FleetCommandRecord>> ListFleetCommands(int l) override {
    return s_.ListFleetCommands(l);
  }
  Status UpsertSession(const OperatorSessionRecord& r) override { return s_.UpsertSession(r); }
  Result<std::optional<OperatorSessionRecord>> GetSession(const std::string& id) override {
    return s_.GetSession(id);
  }
  Result<std::vector<OperatorSessionRecord>> ListSessions(const std::string& t,
                                                          const std::string& u,
                                                          const std::string& n,
                                                          const std::string& st, int l) override {
    return s_.ListSessions(t, u, n, st, l);
  }
  Result<std::vector<OperatorSessionRecord>> ListOpenSessions() override {
    return s_.ListOpenSessions();
  }
  Status InsertUsage(const UsageRecord& u) override { return s_.InsertUsage(u); }
  Result<NodeActivity> GetNodeActivity(const std::string& n, int64_t a, int64_t b) override {
    return s_.GetNodeActivity(n, a, b);
  }

 protected:
  Store& s_;
};

}  // namespace edge::controller
