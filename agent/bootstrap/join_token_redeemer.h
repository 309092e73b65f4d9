// First-run enrollment (wire.md §1, contract 001): redeems a join token with the controller's
// BootstrapService.ExchangeJoinToken and stores the node's identity under data_dir/certs/,
// then removes the token from the config file it came from. Everything that can be checked
// is checked before the single-use token is spent; only UNAVAILABLE / DEADLINE_EXCEEDED are
// retried (bounded, full-jitter backoff); a stopped Sleeper (SIGTERM) ends the wait between
// attempts at once and the enrollment fails with kCancelled, the token unspent. Owns nothing
// beyond the call.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "common/backoff.h"
#include "common/error.h"
#include "common/stop.h"

namespace me::prexorjustin::prexorcloud::protocol {
class ExchangeJoinTokenResponse;
}

namespace edge::bootstrap {

struct EnrollRequest {
  std::string join_token;
  std::string node_id;
  std::string data_dir;
  std::string controller_address;  // empty = the token's `cep` claim
  std::string ca_pin;              // empty = the token's `cah` claim
  // The config file the token was read from, to remove it afterwards; empty when the token
  // came from the command line (it is then never written anywhere).
  std::string config_path;
};

struct EnrollResult {
  std::string controller_address;
  std::string ca_pin;  // pin of the CA now stored in certs/ca.pem
  bool token_removed_from_config = false;
};

class JoinTokenRedeemer {
 public:
  using Sleep = std::function<void(std::chrono::milliseconds)>;
  // `max_attempts` bounds the retries of transient failures. `sleep` cannot be interrupted.
  JoinTokenRedeemer(Backoff& backoff, Sleep sleep, int max_attempts = 6,
                    std::chrono::milliseconds rpc_timeout = std::chrono::seconds(15))
      : backoff_(backoff),
        sleep_([sleep = std::move(sleep)](std::chrono::milliseconds d) {
          sleep(d);
          return true;
        }),
        max_attempts_(max_attempts),
        rpc_timeout_(rpc_timeout) {}
  // Waits between attempts with `sleeper` (borrowed): when it stops, Enroll returns kCancelled
  // at once. A call in flight is not cancelled (its answer may hold the spent token's
  // identity); it ends by its deadline.
  JoinTokenRedeemer(Backoff& backoff, Sleeper& sleeper, int max_attempts = 6,
                    std::chrono::milliseconds rpc_timeout = std::chrono::seconds(15))
      : backoff_(backoff),
        sleep_([&sleeper](std::chrono::milliseconds d) { return sleeper.SleepFor(d); }),
        stop_reason_([&sleeper] { return sleeper.StopReason(); }),
        max_attempts_(max_attempts),
        rpc_timeout_(rpc_timeout) {}

  // Errors carry one message naming the cause and the next step for the operator.
  Result<EnrollResult> Enroll(const EnrollRequest& request);

  // certs/exchange.pending (0600, beside the keystore it becomes): the controller's answer,
  // kept from the moment it arrives until the keystore is stored, so an enrollment killed
  // in between resumes from it (the token is spent by then). Removed once the keystore is
  // stored, or when it does not parse or does not pass the checks of a fresh answer.
  static std::string SavedExchangePath(const std::string& data_dir);

 private:
  using ExchangeResponse = me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse;
  // The phases of Enroll, in order: what to contact, what must hold locally before the token
  // is spent, the exchange with its retries, and the checks of the answer.
  Result<EnrollResult> Target(const EnrollRequest& req) const;
  Status CheckLocal(const EnrollRequest& req) const;
  Result<ExchangeResponse> Exchange(const EnrollRequest& req, const EnrollResult& target);
  static Result<ExchangeResponse> LoadSavedExchange(const std::string& path);
  static Result<std::string> CheckResponse(const EnrollRequest& req, const EnrollResult& target,
                                           const ExchangeResponse& resp);

  Backoff& backoff_;
  std::function<bool(std::chrono::milliseconds)> sleep_;  // false: stopped
  std::function<std::string()> stop_reason_;
  int max_attempts_;
  std::chrono::milliseconds rpc_timeout_;
};

}  // namespace edge::bootstrap
