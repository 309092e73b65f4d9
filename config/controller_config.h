// The bundled controller's typed configuration (design.md §5a), loaded like the agent's
// with EDGE_CONTROLLER_<SECTION>_<KEY> environment overrides.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/agent_config.h"
#include "config/config_errors.h"
#include "config/yaml_reader.h"

namespace edge::config {

struct ControllerGrpc {
  std::string listen = "0.0.0.0:50056";
  // host:port written into join tokens (`cep`); default: listen's port on 127.0.0.1 when
  // listen is a wildcard address, else listen itself.
  std::string advertise;
  std::vector<std::string> server_names;  // extra SANs of the server certificate
  // The server's largest receive AND send message (a node's CommandResult, an InvokeTool).
  uint64_t max_message_bytes = 16ull << 20;
  // gRPC server reflection on the TLS port (grpcurl can list the services). It reveals
  // nothing a caller could not read in the published .proto files; turn it off to answer
  // unauthenticated peers with less.
  bool reflection = true;
};

// Bounds on what callers may cost the controller, above all the unauthenticated ones.
struct ControllerLimits {
  // ExchangeJoinToken per peer IP address: a token bucket of `burst` refilled at
  // `per_minute` (beyond: RESOURCE_EXHAUSTED).
  int64_t exchange_per_minute = 10;
  int64_t exchange_burst = 10;
  // AttestNode: per peer IP address and node id, and a looser ceiling per IP address alone.
  int64_t attest_per_minute = 5;
  int64_t attest_per_ip_per_minute = 60;
  // Calls and streams open at once from connections without a verified client certificate
  // (health, reflection, ExchangeJoinToken): in total and per peer IP address.
  int64_t unauthenticated_calls = 256;
  int64_t unauthenticated_calls_per_peer = 16;
  // Refused-call log lines per peer per minute; the rest are counted and summarised.
  int64_t refusal_log_lines_per_minute = 5;
};

struct ControllerConfig {
  std::string data_dir = "/var/lib/edge-controller";
  ControllerGrpc grpc;
  struct Admin {
    std::string socket;  // default: <data_dir>/admin.sock
  } admin;
  struct Cluster {
    int64_t heartbeat_interval_secs = 30;
    int64_t stale_threshold_secs = 90;
    // How long a node's previous key stays valid after RotateEdgeKey (the live stream
    // survives the swap).
    std::chrono::milliseconds rotation_overlap{60'000};
    // How long a node's stream waits for one slow operator client before that client lags and
    // its output is dropped instead (controller/output_pacer.h). Below the stale threshold and
    // the envelopes' ±60 s timestamp window: an event sealed before the wait is read after it.
    // Unset: 10 s, or half the stale threshold where that is shorter.
    std::chrono::milliseconds output_stall_limit{10'000};
  } cluster;
  struct Tokens {
    std::chrono::milliseconds default_ttl{3'600'000};
    // Lifetime of the NodeSecurityTokens issued by ChallengeNode and RotateEdgeKey.
    std::chrono::milliseconds node_token_ttl{3'600'000};
    std::string issuer = "edge-controller";
  } tokens;
  // HTTP/1.1 on http.listen: the worker control-plane endpoints (wire.md §4) and the
  // operator API (§5). Off when listen is empty.
  struct Http {
    std::string listen;
    // Other issuers whose ES256 user tokens (aud "edge-api") the operator API accepts:
    // iss → absolute path of the issuer's public key PEM (e.g. an OIDC provider's key).
    // Tokens of tokens.issuer are always verified with the controller's own key.
    std::map<std::string, std::string> trusted_issuers;
    // Tools an operator user of the REST API may not run: refused for REST fleet commands
    // (403 PERMISSION_DENIED) and, per wire.md §5.3, dropped from session prompts. The admin
    // socket (root-equivalent) may run any tool. An empty list denies nothing.
    std::vector<std::string> denied_tools{"exec", "file.write", "file.delete"};
    // Browser origins besides the controller's own (http(s)://<Host>) that may open session
    // WebSockets, e.g. "https://dashboard.example" (exact match).
    std::vector<std::string> allowed_origins;
    struct Tls {
      bool enabled = false;
      // Both empty: the controller CA's own server certificate (data_dir/ca/server.crt).
      std::string cert_file;
      std::string key_file;
      std::string client_ca_file;  // set: a client certificate is required and verified
    } tls;
    uint64_t max_body_bytes = 1ull << 20;
  } http;
  // The operator API's session limits (wire.md §5.2 edge_api.limits): what a node's sessions
  // run with until a PushConfig sets the node's own (SplitPushConfigDelta).
  struct EdgeApi {
    int64_t rate_limit = 20;             // control frames per second per session
    uint64_t max_frame_size = 1 << 20;   // bytes
    int64_t reattach_window_secs = 300;  // a session without a socket this long ends
    uint64_t max_buffer_size = 4 << 20;  // replay buffer bytes (each socket's queue: half)
    std::string buffer_overflow_policy = "drop_oldest";  // or "disconnect"
  } edge_api;
  // The control plane of workers (`edge-agent --listen`): their heartbeats, their leases and
  // the operator's calls to them (`edge-controller worker call`).
  struct Worker {
    // A worker is shown stale after two intervals without a heartbeat.
    std::chrono::milliseconds heartbeat_interval{30'000};
    std::chrono::milliseconds lease_ttl{300'000};        // when a call does not say
    std::chrono::milliseconds max_lease_ttl{3'600'000};  // the most a caller may ask
    // Lifetime of the aud=worker:rpc tokens minted for `worker call` (contract cap: 15 min).
    std::chrono::milliseconds call_token_ttl{300'000};
    WorkerAuth auth;
    // How `worker call` reaches a worker's https rpc_url.
    ClientTlsConfig rpc_client_tls;
  } worker;
  // The compute-member service (CloudEventsService.startStreaming) on the gRPC port.
  struct Compute {
    std::string listen;
    std::chrono::milliseconds dispatch_timeout{30'000};
    // A server keep-alive to every member this often; a member silent this long is ended
    // with DEADLINE_EXCEEDED.
    std::chrono::milliseconds keepalive_interval{10'000};
    std::chrono::milliseconds keepalive_timeout{30'000};
    // How long a dispatch waits for a member with a matching tag to join before it fails
    // with NO_COMPUTE_MEMBER_FOR_TAG (0 = fail at once).
    std::chrono::milliseconds member_wait{0};
  } compute;
  ControllerLimits limits;
  LogConfig log;
  std::string source_path;
};

using ControllerConfigResult = std::expected<ControllerConfig, ConfigErrors>;

ControllerConfigResult LoadControllerConfig(const std::string& path, const EnvLookup& env);
ControllerConfigResult LoadControllerConfigFromString(const std::string& text,
                                                      const std::string& source_name,
                                                      const EnvLookup& env);
std::string DumpRedacted(const ControllerConfig& config);

// A PushConfig delta taken apart: `edge_api.limits` are the controller's (its session relay
// enforces them, wire.md §5.2), everything else is the node's own config.
struct PushConfigParts {
  // Set when the delta has `edge_api`: `current` with the delta's keys applied, checked by
  // the same rules as the controller config's edge_api.limits.
  std::optional<ControllerConfig::EdgeApi> edge_api;
  // The rest for the node: the delta's own text when it has no `edge_api`, "" when nothing
  // else is left, else the remaining keys re-emitted as YAML.
  std::string node_delta;
};
// Errors name the key, its value and the rule (as a config file's would); a delta that is not
// YAML is an error too. The node part is not checked here (the agent config's rules are).
std::expected<PushConfigParts, ConfigErrors> SplitPushConfigDelta(
    const std::string& delta, const ControllerConfig::EdgeApi& current,
    const std::string& source_name);

}  // namespace edge::config
