#include "config/agent_config.h"

#include <unistd.h>

#include <algorithm>

#include "common/atomic_file.h"
#include "common/log.h"
#include "config/duration.h"

namespace edge::config {
namespace {

using namespace std::chrono_literals;
constexpr milliseconds kMaxTimeout = 24h;

const std::vector<std::string> kScalarPaths = {
    "node_id",
    "data_dir",
    "controller.address",
    "controller.join_token",
    "controller.join_token_file",
    "controller.ca_pin",
    "cluster.heartbeat_interval_secs",
    "edge.enabled",
    "edge.max_concurrent_commands",
    "edge.max_message_bytes",
    "compute.enabled",
    "compute.address",
    "compute.tls.mode",
    "compute.tls.ca_file",
    "compute.token_file",
    "compute.legal_entity_id",
    "compute.keepalive_interval",
    "compute.max_concurrent_calls",
    "worker.listen_addr",
    "worker.worker_id",
    "worker.heartbeat_interval",
    "worker.control_plane_url",
    "worker.max_body_bytes",
    "worker.max_concurrent",
    "worker.rpc_tls.enabled",
    "worker.rpc_tls.server_cert_file",
    "worker.rpc_tls.server_key_file",
    "worker.rpc_tls.client_ca_file",
    "worker.auth.worker_token",
    "worker.auth.worker_token_file",
    "worker.auth.worker_signing_key",
    "worker.auth.worker_signing_key_file",
    "sandbox.root",
    "sandbox.provider",
    "sandbox.max_sandboxes",
    "sandbox.max_concurrent",
    "sandbox.default_timeout",
    "sandbox.max_output_bytes",
    "sandbox.kill_grace",
    "sandbox.bwrap_network",
    "sandbox.max_sessions",
    "sandbox.io_threads",
    "log.level",
    "log.format",
    "metrics.listen",
};

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  std::string h(buf);
  // Keep only the first label and characters a node id allows.
  h = h.substr(0, h.find('.'));
  h.erase(std::remove_if(h.begin(), h.end(),
                         [](char c) {
                           return !std::isalnum(static_cast<unsigned char>(c)) && c != '_' &&
                                  c != '-';
                         }),
          h.end());
  return h.empty() ? "localhost" : h.substr(0, 64);
}

void CheckHostPort(YamlReader& r, const YAML::Node& map, std::string_view key,
                   const std::string& path, const std::string& value, bool listen) {
  if (value.empty() || IsHostPort(value, listen)) return;
  r.Issue(map[std::string(key)], path, value,
          listen ? "must be host:port (host may be empty, port 0-65535)"
                 : "must be host:port with a port between 1 and 65535");
}

void CheckOneOf(YamlReader& r, const YAML::Node& map, std::string_view key, const std::string& path,
                const std::string& value, const std::vector<std::string_view>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  std::string list;
  for (auto a : allowed)
    list += (list.empty() ? "" : ", ") + std::string(a);
  r.Issue(map[std::string(key)], path, value, "must be one of " + list);
}

// A secret given as a value or as a file, not both; the file is read now.
void Secret(YamlReader& r, const YAML::Node& map, std::string_view key, std::string_view file_key,
            const std::string& path, std::string& value, std::string& file) {
  r.String(map, key, Join(path, key), value);
  r.String(map, file_key, Join(path, file_key), file);
  if (!value.empty() && !file.empty()) {
    r.Issue(map[std::string(file_key)], Join(path, file_key), file,
            "set either " + std::string(key) + " or " + std::string(file_key) + ", not both");
    return;
  }
  if (!file.empty()) {
    if (auto s = ReadSecretFile(r, map[std::string(file_key)], Join(path, file_key), file)) {
      value = *s;
    }
  }
  if (!value.empty()) log::RegisterSecret(value);
}

ComputeHandler ReadHandler(YamlReader& r, const YAML::Node& n, const std::string& path) {
  ComputeHandler h;
  if (!r.Map(n, path, {"tool", "timeout", "security_context"})) {
    if (!n.IsDefined() || n.IsNull()) r.Issue(n, path, "", "must be a map with a tool");
    return h;
  }
  r.String(n, "tool", Join(path, "tool"), h.tool);
  r.Duration(n, "timeout", Join(path, "timeout"), h.timeout, 1ms, kMaxTimeout);
  r.String(n, "security_context", Join(path, "security_context"), h.security_context);
  if (h.tool.empty()) r.Issue(n, Join(path, "tool"), "", "is required");
  return h;
}

void ReadHandlers(YamlReader& r, const YAML::Node& map, std::string_view key,
                  const std::string& path, std::map<std::string, ComputeHandler>& out) {
  YAML::Node n = map.IsMap() ? map[std::string(key)] : YAML::Node();
  if (!n.IsDefined() || n.IsNull()) return;
  if (!n.IsMap()) {
    r.Issue(n, path, "", "must be a map of name -> {tool, timeout}");
    return;
  }
  for (const auto& kv : n) {
    out[kv.first.Scalar()] = ReadHandler(r, kv.second, Join(path, kv.first.Scalar()));
  }
}

// controller: where to enroll and connect, the join token, the CA pin.
void ReadController(const YAML::Node& ctl, YamlReader& r, AgentConfig& c) {
  if (!r.Map(ctl, "controller", {"address", "join_token", "join_token_file", "ca_pin"})) return;
  r.String(ctl, "address", "controller.address", c.controller.address);
  CheckHostPort(r, ctl, "address", "controller.address", c.controller.address, false);
  Secret(r, ctl, "join_token", "join_token_file", "controller", c.controller.join_token,
         c.controller.join_token_file);
  r.String(ctl, "ca_pin", "controller.ca_pin", c.controller.ca_pin);
  if (!c.controller.ca_pin.empty() && !IsCaPin(c.controller.ca_pin)) {
    r.Issue(ctl["ca_pin"], "controller.ca_pin", c.controller.ca_pin,
            "must be sha256: followed by 64 hex digits");
  }
}

// compute: the compute-member stream (CloudEventsService) and its handlers.
void ReadCompute(const YAML::Node& compute, YamlReader& r, ComputeConfig& cc) {
  if (!r.Map(compute, "compute",
             {"enabled", "address", "tls", "token_file", "tags", "legal_entity_id",
              "keepalive_interval", "max_concurrent_calls", "processors", "criteria"})) {
    return;
  }
  r.Bool(compute, "enabled", "compute.enabled", cc.enabled);
  r.String(compute, "address", "compute.address", cc.address);
  CheckHostPort(r, compute, "address", "compute.address", cc.address, false);
  YAML::Node tls = compute["tls"];
  if (r.Map(tls, "compute.tls", {"mode", "ca_file"})) {
    r.String(tls, "mode", "compute.tls.mode", cc.tls_mode);
    CheckOneOf(r, tls, "mode", "compute.tls.mode", cc.tls_mode, {"plaintext", "tls", "mtls"});
    r.String(tls, "ca_file", "compute.tls.ca_file", cc.tls_ca_file);
  }
  r.String(compute, "token_file", "compute.token_file", cc.token_file);
  r.StringList(compute, "tags", "compute.tags", cc.tags);
  r.String(compute, "legal_entity_id", "compute.legal_entity_id", cc.legal_entity_id);
  r.Duration(compute, "keepalive_interval", "compute.keepalive_interval", cc.keepalive_interval, 1s,
             1h);
  r.Int(compute, "max_concurrent_calls", "compute.max_concurrent_calls", cc.max_concurrent_calls, 1,
        10000);
  ReadHandlers(r, compute, "processors", "compute.processors", cc.processors);
  ReadHandlers(r, compute, "criteria", "compute.criteria", cc.criteria);
  if (cc.enabled) {
    if (cc.address.empty())
      r.Issue(compute, "compute.address", "", "is required when compute.enabled is true");
    if (cc.token_file.empty()) {
      r.Issue(compute, "compute.token_file", "", "is required when compute.enabled is true");
    } else if (auto t =
                   ReadSecretFile(r, compute["token_file"], "compute.token_file", cc.token_file)) {
      cc.token = *t;
      log::RegisterSecret(cc.token);
    }
  }
}

// worker: the worker RPC server, its TLS, its auth, the control-plane heartbeat.
void ReadWorker(const YAML::Node& worker, YamlReader& r, WorkerConfig& w) {
  if (!r.Map(worker, "worker",
             {"listen_addr", "worker_id", "heartbeat_interval", "control_plane_url", "rpc_tls",
              "auth", "max_body_bytes", "control_plane_tls", "max_concurrent"})) {
    return;
  }
  r.String(worker, "listen_addr", "worker.listen_addr", w.listen_addr);
  CheckHostPort(r, worker, "listen_addr", "worker.listen_addr", w.listen_addr, true);
  r.String(worker, "worker_id", "worker.worker_id", w.worker_id);
  if (!w.worker_id.empty() && !IsValidNodeId(w.worker_id)) {
    r.Issue(worker["worker_id"], "worker.worker_id", w.worker_id,
            "must match [A-Za-z0-9._-]{1,64}");
  }
  r.Duration(worker, "heartbeat_interval", "worker.heartbeat_interval", w.heartbeat_interval, 1s,
             1h);
  r.String(worker, "control_plane_url", "worker.control_plane_url", w.control_plane_url);
  r.Size(worker, "max_body_bytes", "worker.max_body_bytes", w.max_body_bytes, 1ull << 10,
         4ull << 30);
  r.Int(worker, "max_concurrent", "worker.max_concurrent", w.max_concurrent, 0, 100000);
  if (!w.control_plane_url.empty() && w.control_plane_url.rfind("http://", 0) != 0 &&
      w.control_plane_url.rfind("https://", 0) != 0) {
    r.Issue(worker["control_plane_url"], "worker.control_plane_url", w.control_plane_url,
            "must start with http:// or https://");
  }
  YAML::Node tls = worker["rpc_tls"];
  if (r.Map(tls, "worker.rpc_tls",
            {"enabled", "server_cert_file", "server_key_file", "client_ca_file"})) {
    r.Bool(tls, "enabled", "worker.rpc_tls.enabled", w.rpc_tls.enabled);
    r.String(tls, "server_cert_file", "worker.rpc_tls.server_cert_file",
             w.rpc_tls.server_cert_file);
    r.String(tls, "server_key_file", "worker.rpc_tls.server_key_file", w.rpc_tls.server_key_file);
    r.String(tls, "client_ca_file", "worker.rpc_tls.client_ca_file", w.rpc_tls.client_ca_file);
    if (w.rpc_tls.enabled &&
        (w.rpc_tls.server_cert_file.empty() || w.rpc_tls.server_key_file.empty())) {
      r.Issue(tls, "worker.rpc_tls", "",
              "server_cert_file and server_key_file are required when enabled");
    }
  }
  ReadWorkerAuth(worker["auth"], r, "worker.auth", w.auth);
  ReadClientTls(worker["control_plane_tls"], r, "worker.control_plane_tls", w.control_plane_tls);
}

}  // namespace

