// The two small files edge enrollment keeps next to the keystore (design.md §5, brief B):
//  - certs/join_token.pending (0600): the join token, kept from the enrollment step (written
//    BEFORE the token line is removed from the config) until the first successful
//    ChallengeNode, which needs it as bootstrap_proof.enrollment_token; then deleted.
//  - certs/controller.address (0644): the controller's host:port as enrollment used it (the
//    token's `cep` claim when the config has no controller.address), so later runs can reach
//    the controller after the token is gone from the config.
// Stateless helpers over `data_dir`; every write is atomic.
#pragma once

#include <optional>
#include <string>

#include "common/error.h"
#include "config/agent_config.h"

namespace edge::agentedge {

class EnrollmentFiles {
 public:
  static std::string PendingTokenPath(const std::string& data_dir);
  static std::string ControllerAddressPath(const std::string& data_dir);

  static Status WritePendingToken(const std::string& data_dir, const std::string& token);
  // The pending token, nullopt when there is none. Errors other than "missing" are returned.
  static Result<std::optional<std::string>> ReadPendingToken(const std::string& data_dir);
  static Status RemovePendingToken(const std::string& data_dir);

  static Status WriteControllerAddress(const std::string& data_dir, const std::string& address);
  static std::optional<std::string> ReadControllerAddress(const std::string& data_dir);

  // Where the edge stream connects: controller.address when set, else the address recorded at
  // enrollment. INVALID_ARGUMENT naming both sources when neither has one.
  static Result<std::string> ResolveControllerAddress(const config::AgentConfig& config);
};

}  // namespace edge::agentedge
