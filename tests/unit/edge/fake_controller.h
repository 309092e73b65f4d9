// FakeController: a small in-process NodeClusterService (gRPC CallbackService) on 127.0.0.1:0
// with mTLS from an identity::CertificateAuthority, for the agent's edge tests. It attests
// and challenges nodes, issues ES256 NodeSecurityTokens, rotates keys, and on ConnectEdge
// records every EdgeEvent after checking its envelope with identity::EnvelopeCodec::VerifyEvent
// against the node's registered key(s) and its token against the tokens it issued. Tests push
// EdgeCommands, end streams and make calls fail on demand. Never the real controller.
// Also writes an enrolled node's keystore (certs/) into a data dir. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/identity/certificate_authority.h"
#include "agent/identity/jwt.h"
#include "agent/identity/keystore_files.h"
#include "common/clock.h"
#include "node_cluster.grpc.pb.h"

namespace edge::agentedge::testing {

namespace pb = aegis::cluster::v1;

class FakeController final : public pb::NodeClusterService::CallbackService {
 public:
  struct Options {
    std::string tenant = "tenant-a";
    std::chrono::seconds token_ttl{3600};
    std::string join_token;  // the enrollment token ChallengeNode accepts as proof
  };
  // One ConnectEdge call as the fake saw it.
  struct StreamLog {
    int index = 0;
    std::string bearer;
    std::string peer_cn;
    std::string stream_id;  // from the Hello
    std::vector<pb::EdgeEvent> events;
    std::vector<std::string> envelope_tokens;  // the token in each event's envelope
    std::vector<std::string> verify_errors;    // envelope or token checks that failed
    bool half_closed = false;                  // the agent sent WritesDone
    bool done = false;
  };

  FakeController(Clock& clock, Options options);
  ~FakeController() override;

  // Serves on 127.0.0.1:0; returns "127.0.0.1:<port>".
  std::string Start();
  void Shutdown();
  const std::string& address() const { return address_; }
  const identity::CertificateAuthority& ca() const { return *ca_; }

  // Writes an enrolled node's keystore (cert CN = node_id, issued by the fake's CA).
  Status WriteKeystore(const std::string& data_dir, const std::string& node_id) const;
  // Marks `node_id` as edge-enrolled with `public_key` (no proof needed to attest).
  void RegisterNode(const std::string& node_id, const std::string& public_key);

  // Failure injection: the next `n` calls of `rpc` ("AttestNode", "ChallengeNode",
  // "RotateEdgeKey", "ConnectEdge") end with `status`.
  void FailNext(const std::string& rpc, int n, grpc::Status status);
  // Counts of calls per rpc.
  int Calls(const std::string& rpc) const;
  // The enrollment tokens seen on ChallengeNode ("" for calls without proof).
  std::vector<std::string> ProofsSeen() const;
  std::vector<std::string> Keys(const std::string& node_id) const;
  // Tokens issued so far (in order) and whether each is revoked.
  std::vector<std::string> IssuedTokens() const;

  // Streams: a copy of the logs; waiting on a predicate over them (real-time deadline).
  std::vector<StreamLog> Streams() const;
  bool WaitFor(const std::function<bool(const std::vector<StreamLog>&)>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  // Sends a command on the newest live stream; false when there is none.
  bool Send(const pb::EdgeCommand& command);
  // Ends the newest live stream with `status`.
  void EndStream(grpc::Status status = grpc::Status::OK);

  // Used by the stream reactor.
  class Stream;
  void OnEvent(int index, const pb::EdgeEvent& event);
  void OnHalfClose(int index);
  void OnStreamDone(int index, Stream* stream);

  // CallbackService
  grpc::ServerUnaryReactor* AttestNode(grpc::CallbackServerContext* ctx,
                                       const pb::AttestNodeRequest* req,
                                       pb::AttestNodeResponse* resp) override;
  grpc::ServerUnaryReactor* ChallengeNode(grpc::CallbackServerContext* ctx,
                                          const pb::ChallengeNodeRequest* req,
                                          pb::ChallengeNodeResponse* resp) override;
  grpc::ServerUnaryReactor* RotateEdgeKey(grpc::CallbackServerContext* ctx,
                                          const pb::RotateEdgeKeyRequest* req,
                                          pb::RotateEdgeKeyResponse* resp) override;
  grpc::ServerBidiReactor<pb::EdgeEvent, pb::EdgeCommand>* ConnectEdge(
      grpc::CallbackServerContext* ctx) override;

 private:
  struct Challenge {
    std::string node_id;
    std::string nonce;
    std::string public_key;
  };
  std::optional<grpc::Status> TakeFailure(const std::string& rpc);  // mu_ held
  std::string IssueToken(const std::string& node_id);               // mu_ held
  bool TokenValid(const std::string& token) const;                  // mu_ held
  grpc::Status DoAttest(grpc::CallbackServerContext* ctx, const pb::AttestNodeRequest& req,
                        pb::AttestNodeResponse* resp);
  grpc::Status DoChallenge(grpc::CallbackServerContext* ctx, const pb::ChallengeNodeRequest& req,
                           pb::ChallengeNodeResponse* resp);
  grpc::Status DoRotate(grpc::CallbackServerContext* ctx, const pb::RotateEdgeKeyRequest& req,
                        pb::RotateEdgeKeyResponse* resp);

  Clock& clock_;
  Options options_;
  std::optional<identity::CertificateAuthority> ca_;
  std::optional<identity::EcSigningKey> token_key_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<std::string, std::vector<std::pair<int, grpc::Status>>> failures_;
  std::map<std::string, int> calls_;
  std::map<std::string, Challenge> challenges_;
  std::map<std::string, std::vector<std::string>> keys_;  // node → registered keys
  std::set<std::string> enrolled_;
  std::vector<std::string> proofs_;
  std::vector<std::string> issued_;
  std::set<std::string> revoked_;
  std::vector<StreamLog> streams_;
  std::map<int, Stream*> live_;
  int next_id_ = 1;
};

}  // namespace edge::agentedge::testing
