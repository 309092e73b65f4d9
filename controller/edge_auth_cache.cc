#include "controller/edge_auth_cache.h"

#include "common/secure_compare.h"

namespace edge::controller {

const EdgeNodeRecord* EdgeAuthCache::Keys(std::optional<uint64_t> generation) const {
  if (!generation || keys_generation_ != generation) return nullptr;
  return &keys_;
}

const EdgeNodeRecord& EdgeAuthCache::RememberKeys(std::optional<uint64_t> generation,
                                                  const EdgeNodeRecord& node) {
  keys_ = EdgeNodeRecord{};
  keys_.node_id = node.node_id;
  keys_.public_key = node.public_key;
  keys_.prev_public_key = node.prev_public_key;
  keys_.prev_key_until_ms = node.prev_key_until_ms;
  keys_generation_ = generation;
  return keys_;
}

bool EdgeAuthCache::TokenStillValid(std::optional<uint64_t> generation, std::string_view token,
                                    TokenUse use, int64_t now_ms) const {
  if (!generation || token_generation_ != generation) return false;
  if (token_use_ == TokenUse::kOpenStream && use == TokenUse::kNewSession) return false;
  if (now_ms < token_from_ms_ || now_ms >= token_until_ms_) return false;
  return ConstantTimeEquals(token, token_);
}

void EdgeAuthCache::RememberToken(std::optional<uint64_t> generation, std::string_view token,
                                  TokenUse use, int64_t now_ms, const NodeTokenClaims& claims) {
  token_generation_ = generation;
  token_.assign(token);
  token_use_ = use;
  token_from_ms_ = now_ms;
  token_until_ms_ = claims.accepted_until_ms;
}

}  // namespace edge::controller