void ReadClientTls(const YAML::Node& tls, YamlReader& r, const std::string& path,
                   ClientTlsConfig& t) {
  if (!r.Map(tls, path, {"ca_file", "cert_file", "key_file", "insecure_skip_verify"})) return;
  r.String(tls, "ca_file", path + ".ca_file", t.ca_file);
  r.String(tls, "cert_file", path + ".cert_file", t.cert_file);
  r.String(tls, "key_file", path + ".key_file", t.key_file);
  r.Bool(tls, "insecure_skip_verify", path + ".insecure_skip_verify", t.insecure_skip_verify);
  if (t.cert_file.empty() != t.key_file.empty()) {
    r.Issue(tls, path, "", "cert_file and key_file go together");
  }
}

void ReadWorkerAuth(const YAML::Node& auth, YamlReader& r, const std::string& path, WorkerAuth& a) {
  if (r.Map(auth, path,
            {"worker_token", "worker_token_file", "worker_tokens", "worker_signing_key",
             "worker_signing_key_file", "worker_signing_keys", "worker_revoked_token_ids"})) {
    Secret(r, auth, "worker_token", "worker_token_file", path, a.worker_token, a.worker_token_file);
    Secret(r, auth, "worker_signing_key", "worker_signing_key_file", path, a.worker_signing_key,
           a.worker_signing_key_file);
    r.StringMap(auth, "worker_tokens", path + ".worker_tokens", a.worker_tokens);
    r.StringList(auth, "worker_signing_keys", path + ".worker_signing_keys", a.worker_signing_keys);
    r.StringList(auth, "worker_revoked_token_ids", path + ".worker_revoked_token_ids",
                 a.worker_revoked_token_ids);
    for (const auto& [id, t] : a.worker_tokens)
      log::RegisterSecret(t);
    for (const auto& k : a.worker_signing_keys)
      log::RegisterSecret(k);
  }
}

