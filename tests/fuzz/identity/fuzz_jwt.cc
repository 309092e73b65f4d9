// Fuzz target: compact JWTs — the agent's unverified decode of its join token (cep/cah), the
// join-token claims reader, and full ES256 verification (which must refuse every input that
// was not signed by the key, i.e. every fuzz input).
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/identity/join_token_claims.h"
#include "agent/identity/jwt.h"

namespace {
const edge::identity::PkeyPtr& PublicKey() {
  static const edge::identity::PkeyPtr key = [] {
    auto k = edge::identity::EcSigningKey::Generate();
    return std::move(*edge::identity::PublicKeyFromPem(*k->PublicPem()));
  }();
  return key;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  (void)edge::identity::DecodeJwtUnverified(s);
  (void)edge::identity::JoinTokenClaims::FromTokenUnverified(s);
  const auto now = edge::Clock::WallTime(std::chrono::seconds(1'700'000'000));
  auto v = edge::identity::VerifyJwtEs256(s, PublicKey().get(), now,
                                          {.audience = "edge-enrollment", .issuer = "ctl"});
  if (v) __builtin_trap();  // a forged token verified
  return 0;
}
