#include "agent/bootstrap/node_enrollment.h"

#include "agent/edge/enrollment_files.h"
#include "agent/edge/node_attestor.h"
#include "agent/edge/node_key_store.h"
#include "agent/identity/channel_factory.h"
#include "agent/identity/keystore_files.h"
#include "common/log.h"

namespace edge::bootstrap {
namespace {

using agentedge::EnrollmentFiles;

std::unexpected<EnrollmentFailure> Fail(std::string line, ErrorCode code = ErrorCode::kInternal,
                                        bool usage = false, bool interrupted = false) {
  return std::unexpected(EnrollmentFailure{
      .error = Error{code, std::move(line)}, .usage = usage, .interrupted = interrupted});
}

class ControllerCalls final : public EnrollmentCalls {
 public:
  Result<EnrollResult> Redeem(const EnrollRequest& request, Backoff& backoff,
                              Sleeper& sleeper) override {
    return JoinTokenRedeemer(backoff, sleeper).Enroll(request);
  }
  Status OpenAttestation(const std::string& data_dir, const std::string& node_id,
                         const std::string& address, Clock& clock) override {
    auto identity = identity::KeystoreFiles::Load(data_dir);
    if (!identity) return std::unexpected(identity.error());
    attestor_ = std::make_unique<agentedge::NodeAttestor>(
        identity::ChannelFactory(*identity).Mtls(address), node_id, data_dir, clock);
    return OkStatus();
  }
  Result<agentedge::NodeToken> Attest(const identity::NodeKey& key,
                                      const std::string& proof) override {
    return attestor_->Attest(key, proof);
  }
  void CancelAttest() override {
    if (attestor_) attestor_->CancelInFlight();
  }

