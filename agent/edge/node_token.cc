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
  // Seconds since the epoch, within what the nanosecond clock can hold (±9e9 s is past the
  // year 2255): anything else would overflow converting it.
  constexpr int64_t kMaxEpochSeconds = 9'000'000'000;
  auto epoch_seconds = [&c](const char* name, bool required) -> Result<std::optional<int64_t>> {
    auto it = c.find(name);
    if (it == c.end()) {
      if (!required) return std::optional<int64_t>();
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("node_security_token: claim '") + name + "' is missing");
    }
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(kMaxEpochSeconds)) {
      return MakeError(ErrorCode::kInvalidArgument, std::string("node_security_token: claim '") +
                                                        name + "' " + it->dump() +
                                                        " is out of range (seconds since 1970)");
    }
    if (!it->is_number_integer()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("node_security_token: claim '") + name + "' is not an integer");
    }
    const int64_t v = it->get<int64_t>();
    if (v > kMaxEpochSeconds || v < -kMaxEpochSeconds) {
      return MakeError(ErrorCode::kInvalidArgument, std::string("node_security_token: claim '") +
                                                        name + "' " + std::to_string(v) +
                                                        " is out of range (seconds since 1970)");
    }
    return std::optional<int64_t>(v);
  };
  auto exp = epoch_seconds("exp", true);
  if (!exp) return std::unexpected(exp.error());
  t.expires_at = Clock::WallTime(std::chrono::seconds(**exp));
  t.issued_at = received_at;
  auto iat = epoch_seconds("iat", false);
  if (!iat) return std::unexpected(iat.error());
  if (*iat) t.issued_at = Clock::WallTime(std::chrono::seconds(**iat));
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