namespace {

// sandbox: the executor's provider, caps, timeouts and output limit.
void ReadSandbox(const YAML::Node& sandbox, YamlReader& r, SandboxConfig& s) {
  if (!r.Map(sandbox, "sandbox",
             {"root", "provider", "max_sandboxes", "max_concurrent", "default_timeout",
              "max_output_bytes", "kill_grace", "bwrap_network", "max_sessions", "io_threads"})) {
    return;
  }
  r.String(sandbox, "root", "sandbox.root", s.root);
  r.String(sandbox, "provider", "sandbox.provider", s.provider);
  CheckOneOf(r, sandbox, "provider", "sandbox.provider", s.provider, {"local", "bwrap"});
  r.Int(sandbox, "max_sandboxes", "sandbox.max_sandboxes", s.max_sandboxes, 1, 10000);
  r.Int(sandbox, "max_concurrent", "sandbox.max_concurrent", s.max_concurrent, 1, 100000);
  r.Duration(sandbox, "default_timeout", "sandbox.default_timeout", s.default_timeout, 1s,
             kMaxTimeout);
  r.Size(sandbox, "max_output_bytes", "sandbox.max_output_bytes", s.max_output_bytes, 1ull << 10,
         16ull << 30);
  r.Duration(sandbox, "kill_grace", "sandbox.kill_grace", s.kill_grace, 0ms, 10min);
  r.Bool(sandbox, "bwrap_network", "sandbox.bwrap_network", s.bwrap_network);
  r.Int(sandbox, "max_sessions", "sandbox.max_sessions", s.max_sessions, 1, 1000);
  r.Int(sandbox, "io_threads", "sandbox.io_threads", s.io_threads, 1, 16);
}

// security_contexts: name -> allowed tools, run_as, mounts, required roles, limits.
void ReadSecurityContexts(const YAML::Node& contexts, YamlReader& r,
                          std::map<std::string, SecurityContextConfig>& out) {
  if (!contexts.IsDefined() || contexts.IsNull()) return;
  if (!contexts.IsMap()) {
    r.Issue(contexts, "security_contexts", "", "must be a map of name -> security context");
    return;
  }
  for (const auto& kv : contexts) {
    const std::string name = kv.first.Scalar();
    const std::string path = "security_contexts." + name;
    SecurityContextConfig sc;
    if (r.Map(kv.second, path,
              {"allowed_tools", "run_as", "mount_points", "require_roles", "limits"})) {
      r.StringList(kv.second, "allowed_tools", path + ".allowed_tools", sc.allowed_tools);
      r.String(kv.second, "run_as", path + ".run_as", sc.run_as);
      r.StringList(kv.second, "require_roles", path + ".require_roles", sc.require_roles);
      r.StringList(kv.second, "mount_points", path + ".mount_points", sc.mount_points);
      for (const auto& mp : sc.mount_points) {
        if (mp.empty() || mp[0] != '/') {
          r.Issue(kv.second["mount_points"], path + ".mount_points", mp,
                  "must be an absolute path");
        }
      }
      YAML::Node lim = kv.second["limits"];
      if (r.Map(lim, path + ".limits",
                {"timeout", "max_output_bytes", "max_concurrent", "max_processes"})) {
        r.Duration(lim, "timeout", path + ".limits.timeout", sc.limits.timeout, 1ms, kMaxTimeout);
        r.Size(lim, "max_output_bytes", path + ".limits.max_output_bytes",
               sc.limits.max_output_bytes, 1, 16ull << 30);
        r.Int(lim, "max_concurrent", path + ".limits.max_concurrent", sc.limits.max_concurrent, 1,
              10000);
        r.Int(lim, "max_processes", path + ".limits.max_processes", sc.limits.max_processes, 1,
              100000);
      }
    }
    out[name] = std::move(sc);
  }
}

// tools: config tools (argv templates); a built-in name cannot be redefined, and a named
// security context must exist (`contexts` are already read).
void ReadTools(const YAML::Node& tools, YamlReader& r,
               const std::map<std::string, SecurityContextConfig>& contexts,
               std::map<std::string, ToolConfig>& out) {
  if (!tools.IsDefined() || tools.IsNull()) return;
  if (!tools.IsMap()) {
    r.Issue(tools, "tools", "", "must be a map of name -> tool");
    return;
  }
  const auto& builtins = BuiltinTools();
  for (const auto& kv : tools) {
    const std::string name = kv.first.Scalar();
    const std::string path = "tools." + name;
    if (std::find(builtins.begin(), builtins.end(), name) != builtins.end()) {
      r.Issue(kv.first, path, name, "is a built-in tool and cannot be redefined");
    }
    if (!IsValidNodeId(name))
      r.Issue(kv.first, path, name, "tool names must match [A-Za-z0-9._-]{1,64}");
    ToolConfig t;
    if (r.Map(kv.second, path, {"command", "timeout", "security_context", "interactive"})) {
      r.StringList(kv.second, "command", path + ".command", t.command);
      r.Duration(kv.second, "timeout", path + ".timeout", t.timeout, 1ms, kMaxTimeout);
      r.String(kv.second, "security_context", path + ".security_context", t.security_context);
      r.Bool(kv.second, "interactive", path + ".interactive", t.interactive);
      if (t.command.empty())
        r.Issue(kv.second, path + ".command", "", "must be a non-empty argv list");
      if (!t.security_context.empty() && !contexts.contains(t.security_context)) {
        r.CrossReferenceIssue(kv.second["security_context"], path + ".security_context",
                              t.security_context, "names no entry of security_contexts");
      }
    } else {
      r.Issue(kv.second, path, "", "must be a map with a command");
    }
    out[name] = std::move(t);
  }
}

// Compute handlers must name a tool and a security context that exist.
void CheckHandlerReferences(const YAML::Node& compute, YamlReader& r, const AgentConfig& c,
                            const std::map<std::string, ComputeHandler>& handlers,
                            const std::string& path) {
  const auto& builtins = BuiltinTools();
  for (const auto& [name, h] : handlers) {
    if (h.tool.empty() || c.tools.contains(h.tool) ||
        std::find(builtins.begin(), builtins.end(), h.tool) != builtins.end()) {
      continue;
    }
    r.CrossReferenceIssue(compute[path.substr(8)][name]["tool"], path + "." + name + ".tool",
                          h.tool, "names no built-in or configured tool");
  }
  // An interactive tool runs only as a session's process, never as a handler.
  for (const auto& [name, h] : handlers) {
    auto it = c.tools.find(h.tool);
    if (it == c.tools.end() || !it->second.interactive) continue;
    r.Issue(compute[path.substr(8)][name]["tool"], path + "." + name + ".tool", h.tool,
            "names an interactive tool, which runs only through session.start");
  }
  for (const auto& [name, h] : handlers) {
    if (h.security_context.empty() || c.security_contexts.contains(h.security_context)) {
      continue;
    }
    r.CrossReferenceIssue(compute[path.substr(8)][name]["security_context"],
                          path + "." + name + ".security_context", h.security_context,
                          "names no entry of security_contexts");
  }
}

AgentConfig Parse(const YAML::Node& root, YamlReader& r) {
  AgentConfig c;
  if (root.IsDefined() && !root.IsNull() && !root.IsMap()) {
    r.Issue(root, "", "", "the config must be a YAML map at the top level");
    return c;
  }
  r.Map(root, "",
        {"node_id", "data_dir", "controller", "cluster", "edge", "compute", "worker", "sandbox",
         "tools", "security_contexts", "security", "labels", "log", "metrics"});
  r.String(root, "node_id", "node_id", c.node_id);
  if (c.node_id.empty()) c.node_id = HostName();
  if (!IsValidNodeId(c.node_id)) {
    r.Issue(root["node_id"], "node_id", c.node_id, "must match [A-Za-z0-9._-]{1,64}");
  }
  r.String(root, "data_dir", "data_dir", c.data_dir);
  if (c.data_dir.empty()) r.Issue(root["data_dir"], "data_dir", "", "must not be empty");

  ReadController(root["controller"], r, c);
  YAML::Node cluster = root["cluster"];
  if (r.Map(cluster, "cluster", {"heartbeat_interval_secs"})) {
    r.Int(cluster, "heartbeat_interval_secs", "cluster.heartbeat_interval_secs",
          c.cluster.heartbeat_interval_secs, 1, 3600);
  }

  YAML::Node edge = root["edge"];
  if (r.Map(edge, "edge", {"enabled", "max_concurrent_commands", "max_message_bytes"})) {
    r.Bool(edge, "enabled", "edge.enabled", c.edge.enabled);
    r.Int(edge, "max_concurrent_commands", "edge.max_concurrent_commands",
          c.edge.max_concurrent_commands, 1, 10000);
    r.Size(edge, "max_message_bytes", "edge.max_message_bytes", c.edge.max_message_bytes,
           1ull << 20, 256ull << 20);
  }

  ReadCompute(root["compute"], r, c.compute);
  ReadWorker(root["worker"], r, c.worker);
  if (c.worker.worker_id.empty()) c.worker.worker_id = c.node_id;
  ReadSandbox(root["sandbox"], r, c.sandbox);
  if (c.sandbox.root.empty()) c.sandbox.root = c.data_dir + "/sandboxes";
  ReadSecurityContexts(root["security_contexts"], r, c.security_contexts);
  ReadTools(root["tools"], r, c.security_contexts, c.tools);
  CheckHandlerReferences(root["compute"], r, c, c.compute.processors, "compute.processors");
  CheckHandlerReferences(root["compute"], r, c, c.compute.criteria, "compute.criteria");

  YAML::Node security = root["security"];
  if (r.Map(security, "security", {"user_token_issuers"})) {
    r.StringMap(security, "user_token_issuers", "security.user_token_issuers",
                c.security.user_token_issuers);
    for (const auto& [iss, file] : c.security.user_token_issuers) {
      if (iss.empty() || file.empty() || file[0] != '/') {
        r.Issue(security["user_token_issuers"], "security.user_token_issuers." + iss, file,
                "must map a non-empty issuer to the absolute path of its public key PEM file");
      }
    }
  }

  r.StringMap(root, "labels", "labels", c.labels);

  YAML::Node log = root["log"];
  if (r.Map(log, "log", {"level", "format"})) {
    r.String(log, "level", "log.level", c.log.level);
    CheckOneOf(r, log, "level", "log.level", c.log.level,
               {"trace", "debug", "info", "warn", "error", "critical", "off"});
    r.String(log, "format", "log.format", c.log.format);
    CheckOneOf(r, log, "format", "log.format", c.log.format, {"text", "json"});
  }
  YAML::Node metrics = root["metrics"];
  if (r.Map(metrics, "metrics", {"listen"})) {
    r.String(metrics, "listen", "metrics.listen", c.metrics.listen);
    CheckHostPort(r, metrics, "listen", "metrics.listen", c.metrics.listen, true);
  }
  return c;
}

AgentConfigResult LoadFromNodeUnguarded(YAML::Node root, YamlReader& r, const EnvLookup& env,
                                        const std::string& source_path) {
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (root.IsMap()) ApplyEnvOverrides(root, kScalarPaths, "EDGE_AGENT_", env, r);
  AgentConfig c = Parse(root, r);
  if (!r.errors().issues.empty()) return std::unexpected(r.errors());
  c.source_path = source_path;
  YAML::Emitter out;
  out << root;
  c.source_yaml = out.c_str();
  return c;
}

// yaml-cpp reports some misuse by exception; none may leave this module.
AgentConfigResult LoadFromNode(YAML::Node root, YamlReader& r, const EnvLookup& env,
                               const std::string& source_path) {
  try {
    return LoadFromNodeUnguarded(root, r, env, source_path);
  } catch (const YAML::Exception& e) {
    r.IssueNoPos("", "", std::string("invalid YAML structure: ") + e.what());
    return std::unexpected(r.errors());
  }
}

AgentConfigResult LoadText(const std::string& text, const std::string& source_name,
                           const EnvLookup& env, const std::string& source_path) {
  YamlReader r(source_name);
  auto parsed = ParseYaml(text, source_name);
  if (!parsed) return std::unexpected(parsed.error());
  YAML::Node root = *parsed;
  return LoadFromNode(root, r, env, source_path);
}

}  // namespace

