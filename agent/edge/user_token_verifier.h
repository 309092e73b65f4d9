// UserTokenVerifier: proves who commands this node. Every InvokeTool carries an inner
// SealEnvelope whose user_security_token is an ES256 JWT minted by an issuer the operator
// trusts (config `security.user_token_issuers`: iss -> public key PEM file; the bundled
// controller writes its key to <controller data_dir>/ca/token.pub.pem). Verify checks, in
// this order: the issuer is configured, the signature, exp/nbf/iat (60 s leeway),
// aud = "edge-invoke", tid = the node's tenant, nid = this node, cid = the command id; and
// returns the subject and the `roles` claim (a security context may require a role).
//
// With no issuer configured (enabled() false) the door checks the token's shape only; the
// agent warns at start and `config check --production` fails. Immutable after Load;
// thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/error.h"

namespace edge::agentedge {

class UserTokenVerifier {
 public:
  inline static constexpr const char* kAudience = "edge-invoke";

  struct Verified {
    std::string issuer;
    std::string subject;
    std::vector<std::string> roles;
  };

  // Reads each issuer's public key. INVALID_ARGUMENT naming the issuer and the file.
  static Result<std::shared_ptr<const UserTokenVerifier>> Load(
      const std::map<std::string, std::string>& issuers);

  bool enabled() const { return !keys_.empty(); }

  // UNAUTHENTICATED naming what failed (unknown issuer, signature, expiry, a claim that does
  // not match, with the expected and the found value).
  Result<Verified> Verify(std::string_view token, std::string_view node_id, std::string_view tenant,
                          std::string_view command_id, Clock::WallTime now) const;

  ~UserTokenVerifier();

 private:
  struct Key;
  UserTokenVerifier() = default;
  std::map<std::string, std::shared_ptr<Key>> keys_;
};

}  // namespace edge::agentedge
