#include "agent/edge/node_token.h"

#include <algorithm>

#include "agent/identity/jwt.h"
#include "common/log.h"

namespace edge::agentedge {

Result<NodeToken> NodeToken::Parse(std::string_view token, std::string_view expected_node_id,
                                   Clock::WallTime received_at) {
  if (token.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "node_security_token: empty");
  }
  log::RegisterSecret(token);
  auto parts = identity::DecodeJwtUnverified(token);
  if (!parts) {
    return MakeError(ErrorCode::kInvalidArgument, "node_security_token: " + parts.error().message);
  }
  const auto& c = parts->claims;
  auto str = [&](const char* name) -> Result<std::string> {
    auto it = c.find(name);
    if (it == c.end() || !it->is_string() || it->get<std::string>().empty()) {
      return MakeError(ErrorCode::kInvalidArgument, std::string("node_security_token: claim '") +
                                                        name + "' is missing or not a string");
    }
    return it->get<std::string>();
  };
  NodeToken t;
  t.token = std::string(token);
  auto sub = str("sub");
  if (!sub) return std::unexpected(sub.error());
  if (*sub != expected_node_id) {
    return MakeError(ErrorCode::kInvalidArgument, "node_security_token: claim 'sub' is \"" + *sub +
                                                      "\", not this node \"" +
                                                      std::string(expected_node_id) + "\"");
  }
  t.node_id = *sub;
  auto tid = str("tid");
  if (!tid) return std::unexpected(tid.error());
  t.tenant_id = *tid;
  if (auto jti = c.find("jti"); jti != c.end() && jti->is_string()) t.jti = jti->get<std::string>();
  auto exp = c.find("exp");
  if (exp == c.end() || !exp->is_number_integer()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "node_security_token: claim 'exp' is missing or not an integer");
  }
  t.expires_at = Clock::WallTime(std::chrono::seconds(exp->get<int64_t>()));
  t.issued_at = received_at;
  if (auto iat = c.find("iat"); iat != c.end()) {
    if (!iat->is_number_integer()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "node_security_token: claim 'iat' is not an integer");
    }
    t.issued_at = Clock::WallTime(std::chrono::seconds(iat->get<int64_t>()));
  }
  if (t.expires_at <= t.issued_at) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "node_security_token: claim 'exp' is not after 'iat'");
  }
  return t;
}

std::chrono::milliseconds RenewalDelay(std::chrono::milliseconds lifetime, Random& random) {
  const int64_t total = std::max<int64_t>(lifetime.count(), 0);
  const int64_t low = total * 7 / 10;
  const int64_t high = total * 9 / 10;
  const int64_t span = std::max<int64_t>(high - low, 0);
  const int64_t delay = low + static_cast<int64_t>(random.Uniform(static_cast<uint64_t>(span) + 1));
  return std::chrono::milliseconds(std::max<int64_t>(delay, 1000));
}

}  // namespace edge::agentedge