const std::vector<std::string_view>& BuiltinTools() {
  static const std::vector<std::string_view> kTools = {
      "exec",        "file.read",     "file.write",    "file.list",     "file.stat",
      "file.delete", "file.move",     "file.chmod",    "file.glob",     "file.search",
      "sysinfo",     "session.start", "session.input", "session.signal"};
  return kTools;
}

AgentConfigResult LoadAgentConfig(const std::string& path, const EnvLookup& env) {
  auto text = edge::ReadFile(path, 4 << 20);
  if (!text) {
    ConfigErrors errs;
    errs.issues.push_back({path, 0, 0, "", "", "cannot read config file: " + text.error().message});
    return std::unexpected(errs);
  }
  return LoadText(*text, path, env, path);
}

AgentConfigResult LoadAgentConfigFromString(const std::string& text, const std::string& source_name,
                                            const EnvLookup& env) {
  return LoadText(text, source_name, env, "");
}

AgentConfigResult ApplyDelta(const AgentConfig& base, std::string_view delta) {
  auto parsed = ParseYaml(std::string(delta), "config delta", "YAML/JSON");
  if (!parsed) return std::unexpected(parsed.error());
  YAML::Node delta_node = *parsed;
  if (delta_node.IsDefined() && !delta_node.IsNull() && !delta_node.IsMap()) {
    ConfigErrors errs;
    errs.issues.push_back({"config delta", 0, 0, "", "", "a config delta must be a map"});
    return std::unexpected(errs);
  }
  // Validate the delta's own keys against the schema first, so errors point into the delta.
  {
    YamlReader r("config delta");
    try {
      (void)Parse(delta_node, r);
    } catch (const YAML::Exception& e) {
      r.IssueNoPos("", "", std::string("invalid YAML structure: ") + e.what());
    }
    std::erase_if(r.errors().issues, [](const ConfigIssue& i) {
      return i.cross_reference;  // cross-references need the base
    });
    if (!r.errors().issues.empty()) return std::unexpected(r.errors());
  }
  YAML::Node merged = DeepMerge(YAML::Load(base.source_yaml), delta_node);
  YamlReader r("config delta");
  auto result = LoadFromNode(merged, r, {}, base.source_path);
  if (result) result->delta_version = base.delta_version;
  return result;
}

