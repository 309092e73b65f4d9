// Fuzz target: the worker RPC server's credential check (wire.md §4.1) — the input is
// "<X-Worker-ID>\n<token>" — with a shared token, a per-worker token, a signing key, a
// rotation key and a revoked jti configured. Whatever passes must be for our worker id; what
// is refused never names a configured secret.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/identity/worker_authenticator.h"
#include "tests/support/manual_clock.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static edge::ManualClock clock(edge::Clock::WallTime(std::chrono::seconds(1'700'000'000)));
  static const edge::identity::WorkerAuthenticator auth = [] {
    edge::config::WorkerAuth a;
    a.worker_token = "shared-fuzz-token";
    a.worker_tokens["worker-b"] = "per-worker-b";
    a.worker_signing_key = "fuzz-key";
    a.worker_signing_keys = {"rotated-key"};
    a.worker_revoked_token_ids = {"revoked"};
    return edge::identity::WorkerAuthenticator("worker-a", a, clock);
  }();
  std::string s(reinterpret_cast<const char*>(data), size);
  const size_t nl = s.find('\n');
  const std::string id = nl == std::string::npos ? "worker-a" : s.substr(0, nl);
  const std::string token = nl == std::string::npos ? s : s.substr(nl + 1);
  auto r = auth.Check(id, token, "worker:rpc");
  if (r && id != "worker-a") __builtin_trap();
  if (r && r->kind == "shared" && token != "shared-fuzz-token") __builtin_trap();
  // A refusal never names a configured secret the caller did not send itself. The id it
  // chose is quoted escaped, and an escape can spell a secret ("\\xef" + "uzz-key"), so the
  // byte search is the oracle only for plain printable input, which escaping leaves as it is.
  // That a refusal never echoes the presented token is asserted by the unit tests with known
  // tokens (arbitrary bytes can spell the message's own words).
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    return c == '\n' || (c >= 0x20 && c < 0x7f && c != '\\' && c != '"');
  });
  if (!r && plain) {
    const std::string& m = r.error().message;
    for (const char* secret : {"shared-fuzz-token", "per-worker-b", "fuzz-key", "rotated-key"}) {
      if (m.find(secret) != std::string::npos && s.find(secret) == std::string::npos) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
