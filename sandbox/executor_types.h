// The request and result of one invocation through the executor, shared by the executor,
// its interface for doors (ExecutorApi) and the doors' fakes. Plain values; the result
// round-trips through JSON for the idempotency store.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "sandbox/process_result.h"
#include "sandbox/sandbox_types.h"

namespace edge::sandbox {

// Output chunks of a running command, with back-pressure (see OutputSink).
using ChunkSink = OutputSink;

// The output policy of a door that streams a command's output as it runs (the edge door's
// CommandProgress, the worker door's exec_stream; issue 14): InvokeRequest::output_window_bytes
// and output_linger. While the door's sink is behind, reads are joined into chunks of up to
// kStreamingOutputWindowBytes, and a chunk smaller than that waits up to
// kStreamingOutputLinger for more even while the sink keeps up, so a per-chunk cost (the edge
// door's signed envelope, the worker door's NDJSON line with its post, write and the client's
// wake-up) is paid once per 0.5–1 MiB rather than once per 32 KiB pipe read, while a quiet
// command's output is at most 2 ms late. Chunks of a quarter window cost the edge stream's
// agent and controller 8–12 % more CPU per GiB (stop 32). The window also gives the command a
// 1 MiB stdout pipe (ProcessSpec::output_window_bytes).
inline constexpr size_t kStreamingOutputWindowBytes = 1024 * 1024;
inline constexpr std::chrono::microseconds kStreamingOutputLinger{2000};

struct InvokeRequest {
  std::string command_id;  // "" = no idempotency
  std::string tool;        // "exec", "file.read", ..., or a config tool
  nlohmann::json args = nlohmann::json::object();
  // "" = the config tool's own context, else "default". A config tool's own context always
  // binds; naming another one can only narrow it (SecurityContexts::Resolve).
  std::string security_context;
  // The caller's roles from its verified user token; nullopt = not verified (a context that
  // requires a role refuses then).
  std::optional<std::vector<std::string>> caller_roles;
  std::string sandbox_id;      // "" = the default workspace <sandbox_root>/_default/root
  std::optional<Lease> lease;  // checked (and accepted) before the work starts
  std::optional<std::chrono::milliseconds> timeout;  // overrides the tool's and exec's
  // Config tools only (exec takes its own in args): bytes written to the child's stdin
  // (nullopt = /dev/null) and variables added to its clean environment. A door passes what
  // its wire gives the tool this way (the compute door: the request JSON and the caller's
  // auth attributes), never through the argv template.
  std::optional<std::string> stdin_data;
  std::map<std::string, std::string> env;
  bool collect_output = true;  // put stdout/stderr (up to the cap) in the exec payload
  // With collect_output: keep only the last N bytes of each stream in the payload (0 = all,
  // up to the output cap), for a door that streams the output and returns just its tail.
  // When bytes were dropped the payload says "output_truncated": true.
  size_t collect_tail_bytes = 0;
  // Streamed output: read ahead and join into chunks of up to this many bytes while the
  // door's sink is behind (ProcessSpec::output_window_bytes; 0 = one read at a time, chunks of
  // at most OutputChunk::kMaxChunkBytes). For a door with a per-chunk cost to amortise.
  size_t output_window_bytes = 0;
  // With a window: how long a small chunk may wait for more output to join it
  // (ProcessSpec::output_linger; 0 = never).
  std::chrono::microseconds output_linger{0};
  // The door's own concurrency cap (edge.max_concurrent_commands, …), counted by the executor
  // per door name like every other cap: RESOURCE_EXHAUSTED naming `key` past `max_concurrent`.
  // No door = only the executor-wide and per-context caps.
  struct DoorLimit {
    std::string door;  // "edge", "worker", "compute"
    std::string key;   // the config key, for the message
    size_t max_concurrent = 0;
  };
  std::optional<DoorLimit> door_limit;
  // The largest result the door can carry (0 = no limit of its own): file.read refuses,
  // before reading, a range whose base64 payload would not fit (RESOURCE_EXHAUSTED naming the
  // size and the limit), so a door never has to drop an oversized answer.
  uint64_t max_result_bytes = 0;
};

enum class Outcome { kOk, kError, kTimedOut, kCancelled };
// "ok", "error", "timed_out", "cancelled".
std::string_view OutcomeName(Outcome outcome);

struct InvokeResult {
  std::string command_id;
  Outcome outcome = Outcome::kOk;
  int exit_code = 0;  // processes: the exit code, -1 when ended by a signal
  int signal = 0;
  // exec: {exit_code, signal, stdout, stderr}, plus output_capped: true, output_cap_bytes and
  // output_cap_key (the config key of the cap: sandbox.max_output_bytes or a security
  // context's limits.max_output_bytes) when the output cap (ProcessSpec::max_output_bytes)
  // dropped the rest of the output (set whether or not the output was collected). A session
  // is bound only by its context's cap, and ended past it. file/sysinfo: the data.
  nlohmann::json payload;
  Error error{ErrorCode::kOk, ""};  // set unless outcome is kOk
  std::chrono::milliseconds duration{0};
  std::chrono::milliseconds timeout{0};  // the time limit that applied; 0 = none known
  bool output_truncated = false;
  long peak_rss_kb = 0;
  std::string reason;     // why it was cancelled
  bool replayed = false;  // returned from the idempotency store, not run again
  // Refused because this command_id is running already (through any door): that run's one
  // result is the answer, this is not. Never stored.
  bool already_running = false;

  nlohmann::json ToJson() const;
  static Result<InvokeResult> FromJson(const nlohmann::json& j);
};

}  // namespace edge::sandbox
