// Fuzz target: the worker RPC request envelope (wire.md §4) as it arrives in a POST /rpc body,
// and the RFC 3339 times inside it. Whatever parses must have a method, and a lease's
// expiry must format back to a time that parses again.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/worker_rpc/rpc_envelope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  auto r = edge::workerrpc::ParseRpcRequest(s);
  if (r) {
    if (r->method.empty() || !r->params.is_object()) __builtin_trap();
    // (Away from the ends of the accepted years, where an offset moves the UTC year out.)
    const auto secs =
        std::chrono::duration_cast<std::chrono::seconds>(
            r->lease ? r->lease->expires_at.time_since_epoch() : std::chrono::seconds(0))
            .count();
    if (r->lease && secs > 86400 * 366 && secs < 7'226'582'400) {
      auto again =
          edge::workerrpc::ParseRfc3339(edge::workerrpc::FormatRfc3339(r->lease->expires_at));
      if (!again) __builtin_trap();
    }
    (void)edge::workerrpc::ErrorEnvelope(r->id, r->worker_id, {edge::ErrorCode::kInternal, "x"})
        .dump();
  }
  (void)edge::workerrpc::ParseRfc3339(s);
  return 0;
}