void EmitClientTls(YAML::Emitter& e, const char* key, const ClientTlsConfig& t) {
  e << YAML::Key << key << YAML::Value << YAML::BeginMap << YAML::Key << "ca_file" << YAML::Value
    << t.ca_file << YAML::Key << "cert_file" << YAML::Value << t.cert_file << YAML::Key
    << "key_file" << YAML::Value << t.key_file << YAML::Key << "insecure_skip_verify" << YAML::Value
    << t.insecure_skip_verify << YAML::EndMap;
}

void EmitWorkerAuthRedacted(YAML::Emitter& e, const WorkerAuth& a) {
  auto secret = [](const std::string& s) {
    return s.empty() ? std::string() : std::string("[REDACTED]");
  };
  std::map<std::string, std::string> tokens;
  for (const auto& [id, t] : a.worker_tokens)
    tokens[id] = secret(t);
  std::vector<std::string> keys(a.worker_signing_keys.size(), "[REDACTED]");
  e << YAML::Key << "auth" << YAML::Value << YAML::BeginMap << YAML::Key << "worker_token"
    << YAML::Value << secret(a.worker_token) << YAML::Key << "worker_token_file" << YAML::Value
    << a.worker_token_file << YAML::Key << "worker_tokens" << YAML::Value << tokens << YAML::Key
    << "worker_signing_key" << YAML::Value << secret(a.worker_signing_key) << YAML::Key
    << "worker_signing_key_file" << YAML::Value << a.worker_signing_key_file << YAML::Key
    << "worker_signing_keys" << YAML::Value << YAML::Flow << keys << YAML::Key
    << "worker_revoked_token_ids" << YAML::Value << YAML::Flow << a.worker_revoked_token_ids
    << YAML::EndMap;
}

