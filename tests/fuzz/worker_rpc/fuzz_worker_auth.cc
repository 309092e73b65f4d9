// Fuzz target: the worker RPC server's credential check (wire.md §4.1) — the input is
// "<X-Worker-ID>\n<token>" — with a shared token, a per-worker token, a signing key, a
// rotation key and a revoked jti configured. Whatever passes must be for our worker id.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/worker_rpc/worker_auth.h"
#include "tests/support/manual_clock.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static edge::ManualClock clock(edge::Clock::WallTime(std::chrono::seconds(1'700'000'000)));
  static const edge::workerrpc::WorkerAuthenticator auth = [] {
    edge::config::WorkerAuth a;
    a.worker_token = "shared-fuzz-token";
    a.worker_tokens["worker-b"] = "per-worker-b";
    a.worker_signing_key = "fuzz-key";
    a.worker_signing_keys = {"rotated-key"};
    a.worker_revoked_token_ids = {"revoked"};
    return edge::workerrpc::WorkerAuthenticator("worker-a", a, clock);
  }();
  std::string s(reinterpret_cast<const char*>(data), size);
  const size_t nl = s.find('\n');
  const std::string id = nl == std::string::npos ? "worker-a" : s.substr(0, nl);
  const std::string token = nl == std::string::npos ? s : s.substr(nl + 1);
  auto r = auth.Check(id, token, "worker:rpc");
  if (r && id != "worker-a") __builtin_trap();
  if (r && r->kind == "shared" && token != "shared-fuzz-token") __builtin_trap();
  if (!r && r.error().message.find("shared-fuzz-token") != std::string::npos) __builtin_trap();
  return 0;
}
