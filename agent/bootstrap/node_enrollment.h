// NodeEnrollment: the whole first-run enrollment of a node, as `edge-agent enroll` and
// `edge-agent run` (no keystore, a join token configured) do it:
//   1. with edge.enabled and a token from the config, keep it in certs/join_token.pending first
//      (the first ChallengeNode needs it as proof after the config line is gone);
//   2. redeem the token (JoinTokenRedeemer: ExchangeJoinToken, keystore, token removed from
//      the config), record the controller address, create the node key;
//   3. with `attest` (enroll), the first edge attestation with the join token as proof, retried
//      4 times on kUnavailable (full jitter, 1 s .. 10 s). If the controller stays unreachable
//      the pending file is left for `run` (kAttestationPending), but a --token token is never
//      written, so that enrollment fails.
// Every wait is on the injected Sleeper: when it stops (SIGTERM), the wait ends at once, an
// attestation in flight is cancelled, and Run fails with `interrupted`. Progress is logged
// (logger "enroll"); a failure is returned, its message the whole line for the caller to log.
// Never logs a token.
#pragma once

#include <expected>
#include <memory>
#include <string>

#include "agent/bootstrap/join_token_redeemer.h"
#include "agent/edge/node_token.h"
#include "agent/identity/node_key.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/random.h"
#include "common/stop.h"
#include "config/agent_config.h"

namespace edge::bootstrap {

// What enrollment asks of the controller. ControllerEnrollmentCalls() makes the gRPC calls;
// tests pass a fake.
class EnrollmentCalls {
 public:
  virtual ~EnrollmentCalls() = default;
  // ExchangeJoinToken and the keystore: JoinTokenRedeemer::Enroll waiting on `sleeper`.
  virtual Result<EnrollResult> Redeem(const EnrollRequest& request, Backoff& backoff,
                                      Sleeper& sleeper) = 0;
  // Loads the stored keystore and opens the mTLS channel to `address` for Attest.
  virtual Status OpenAttestation(const std::string& data_dir, const std::string& node_id,
                                 const std::string& address, Clock& clock) = 0;
  // One AttestNode → ChallengeNode; `proof` is a --token token, else certs/join_token.pending
  // is sent. kUnavailable when the controller could not be reached.
  virtual Result<agentedge::NodeToken> Attest(const identity::NodeKey& key,
                                              const std::string& proof) = 0;
  // Ends an Attest in flight at once; called from another thread.
  virtual void CancelAttest() = 0;
};

std::unique_ptr<EnrollmentCalls> ControllerEnrollmentCalls();

struct NodeEnrollmentRequest {
  std::string token;
  std::string node_id;
  // The config file the token is removed from; empty when it stays (a --token or *_file token).
  std::string config_path;
  bool from_cli = false;  // given with --token: never written anywhere
  bool attest = false;    // also the first edge attestation (`enroll`; `run` leaves it to the
                          // edge session)
};

enum class EnrollmentOutcome {
  kEnrolled,            // keystore stored (and the node key, with edge.enabled); no attestation
  kAttested,            // the first edge attestation succeeded too
  kAttestationPending,  // the controller stayed unreachable; `run` finishes from the pending file
};

struct EnrollmentFailure {
  Error error;               // error.message is the whole line to log
  bool usage = false;        // the request itself is wrong (malformed token, bad node id): exit 2
  bool interrupted = false;  // the Sleeper stopped (SIGTERM) during the enrollment
};

using EnrollmentResult = std::expected<EnrollmentOutcome, EnrollmentFailure>;

class NodeEnrollment {
 public:
  static constexpr int kAttestAttempts = 4;

  // Borrows everything; `cfg` gives data_dir, edge.enabled and the controller address/pin.
  NodeEnrollment(const config::AgentConfig& cfg, EnrollmentCalls& calls, Clock& clock,
                 Random& random, Sleeper& sleeper)
      : cfg_(cfg), calls_(calls), clock_(clock), random_(random), sleeper_(sleeper) {}

  EnrollmentResult Run(const NodeEnrollmentRequest& request);

 private:
  EnrollmentResult FirstAttestation(const std::string& node_id, const std::string& address,
                                    const std::string& cli_token);

  const config::AgentConfig& cfg_;
  EnrollmentCalls& calls_;
  Clock& clock_;
  Random& random_;
  Sleeper& sleeper_;
};

}  // namespace edge::bootstrap
