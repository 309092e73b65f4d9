// The agent's typed configuration (design.md §5a; worker auth keys from wire.md §4.1),
// loaded from YAML with defaults, EDGE_AGENT_<SECTION>_<KEY> environment overrides and
// validation. Plain structs: nothing here exposes yaml-cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_errors.h"
#include "config/validate.h"
#include "config/yaml_reader.h"

namespace edge::config {

using std::chrono::milliseconds;

struct ControllerLink {
  std::string address;          // host:port; default: the join token's `cep` claim
  std::string join_token;       // secret; removed from the file after enrollment
  std::string join_token_file;  // or read from this file
  std::string ca_pin;           // "sha256:<hex>"; default: the join token's `cah` claim
};

struct ClusterConfig {
  int64_t heartbeat_interval_secs = 30;
};

struct EdgeConfig {
  bool enabled = true;
  int64_t max_concurrent_commands = 64;
  // The largest gRPC message either side of the edge stream takes (the controller's
  // grpc.max_message_bytes must be the same). Results are kept below it: a larger one is
  // answered with RESOURCE_EXHAUSTED naming this key, never sent.
  uint64_t max_message_bytes = 16ull << 20;
};

struct ComputeHandler {
  std::string tool;
  milliseconds timeout{30'000};
  std::string security_context;  // "" = the tool's own (or "default")
};

struct ComputeConfig {
  bool enabled = false;
  std::string address;
  std::string tls_mode = "plaintext";  // plaintext | tls | mtls
  std::string tls_ca_file;
  std::string token_file;
  std::string token;  // read from token_file (secret)
  std::vector<std::string> tags;
  std::string legal_entity_id;
  milliseconds keepalive_interval{10'000};
  // Processor and criteria calls running at once; one more is answered success:false,
  // retryable:true (the executor's per-door cap "compute").
  int64_t max_concurrent_calls = 16;
  std::map<std::string, ComputeHandler> processors;
  std::map<std::string, ComputeHandler> criteria;
};

struct WorkerTls {
  bool enabled = false;
  std::string server_cert_file;
  std::string server_key_file;
  std::string client_ca_file;
};

// How a client reaches an https:// server: the CA that verifies it ("" = the system's trust
// store), an optional client certificate (mTLS) and, for tests only, no verification at all.
struct ClientTlsConfig {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool insecure_skip_verify = false;
};

struct WorkerAuth {
  std::string worker_token;  // secret
  std::string worker_token_file;
  std::map<std::string, std::string> worker_tokens;  // worker id -> token (secrets)
  std::string worker_signing_key;                    // secret
  std::string worker_signing_key_file;
  std::vector<std::string> worker_signing_keys;  // secrets (rotation)
  std::vector<std::string> worker_revoked_token_ids;
};

// Reads a worker.auth map (the keys of wire.md §4.1) found at `path`: the agent's
// worker.auth and the controller's worker.auth are the same section.
void ReadWorkerAuth(const YAML::Node& auth, YamlReader& r, const std::string& path, WorkerAuth& a);
// Reads a client TLS map (ca_file, cert_file, key_file, insecure_skip_verify) at `path`.
void ReadClientTls(const YAML::Node& tls, YamlReader& r, const std::string& path,
                   ClientTlsConfig& t);
// Writes `key: {…}` for a client TLS map.
void EmitClientTls(YAML::Emitter& e, const char* key, const ClientTlsConfig& t);
// Writes `auth: {…}` with every secret shown as [REDACTED] (config dumps of both binaries).
void EmitWorkerAuthRedacted(YAML::Emitter& e, const WorkerAuth& a);

struct WorkerConfig {
  std::string listen_addr;
  std::string worker_id;  // default: node_id
  milliseconds heartbeat_interval{30'000};
  std::string control_plane_url;
  // The largest /rpc request body; a larger one is answered 413 before it is read.
  uint64_t max_body_bytes = 64ull << 20;
  // Commands running at once through /rpc (0 = only sandbox.max_concurrent applies).
  int64_t max_concurrent = 64;
  WorkerTls rpc_tls;
  // How the heartbeat and lease renewal reach an https:// control_plane_url.
  ClientTlsConfig control_plane_tls;
  WorkerAuth auth;
};

struct SandboxConfig {
  std::string root;                // default: <data_dir>/sandboxes
  std::string provider = "local";  // local | bwrap
  int64_t max_sandboxes = 10;
  // Invocations running at once through all doors together (each door has its own cap too).
  int64_t max_concurrent = 256;
  milliseconds default_timeout{60'000};
  uint64_t max_output_bytes = 64ull << 20;
  milliseconds kill_grace{10'000};
  bool bwrap_network = false;
  // Live sessions (session.start, wire.md §5.5) at once; each also counts as a command.
  int64_t max_sessions = 8;
  // Threads running the executor's event loop (commands' pipes, the worker RPC door's HTTP
  // server): 1-16. One by default (issue 14): with two, each pipe read's completion was handed
  // from the thread that polled to the other (a futex wake and a context switch per read).
  int64_t io_threads = 1;
};

struct ToolConfig {
  std::vector<std::string> command;  // argv template with {arg} placeholders
  milliseconds timeout{0};           // 0 = sandbox.default_timeout (interactive: no deadline)
  std::string security_context;      // empty = none (built-in rules only)
  // A session's process (wire.md §5.5): runs only through session.start, never by name;
  // advertised in the label agent.interactive_tools.
  bool interactive = false;
};

struct SecurityLimits {
  milliseconds timeout{0};        // 0 = no cap beyond the tool's
  uint64_t max_output_bytes = 0;  // 0 = sandbox.max_output_bytes
  int64_t max_concurrent = 0;     // 0 = unlimited
  int64_t max_processes = 0;      // 0 = unlimited
};

struct SecurityContextConfig {
  std::vector<std::string> allowed_tools;  // glob patterns
  std::string run_as;                      // user name; empty = the agent's user
  std::vector<std::string> mount_points;
  std::vector<std::string> require_roles;  // the caller's verified token must hold one
  SecurityLimits limits;
};

// Who may command this node: the inner user token of every InvokeTool is verified (ES256
// signature, `aud` = "edge-invoke", `tid` = the node's tenant, `nid` = this node, `cid` = the
// command, `exp`) with the public key configured for its `iss`. Without any issuer the token's
// shape only is checked: the agent warns at start and `config check --production` fails.
struct SecurityConfig {
  std::map<std::string, std::string> user_token_issuers;  // iss -> public key PEM file
};

struct LogConfig {
  std::string level = "info";
  std::string format = "text";
};

struct MetricsConfig {
  std::string listen;
};

struct AgentConfig {
  std::string node_id;  // default: the host name
  std::string data_dir = "/var/lib/edge-agent";
  ControllerLink controller;
  ClusterConfig cluster;
  EdgeConfig edge;
  ComputeConfig compute;
  WorkerConfig worker;
  SandboxConfig sandbox;
  std::map<std::string, ToolConfig> tools;
  std::map<std::string, SecurityContextConfig> security_contexts;
  SecurityConfig security;
  std::map<std::string, std::string> labels;
  LogConfig log;
  MetricsConfig metrics;

  // Where it came from (the file path, or "" for a string) and the merged YAML document it
  // was built from (after env overrides) — what ApplyDelta merges into.
  std::string source_path;
  std::string source_yaml;
  // Version of the last PushConfig delta applied ("" = as loaded).
  std::string delta_version;
};

using AgentConfigResult = std::expected<AgentConfig, ConfigErrors>;

// The built-in tools every agent offers (the same on every door).
const std::vector<std::string_view>& BuiltinTools();

// Loads `path`; every problem (syntax, type, range, unknown key, cross-reference, secret file)
// is collected into ConfigErrors. `env` supplies EDGE_AGENT_* overrides (may be empty).
AgentConfigResult LoadAgentConfig(const std::string& path, const EnvLookup& env);
AgentConfigResult LoadAgentConfigFromString(const std::string& text, const std::string& source_name,
                                            const EnvLookup& env);

// Merges a PushConfig delta (partial YAML or canonical JSON) over `base` and validates the
// result like a file; problems name "config delta" as their source.
AgentConfigResult ApplyDelta(const AgentConfig& base, std::string_view delta);

// The effective config as YAML, every secret shown as "[REDACTED]" (unset ones as "").
std::string DumpRedacted(const AgentConfig& config);

}  // namespace edge::config