 private:
  std::unique_ptr<agentedge::NodeAttestor> attestor_;
};

}  // namespace

std::unique_ptr<EnrollmentCalls> ControllerEnrollmentCalls() {
  return std::make_unique<ControllerCalls>();
}

EnrollmentResult NodeEnrollment::Run(const NodeEnrollmentRequest& req) {
  auto log = log::Get("enroll");
  const std::string& data_dir = cfg_.data_dir;
  // Written BEFORE the redeemer removes the token line from the config: the first
  // ChallengeNode needs it as proof. Only for a node that is not enrolled yet.
  bool wrote_pending = false;
  if (cfg_.edge.enabled && !req.from_cli && !identity::KeystoreFiles::Exists(data_dir)) {
    // The same local check the redeemer makes, first: nothing is written to a data_dir
    // that cannot take the keystore.
    if (auto st = identity::KeystoreFiles::CheckWritable(data_dir); !st) {
      return Fail("enrollment failed: data_dir is not writable: " + st.error().message,
                  st.error().code);
    }
    if (auto st = EnrollmentFiles::WritePendingToken(data_dir, req.token); !st) {
      return Fail("enrollment failed: " + st.error().message, st.error().code);
    }
    wrote_pending = true;
  }
  FullJitterBackoff backoff(std::chrono::seconds(1), std::chrono::seconds(30), random_);
  auto r = calls_.Redeem({.join_token = req.token,
                          .node_id = req.node_id,
                          .data_dir = data_dir,
                          .controller_address = cfg_.controller.address,
                          .ca_pin = cfg_.controller.ca_pin,
                          .config_path = req.config_path},
                         backoff, sleeper_);
  if (!r) {
    if (wrote_pending) (void)EnrollmentFiles::RemovePendingToken(data_dir);
    return Fail("enrollment failed: " + r.error().message, r.error().code,
                r.error().code == ErrorCode::kInvalidArgument,
                r.error().code == ErrorCode::kCancelled && sleeper_.Stopped());
  }
  // The redeemer recorded the address before the keystore; recorded again for a Redeem that
  // did not (the file is rewritten atomically with the same text).
  if (auto st = EnrollmentFiles::WriteControllerAddress(data_dir, r->controller_address); !st) {
    log->warn("enrolled, but the controller address could not be recorded: {}", st.error().message);
  }
  if (!cfg_.edge.enabled) return EnrollmentOutcome::kEnrolled;
  // The node key is created at enrollment.
  agentedge::NodeKeyStore keys(data_dir);
  bool created = false;
  if (auto key = keys.LoadOrCreate(&created); !key) {
    return Fail("enrolled, but the node key " + keys.KeyPath() +
                    " could not be created: " + key.error().message,
                key.error().code);
  }
  if (created) log->info("created the node key {}", keys.KeyPath());
  if (!req.attest) return EnrollmentOutcome::kEnrolled;
  return FirstAttestation(req.node_id, r->controller_address, req.from_cli ? req.token : "");
}

// The first edge attestation of a freshly enrolled node (brief B): AttestNode → ChallengeNode
// with the join token as bootstrap proof.
EnrollmentResult NodeEnrollment::FirstAttestation(const std::string& node_id,
                                                  const std::string& address,
                                                  const std::string& cli_token) {
  auto log = log::Get("enroll");
  const std::string& data_dir = cfg_.data_dir;
  if (auto st = calls_.OpenAttestation(data_dir, node_id, address, clock_); !st) {
    return Fail("edge enrollment: cannot load the keystore: " + st.error().message,
                st.error().code);
  }
  agentedge::NodeKeyStore keys(data_dir);
  auto key = keys.LoadOrCreate();
  if (!key) {
    return Fail("edge enrollment: node key " + keys.KeyPath() + ": " + key.error().message,
                key.error().code);
  }
  auto interrupted = [&]() -> EnrollmentResult {
    const std::string why = "edge enrollment interrupted (" + sleeper_.StopReason() + ")";
    if (!cli_token.empty()) {
      return Fail(why +
                      ": the keystore is stored, but a token given with --token is never "
                      "written, so the first attestation cannot be finished later; ask the "
                      "operator for a new token",
                  ErrorCode::kCancelled, false, true);
    }
    return Fail(why + ": the join token stays in " + EnrollmentFiles::PendingTokenPath(data_dir) +
                    " and `edge-agent run` finishes the enrollment",
                ErrorCode::kCancelled, false, true);
  };
  // A stop cancels the attestation in flight, so it ends at once too.
  auto cancel = sleeper_.OnStop([this] { calls_.CancelAttest(); });
  FullJitterBackoff backoff(std::chrono::seconds(1), std::chrono::seconds(10), random_);
  for (int attempt = 1;; ++attempt) {
    if (sleeper_.Stopped()) return interrupted();
    auto token = calls_.Attest(*key, cli_token);
    if (token) {
      log->info("edge enrollment complete: node {} attested with {} (tenant {})", node_id, address,
                token->tenant_id);
      return EnrollmentOutcome::kAttested;
    }
    if (sleeper_.Stopped()) return interrupted();
    if (token.error().code != ErrorCode::kUnavailable) {
      return Fail("edge enrollment failed: " + token.error().message, token.error().code);
    }
    if (attempt < kAttestAttempts) {
      auto delay = backoff.Next();
      log->warn("edge enrollment: {}; retrying in {} ms", token.error().message, delay.count());
      if (!sleeper_.SleepFor(delay)) return interrupted();
      continue;
    }
    if (!cli_token.empty()) {
      return Fail("edge enrollment failed: " + token.error().message +
                      " — the keystore is stored, but a token given with --token is never "
                      "written, so the first attestation cannot be finished later; ask the "
                      "operator for a new token",
                  token.error().code);
    }
    log->warn(
        "edge enrollment not finished: {}; the join token stays in {} and `edge-agent run` "
        "finishes the enrollment",
        token.error().message, EnrollmentFiles::PendingTokenPath(data_dir));
    return EnrollmentOutcome::kAttestationPending;
  }
}

}  // namespace edge::bootstrap
