// Fuzz target: worker token verification (wire.md §4.1) with a fixed key, worker id, audience,
// revocation list and clock; and the unverified decode used by `token inspect`. Whatever
// verifies must carry our worker id, be unexpired and unrevoked.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/identity/worker_token.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  static const edge::identity::WorkerTokenVerifyOptions opts = [] {
    edge::identity::WorkerTokenVerifyOptions o;
    o.worker_id = "worker-a";
    o.audience = "worker:rpc";
    o.keys = {"rotated-key", "fuzz-key"};
    o.revoked_jtis = {"revoked"};
    return o;
  }();
  const auto now = edge::Clock::WallTime(std::chrono::seconds(1'700'000'000));
  (void)edge::identity::WorkerToken::DecodeUnverified(s);
  auto v = edge::identity::WorkerToken::Verify(s, opts, now);
  if (v && (v->worker_id != "worker-a" || v->exp <= 1'700'000'000 || v->jti == "revoked")) {
    __builtin_trap();
  }
  return 0;
}