std::string DumpRedacted(const AgentConfig& c) {
  auto secret = [](const std::string& s) {
    return s.empty() ? std::string() : std::string("[REDACTED]");
  };
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "node_id" << YAML::Value << c.node_id;
  e << YAML::Key << "data_dir" << YAML::Value << c.data_dir;
  e << YAML::Key << "controller" << YAML::Value << YAML::BeginMap << YAML::Key << "address"
    << YAML::Value << c.controller.address << YAML::Key << "join_token" << YAML::Value
    << secret(c.controller.join_token) << YAML::Key << "join_token_file" << YAML::Value
    << c.controller.join_token_file << YAML::Key << "ca_pin" << YAML::Value << c.controller.ca_pin
    << YAML::EndMap;
  e << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap << YAML::Key
    << "heartbeat_interval_secs" << YAML::Value << c.cluster.heartbeat_interval_secs
    << YAML::EndMap;
  e << YAML::Key << "edge" << YAML::Value << YAML::BeginMap << YAML::Key << "enabled" << YAML::Value
    << c.edge.enabled << YAML::Key << "max_concurrent_commands" << YAML::Value
    << c.edge.max_concurrent_commands << YAML::Key << "max_message_bytes" << YAML::Value
    << FormatSize(c.edge.max_message_bytes) << YAML::EndMap;
  auto handlers = [&](const std::map<std::string, ComputeHandler>& hs) {
    e << YAML::BeginMap;
    for (const auto& [name, h] : hs) {
      e << YAML::Key << name << YAML::Value << YAML::BeginMap << YAML::Key << "tool" << YAML::Value
        << h.tool << YAML::Key << "timeout" << YAML::Value << FormatDuration(h.timeout) << YAML::Key
        << "security_context" << YAML::Value << h.security_context << YAML::EndMap;
    }
    e << YAML::EndMap;
  };
  e << YAML::Key << "compute" << YAML::Value << YAML::BeginMap << YAML::Key << "enabled"
    << YAML::Value << c.compute.enabled << YAML::Key << "address" << YAML::Value
    << c.compute.address << YAML::Key << "tls" << YAML::Value << YAML::BeginMap << YAML::Key
    << "mode" << YAML::Value << c.compute.tls_mode << YAML::Key << "ca_file" << YAML::Value
    << c.compute.tls_ca_file << YAML::EndMap << YAML::Key << "token_file" << YAML::Value
    << c.compute.token_file << YAML::Key << "tags" << YAML::Value << YAML::Flow << c.compute.tags
    << YAML::Key << "legal_entity_id" << YAML::Value << c.compute.legal_entity_id << YAML::Key
    << "keepalive_interval" << YAML::Value << FormatDuration(c.compute.keepalive_interval)
    << YAML::Key << "max_concurrent_calls" << YAML::Value << c.compute.max_concurrent_calls
    << YAML::Key << "processors" << YAML::Value;
  handlers(c.compute.processors);
  e << YAML::Key << "criteria" << YAML::Value;
  handlers(c.compute.criteria);
  e << YAML::EndMap;
  const auto& w = c.worker;
  e << YAML::Key << "worker" << YAML::Value << YAML::BeginMap << YAML::Key << "listen_addr"
    << YAML::Value << w.listen_addr << YAML::Key << "worker_id" << YAML::Value << w.worker_id
    << YAML::Key << "heartbeat_interval" << YAML::Value << FormatDuration(w.heartbeat_interval)
    << YAML::Key << "control_plane_url" << YAML::Value << w.control_plane_url << YAML::Key
    << "max_body_bytes" << YAML::Value << w.max_body_bytes << YAML::Key << "max_concurrent"
    << YAML::Value << w.max_concurrent << YAML::Key << "rpc_tls" << YAML::Value << YAML::BeginMap
    << YAML::Key << "enabled" << YAML::Value << w.rpc_tls.enabled << YAML::Key << "server_cert_file"
    << YAML::Value << w.rpc_tls.server_cert_file << YAML::Key << "server_key_file" << YAML::Value
    << w.rpc_tls.server_key_file << YAML::Key << "client_ca_file" << YAML::Value
    << w.rpc_tls.client_ca_file << YAML::EndMap;
  EmitClientTls(e, "control_plane_tls", w.control_plane_tls);
  EmitWorkerAuthRedacted(e, w.auth);
  e << YAML::EndMap;
  const auto& s = c.sandbox;
  e << YAML::Key << "sandbox" << YAML::Value << YAML::BeginMap << YAML::Key << "root" << YAML::Value
    << s.root << YAML::Key << "provider" << YAML::Value << s.provider << YAML::Key
    << "max_sandboxes" << YAML::Value << s.max_sandboxes << YAML::Key << "max_concurrent"
    << YAML::Value << s.max_concurrent << YAML::Key << "default_timeout" << YAML::Value
    << FormatDuration(s.default_timeout) << YAML::Key << "max_output_bytes" << YAML::Value
    << FormatSize(s.max_output_bytes) << YAML::Key << "kill_grace" << YAML::Value
    << FormatDuration(s.kill_grace) << YAML::Key << "bwrap_network" << YAML::Value
    << s.bwrap_network << YAML::Key << "max_sessions" << YAML::Value << s.max_sessions << YAML::Key
    << "io_threads" << YAML::Value << s.io_threads << YAML::EndMap;
  e << YAML::Key << "tools" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, t] : c.tools) {
    e << YAML::Key << name << YAML::Value << YAML::BeginMap << YAML::Key << "command" << YAML::Value
      << YAML::Flow << t.command << YAML::Key << "timeout" << YAML::Value
      << FormatDuration(t.timeout) << YAML::Key << "security_context" << YAML::Value
      << t.security_context << YAML::Key << "interactive" << YAML::Value << t.interactive
      << YAML::EndMap;
  }
  e << YAML::EndMap;
  e << YAML::Key << "security_contexts" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, sc] : c.security_contexts) {
    e << YAML::Key << name << YAML::Value << YAML::BeginMap << YAML::Key << "allowed_tools"
      << YAML::Value << YAML::Flow << sc.allowed_tools << YAML::Key << "run_as" << YAML::Value
      << sc.run_as << YAML::Key << "mount_points" << YAML::Value << YAML::Flow << sc.mount_points
      << YAML::Key << "require_roles" << YAML::Value << YAML::Flow << sc.require_roles << YAML::Key
      << "limits" << YAML::Value << YAML::BeginMap << YAML::Key << "timeout" << YAML::Value
      << FormatDuration(sc.limits.timeout) << YAML::Key << "max_output_bytes" << YAML::Value
      << FormatSize(sc.limits.max_output_bytes) << YAML::Key << "max_concurrent" << YAML::Value
      << sc.limits.max_concurrent << YAML::Key << "max_processes" << YAML::Value
      << sc.limits.max_processes << YAML::EndMap << YAML::EndMap;
  }
  e << YAML::EndMap;
  e << YAML::Key << "security" << YAML::Value << YAML::BeginMap << YAML::Key << "user_token_issuers"
    << YAML::Value << c.security.user_token_issuers << YAML::EndMap;
  e << YAML::Key << "labels" << YAML::Value << c.labels;
  e << YAML::Key << "log" << YAML::Value << YAML::BeginMap << YAML::Key << "level" << YAML::Value
    << c.log.level << YAML::Key << "format" << YAML::Value << c.log.format << YAML::EndMap;
  e << YAML::Key << "metrics" << YAML::Value << YAML::BeginMap << YAML::Key << "listen"
    << YAML::Value << c.metrics.listen << YAML::EndMap;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace edge::config
