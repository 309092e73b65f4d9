#include "config/controller_config.h"

#include <algorithm>
#include <utility>
#include "common/atomic_file.h"

#include "config/duration.h"
#include "config/validate.h"

namespace edge::config {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kScalarPaths = {
    "data_dir",
    "grpc.listen",
    "grpc.advertise",
    "grpc.max_message_bytes",
    "grpc.reflection",
    "limits.exchange_per_minute",
    "limits.exchange_burst",
    "limits.attest_per_minute",
    "limits.attest_per_ip_per_minute",
    "limits.unauthenticated_calls",
    "limits.unauthenticated_calls_per_peer",
    "limits.refusal_log_lines_per_minute",
    "http.listen",
    "http.max_body_bytes",
    "http.tls.enabled",
    "http.tls.cert_file",
    "http.tls.key_file",
    "http.tls.client_ca_file",
    "edge_api.limits.rate_limit",
    "edge_api.limits.max_frame_size",
    "edge_api.limits.reattach_window",
    "edge_api.limits.max_buffer_size",
    "edge_api.limits.buffer_overflow_policy",
    "worker.heartbeat_interval",
    "worker.lease_ttl",
    "worker.max_lease_ttl",
    "worker.call_token_ttl",
    "worker.auth.worker_token",
    "worker.auth.worker_token_file",
    "worker.auth.worker_signing_key",
    "worker.auth.worker_signing_key_file",
    "worker.rpc_client_tls.ca_file",
    "worker.rpc_client_tls.cert_file",
    "worker.rpc_client_tls.key_file",
    "worker.rpc_client_tls.insecure_skip_verify",
    "admin.socket",
    "cluster.heartbeat_interval_secs",
    "cluster.stale_threshold_secs",
    "cluster.rotation_overlap",
    "cluster.output_stall_limit",
    "tokens.default_ttl",
    "tokens.node_token_ttl",
    "tokens.issuer",
    "compute.listen",
    "compute.dispatch_timeout",
    "compute.keepalive_interval",
    "compute.keepalive_timeout",
    "compute.member_wait",
    "log.level",
    "log.format",
};

std::string DefaultAdvertise(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]") {
    return "127.0.0.1:" + listen.substr(colon + 1);
  }
  return listen;
}

// `edge_api` (wire.md §5.2 limits) over `a`: only the keys present change.
void ParseEdgeApi(const YAML::Node& edge_api, YamlReader& r, ControllerConfig::EdgeApi& a) {
  if (r.Map(edge_api, "edge_api", {"limits"})) {
    YAML::Node el = edge_api["limits"];
    if (r.Map(el, "edge_api.limits",
              {"rate_limit", "max_frame_size", "reattach_window", "max_buffer_size",
               "buffer_overflow_policy"})) {
      r.Int(el, "rate_limit", "edge_api.limits.rate_limit", a.rate_limit, 1, 100'000);
      r.Size(el, "max_frame_size", "edge_api.limits.max_frame_size", a.max_frame_size, 1ull << 10,
             64ull << 20);
      r.Int(el, "reattach_window", "edge_api.limits.reattach_window", a.reattach_window_secs, 1,
            7 * 86'400);
      r.Size(el, "max_buffer_size", "edge_api.limits.max_buffer_size", a.max_buffer_size,
             4ull << 10, 1ull << 30);
      r.String(el, "buffer_overflow_policy", "edge_api.limits.buffer_overflow_policy",
               a.buffer_overflow_policy);
      if (a.buffer_overflow_policy != "drop_oldest" && a.buffer_overflow_policy != "disconnect") {
        r.Issue(el["buffer_overflow_policy"], "edge_api.limits.buffer_overflow_policy",
                a.buffer_overflow_policy, "must be drop_oldest or disconnect");
      }
      // Each socket's queue is half the replay buffer (SessionRelay): a frame larger than
      // that reaches no socket at all. Judged on the values in force when this document sets
      // either one, so that a delta changing one is checked against the other.
      const bool buffer_set = static_cast<bool>(el["max_buffer_size"]);
      if ((buffer_set || el["max_frame_size"]) && a.max_buffer_size < 2 * a.max_frame_size) {
        const std::string key = buffer_set ? "max_buffer_size" : "max_frame_size";
        r.Issue(el[key], "edge_api.limits." + key,
                std::to_string(buffer_set ? a.max_buffer_size : a.max_frame_size),
                "max_buffer_size (" + std::to_string(a.max_buffer_size) +
                    ") must be at least twice max_frame_size (" + std::to_string(a.max_frame_size) +
                    "): each session socket's queue is half the buffer and must hold a "
                    "whole frame");
      }
    }
  }
}

ControllerConfig Parse(const YAML::Node& root, YamlReader& r) {
  ControllerConfig c;
  if (root.IsDefined() && !root.IsNull() && !root.IsMap()) {
    r.Issue(root, "", "", "the config must be a YAML map at the top level");
    return c;
  }
  r.Map(root, "",
        {"data_dir", "grpc", "http", "admin", "cluster", "tokens", "compute", "limits", "log",
         "worker", "edge_api"});
  r.String(root, "data_dir", "data_dir", c.data_dir);
  if (c.data_dir.empty()) r.Issue(root["data_dir"], "data_dir", "", "must not be empty");
  auto host_port = [&](const YAML::Node& map, const char* key, const std::string& path,
                       const std::string& v, bool listen) {
    if (!v.empty() && !IsHostPort(v, listen)) {
      r.Issue(map[key], path, v, "must be host:port");
    }
  };
  YAML::Node grpc = root["grpc"];
  if (r.Map(grpc, "grpc",
            {"listen", "advertise", "server_names", "max_message_bytes", "reflection"})) {
    r.String(grpc, "listen", "grpc.listen", c.grpc.listen);
    host_port(grpc, "listen", "grpc.listen", c.grpc.listen, true);
    r.String(grpc, "advertise", "grpc.advertise", c.grpc.advertise);
    host_port(grpc, "advertise", "grpc.advertise", c.grpc.advertise, false);
    r.StringList(grpc, "server_names", "grpc.server_names", c.grpc.server_names);
    r.Size(grpc, "max_message_bytes", "grpc.max_message_bytes", c.grpc.max_message_bytes,
           1ull << 20, 256ull << 20);
    r.Bool(grpc, "reflection", "grpc.reflection", c.grpc.reflection);
  }
  if (c.grpc.listen.empty()) r.Issue(grpc, "grpc.listen", "", "must not be empty");
  if (c.grpc.advertise.empty() && IsHostPort(c.grpc.listen, true)) {
    c.grpc.advertise = DefaultAdvertise(c.grpc.listen);
  }
  YAML::Node http = root["http"];
  if (r.Map(http, "http",
            {"listen", "tls", "max_body_bytes", "trusted_issuers", "denied_tools",
             "allowed_origins"})) {
    r.StringList(http, "allowed_origins", "http.allowed_origins", c.http.allowed_origins);
    for (size_t i = 0; i < c.http.allowed_origins.size(); ++i) {
      const std::string& o = c.http.allowed_origins[i];
      if (!(o.starts_with("http://") || o.starts_with("https://")) || o.back() == '/') {
        r.Issue(http["allowed_origins"][i], "http.allowed_origins[" + std::to_string(i) + "]", o,
                "must be an origin: http(s)://host[:port], without a path");
      }
    }
    r.StringList(http, "denied_tools", "http.denied_tools", c.http.denied_tools);
    for (size_t i = 0; i < c.http.denied_tools.size(); ++i) {
      if (c.http.denied_tools[i].empty()) {
        r.Issue(http["denied_tools"][i], "http.denied_tools[" + std::to_string(i) + "]", "",
                "must name a tool");
      }
    }
    r.StringMap(http, "trusted_issuers", "http.trusted_issuers", c.http.trusted_issuers);
    for (const auto& [iss, file] : c.http.trusted_issuers) {
      if (iss.empty() || file.empty() || file[0] != '/') {
        r.Issue(http["trusted_issuers"], "http.trusted_issuers." + iss, file,
                "must map a non-empty issuer to the absolute path of its public key PEM file");
      }
    }
    r.String(http, "listen", "http.listen", c.http.listen);
    host_port(http, "listen", "http.listen", c.http.listen, true);
    r.Size(http, "max_body_bytes", "http.max_body_bytes", c.http.max_body_bytes, 1ull << 10,
           256ull << 20);
    YAML::Node tls = http["tls"];
    auto& t = c.http.tls;
    if (r.Map(tls, "http.tls", {"enabled", "cert_file", "key_file", "client_ca_file"})) {
      r.Bool(tls, "enabled", "http.tls.enabled", t.enabled);
      r.String(tls, "cert_file", "http.tls.cert_file", t.cert_file);
      r.String(tls, "key_file", "http.tls.key_file", t.key_file);
      r.String(tls, "client_ca_file", "http.tls.client_ca_file", t.client_ca_file);
      if (t.cert_file.empty() != t.key_file.empty()) {
        r.Issue(tls, "http.tls", "",
                "cert_file and key_file go together (or neither: the "
                "controller CA's server certificate)");
      }
    }
  }
  YAML::Node worker = root["worker"];
  if (r.Map(worker, "worker",
            {"heartbeat_interval", "lease_ttl", "max_lease_ttl", "call_token_ttl", "auth",
             "rpc_client_tls"})) {
    auto& w = c.worker;
    r.Duration(worker, "heartbeat_interval", "worker.heartbeat_interval", w.heartbeat_interval, 1s,
               1h);
    r.Duration(worker, "lease_ttl", "worker.lease_ttl", w.lease_ttl, 1s, 24h);
    r.Duration(worker, "max_lease_ttl", "worker.max_lease_ttl", w.max_lease_ttl, 1s, 24h * 7);
    r.Duration(worker, "call_token_ttl", "worker.call_token_ttl", w.call_token_ttl, 10s, 15min);
    if (w.lease_ttl > w.max_lease_ttl) {
      r.Issue(worker["lease_ttl"], "worker.lease_ttl", FormatDuration(w.lease_ttl),
              "must not exceed worker.max_lease_ttl (" + FormatDuration(w.max_lease_ttl) + ")");
    }
    ReadWorkerAuth(worker["auth"], r, "worker.auth", w.auth);
    ReadClientTls(worker["rpc_client_tls"], r, "worker.rpc_client_tls", w.rpc_client_tls);
  }
  YAML::Node admin = root["admin"];
  if (r.Map(admin, "admin", {"socket"})) r.String(admin, "socket", "admin.socket", c.admin.socket);
  if (c.admin.socket.empty()) c.admin.socket = c.data_dir + "/admin.sock";
  YAML::Node cluster = root["cluster"];
  if (r.Map(cluster, "cluster",
            {"heartbeat_interval_secs", "stale_threshold_secs", "rotation_overlap",
             "output_stall_limit"})) {
    r.Int(cluster, "heartbeat_interval_secs", "cluster.heartbeat_interval_secs",
          c.cluster.heartbeat_interval_secs, 1, 3600);
    r.Int(cluster, "stale_threshold_secs", "cluster.stale_threshold_secs",
          c.cluster.stale_threshold_secs, 1, 86400);
    r.Duration(cluster, "rotation_overlap", "cluster.rotation_overlap", c.cluster.rotation_overlap,
               1s, 1h);
    r.Duration(cluster, "output_stall_limit", "cluster.output_stall_limit",
               c.cluster.output_stall_limit, 1s, 50s);
  }
  const std::chrono::milliseconds stale = std::chrono::seconds(c.cluster.stale_threshold_secs);
  // Not IsMap() alone: a missing section is an invalid node, which throws. A const lookup:
  // yaml-cpp's non-const operator[] adds the key it does not find.
  if (!(cluster.IsDefined() && cluster.IsMap() &&
        std::as_const(cluster)["output_stall_limit"].IsDefined())) {
    // Not set: the default, or half the stale threshold where that is shorter.
    c.cluster.output_stall_limit = std::min(c.cluster.output_stall_limit, stale / 2);
  } else if (c.cluster.output_stall_limit >= stale) {
    r.Issue(cluster["output_stall_limit"], "cluster.output_stall_limit",
            FormatDuration(c.cluster.output_stall_limit),
            "must be less than cluster.stale_threshold_secs (" +
                std::to_string(c.cluster.stale_threshold_secs) +
                " s): a stream held that long would show its node stale");
  }
  if (c.cluster.stale_threshold_secs <= c.cluster.heartbeat_interval_secs) {
    r.Issue(cluster["stale_threshold_secs"], "cluster.stale_threshold_secs",
            std::to_string(c.cluster.stale_threshold_secs),
            "must be greater than cluster.heartbeat_interval_secs (" +
                std::to_string(c.cluster.heartbeat_interval_secs) + ")");
  }
  YAML::Node tokens = root["tokens"];
  if (r.Map(tokens, "tokens", {"default_ttl", "node_token_ttl", "issuer"})) {
    r.Duration(tokens, "default_ttl", "tokens.default_ttl", c.tokens.default_ttl, 1min, 24h * 30);
    r.Duration(tokens, "node_token_ttl", "tokens.node_token_ttl", c.tokens.node_token_ttl, 1min,
               24h);
    r.String(tokens, "issuer", "tokens.issuer", c.tokens.issuer);
  }
  if (c.http.trusted_issuers.contains(c.tokens.issuer)) {
    r.Issue(http["trusted_issuers"], "http.trusted_issuers." + c.tokens.issuer,
            c.http.trusted_issuers.at(c.tokens.issuer),
            "must not name tokens.issuer: the controller verifies its own tokens with its own key");
  }
  ParseEdgeApi(root["edge_api"], r, c.edge_api);
  YAML::Node compute = root["compute"];
  if (r.Map(compute, "compute",
            {"listen", "dispatch_timeout", "keepalive_interval", "keepalive_timeout",
             "member_wait"})) {
    r.String(compute, "listen", "compute.listen", c.compute.listen);
    host_port(compute, "listen", "compute.listen", c.compute.listen, true);
    r.Duration(compute, "dispatch_timeout", "compute.dispatch_timeout", c.compute.dispatch_timeout,
               1ms, 1h);
    r.Duration(compute, "keepalive_interval", "compute.keepalive_interval",
               c.compute.keepalive_interval, 10ms, 1h);
    r.Duration(compute, "keepalive_timeout", "compute.keepalive_timeout",
               c.compute.keepalive_timeout, 10ms, 1h);
    r.Duration(compute, "member_wait", "compute.member_wait", c.compute.member_wait,
               std::chrono::milliseconds(0), 1h);
  }
  YAML::Node limits = root["limits"];
  if (r.Map(limits, "limits",
            {"exchange_per_minute", "exchange_burst", "attest_per_minute",
             "attest_per_ip_per_minute", "unauthenticated_calls", "unauthenticated_calls_per_peer",
             "refusal_log_lines_per_minute"})) {
    auto& l = c.limits;
    r.Int(limits, "exchange_per_minute", "limits.exchange_per_minute", l.exchange_per_minute, 1,
          100'000);
    r.Int(limits, "exchange_burst", "limits.exchange_burst", l.exchange_burst, 1, 100'000);
    r.Int(limits, "attest_per_minute", "limits.attest_per_minute", l.attest_per_minute, 1, 100'000);
    r.Int(limits, "attest_per_ip_per_minute", "limits.attest_per_ip_per_minute",
          l.attest_per_ip_per_minute, 1, 1'000'000);
    r.Int(limits, "unauthenticated_calls", "limits.unauthenticated_calls", l.unauthenticated_calls,
          1, 100'000);
    r.Int(limits, "unauthenticated_calls_per_peer", "limits.unauthenticated_calls_per_peer",
          l.unauthenticated_calls_per_peer, 1, 100'000);
    r.Int(limits, "refusal_log_lines_per_minute", "limits.refusal_log_lines_per_minute",
          l.refusal_log_lines_per_minute, 1, 100'000);
  }
  if (c.limits.attest_per_ip_per_minute < c.limits.attest_per_minute) {
    r.Issue(limits["attest_per_ip_per_minute"], "limits.attest_per_ip_per_minute",
            std::to_string(c.limits.attest_per_ip_per_minute),
            "must be at least limits.attest_per_minute (" +
                std::to_string(c.limits.attest_per_minute) + ")");
  }
  if (c.limits.unauthenticated_calls < c.limits.unauthenticated_calls_per_peer) {
    r.Issue(limits["unauthenticated_calls"], "limits.unauthenticated_calls",
            std::to_string(c.limits.unauthenticated_calls),
            "must be at least limits.unauthenticated_calls_per_peer (" +
                std::to_string(c.limits.unauthenticated_calls_per_peer) + ")");
  }
  YAML::Node log = root["log"];
  if (r.Map(log, "log", {"level", "format"})) {
    r.String(log, "level", "log.level", c.log.level);
    r.String(log, "format", "log.format", c.log.format);
    static const std::vector<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                                     "error", "critical", "off"};
    if (std::find(kLevels.begin(), kLevels.end(), c.log.level) == kLevels.end()) {
      r.Issue(log["level"], "log.level", c.log.level,
              "must be one of trace, debug, info, warn, error, critical, off");
    }
    if (c.log.format != "text" && c.log.format != "json") {
      r.Issue(log["format"], "log.format", c.log.format, "must be one of text, json");
    }
  }
  return c;
}

ControllerConfigResult LoadText(const std::string& text, const std::string& source_name,
                                const EnvLookup& env) {
  YamlReader r(source_name);
  auto parsed = ParseYaml(text, source_name);
  if (!parsed) return std::unexpected(parsed.error());
  YAML::Node root = *parsed;
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (root.IsMap()) ApplyEnvOverrides(root, kScalarPaths, "EDGE_CONTROLLER_", env, r);
  ControllerConfig c;
  try {
    c = Parse(root, r);
  } catch (const YAML::Exception& e) {
    r.IssueNoPos("", "", std::string("invalid YAML structure: ") + e.what());
  }
  if (!r.errors().issues.empty()) return std::unexpected(r.errors());
  return c;
}

}  // namespace

ControllerConfigResult LoadControllerConfig(const std::string& path, const EnvLookup& env) {
  auto text = edge::ReadFile(path, 4 << 20);
  if (!text) {
    ConfigErrors errs;
    errs.issues.push_back({path, 0, 0, "", "", "cannot read config file: " + text.error().message});
    return std::unexpected(errs);
  }
  auto c = LoadText(*text, path, env);
  if (c) c->source_path = path;
  return c;
}

ControllerConfigResult LoadControllerConfigFromString(const std::string& text,
                                                      const std::string& source_name,
                                                      const EnvLookup& env) {
  return LoadText(text, source_name, env);
}

std::expected<PushConfigParts, ConfigErrors> SplitPushConfigDelta(
    const std::string& delta, const ControllerConfig::EdgeApi& current,
    const std::string& source_name) {
  auto parsed = ParseYaml(delta, source_name);
  if (!parsed) return std::unexpected(parsed.error());
  YAML::Node root = *parsed;
  PushConfigParts parts;
  if (!root.IsMap() || !root["edge_api"]) {
    parts.node_delta = delta;
    return parts;
  }
  YamlReader r(source_name);
  ControllerConfig::EdgeApi limits = current;
  try {
    ParseEdgeApi(root["edge_api"], r, limits);
  } catch (const YAML::Exception& e) {
    r.IssueNoPos("edge_api", "", std::string("invalid YAML structure: ") + e.what());
  }
  if (!r.errors().issues.empty()) return std::unexpected(r.errors());
  parts.edge_api = std::move(limits);
  root.remove("edge_api");
  if (root.size() != 0) {
    YAML::Emitter e;
    e << root;
    parts.node_delta = e.c_str();
  }
  return parts;
}

std::string DumpRedacted(const ControllerConfig& c) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "data_dir" << YAML::Value << c.data_dir;
  e << YAML::Key << "grpc" << YAML::Value << YAML::BeginMap << YAML::Key << "listen" << YAML::Value
    << c.grpc.listen << YAML::Key << "advertise" << YAML::Value << c.grpc.advertise << YAML::Key
    << "server_names" << YAML::Value << YAML::Flow << c.grpc.server_names << YAML::Key
    << "max_message_bytes" << YAML::Value << c.grpc.max_message_bytes << YAML::Key << "reflection"
    << YAML::Value << c.grpc.reflection << YAML::EndMap;
  e << YAML::Key << "http" << YAML::Value << YAML::BeginMap << YAML::Key << "listen" << YAML::Value
    << c.http.listen << YAML::Key << "max_body_bytes" << YAML::Value << c.http.max_body_bytes
    << YAML::Key << "tls" << YAML::Value << YAML::BeginMap << YAML::Key << "enabled" << YAML::Value
    << c.http.tls.enabled << YAML::Key << "cert_file" << YAML::Value << c.http.tls.cert_file
    << YAML::Key << "key_file" << YAML::Value << c.http.tls.key_file << YAML::Key
    << "client_ca_file" << YAML::Value << c.http.tls.client_ca_file << YAML::EndMap << YAML::Key
    << "trusted_issuers" << YAML::Value << YAML::BeginMap;
  for (const auto& [iss, file] : c.http.trusted_issuers)
    e << YAML::Key << iss << YAML::Value << file;
  e << YAML::EndMap << YAML::Key << "denied_tools" << YAML::Value << YAML::Flow
    << c.http.denied_tools << YAML::Key << "allowed_origins" << YAML::Value << YAML::Flow
    << c.http.allowed_origins << YAML::EndMap;
  const auto& ea = c.edge_api;
  e << YAML::Key << "edge_api" << YAML::Value << YAML::BeginMap << YAML::Key << "limits"
    << YAML::Value << YAML::BeginMap << YAML::Key << "rate_limit" << YAML::Value << ea.rate_limit
    << YAML::Key << "max_frame_size" << YAML::Value << ea.max_frame_size << YAML::Key
    << "reattach_window" << YAML::Value << ea.reattach_window_secs << YAML::Key << "max_buffer_size"
    << YAML::Value << ea.max_buffer_size << YAML::Key << "buffer_overflow_policy" << YAML::Value
    << ea.buffer_overflow_policy << YAML::EndMap << YAML::EndMap;
  const auto& w = c.worker;
  e << YAML::Key << "worker" << YAML::Value << YAML::BeginMap << YAML::Key << "heartbeat_interval"
    << YAML::Value << FormatDuration(w.heartbeat_interval) << YAML::Key << "lease_ttl"
    << YAML::Value << FormatDuration(w.lease_ttl) << YAML::Key << "max_lease_ttl" << YAML::Value
    << FormatDuration(w.max_lease_ttl) << YAML::Key << "call_token_ttl" << YAML::Value
    << FormatDuration(w.call_token_ttl);
  EmitWorkerAuthRedacted(e, w.auth);
  EmitClientTls(e, "rpc_client_tls", w.rpc_client_tls);
  e << YAML::EndMap;
  e << YAML::Key << "admin" << YAML::Value << YAML::BeginMap << YAML::Key << "socket" << YAML::Value
    << c.admin.socket << YAML::EndMap;
  e << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap << YAML::Key
    << "heartbeat_interval_secs" << YAML::Value << c.cluster.heartbeat_interval_secs << YAML::Key
    << "stale_threshold_secs" << YAML::Value << c.cluster.stale_threshold_secs << YAML::Key
    << "rotation_overlap" << YAML::Value << FormatDuration(c.cluster.rotation_overlap) << YAML::Key
    << "output_stall_limit" << YAML::Value << FormatDuration(c.cluster.output_stall_limit)
    << YAML::EndMap;
  e << YAML::Key << "tokens" << YAML::Value << YAML::BeginMap << YAML::Key << "default_ttl"
    << YAML::Value << FormatDuration(c.tokens.default_ttl) << YAML::Key << "node_token_ttl"
    << YAML::Value << FormatDuration(c.tokens.node_token_ttl) << YAML::Key << "issuer"
    << YAML::Value << c.tokens.issuer << YAML::EndMap;
  e << YAML::Key << "compute" << YAML::Value << YAML::BeginMap << YAML::Key << "listen"
    << YAML::Value << c.compute.listen << YAML::Key << "dispatch_timeout" << YAML::Value
    << FormatDuration(c.compute.dispatch_timeout) << YAML::Key << "keepalive_interval"
    << YAML::Value << FormatDuration(c.compute.keepalive_interval) << YAML::Key
    << "keepalive_timeout" << YAML::Value << FormatDuration(c.compute.keepalive_timeout)
    << YAML::Key << "member_wait" << YAML::Value << FormatDuration(c.compute.member_wait)
    << YAML::EndMap;
  const auto& l = c.limits;
  e << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
  for (const auto& [key, value] : std::initializer_list<std::pair<const char*, int64_t>>{
           {"exchange_per_minute", l.exchange_per_minute},
           {"exchange_burst", l.exchange_burst},
           {"attest_per_minute", l.attest_per_minute},
           {"attest_per_ip_per_minute", l.attest_per_ip_per_minute},
           {"unauthenticated_calls", l.unauthenticated_calls},
           {"unauthenticated_calls_per_peer", l.unauthenticated_calls_per_peer},
           {"refusal_log_lines_per_minute", l.refusal_log_lines_per_minute}}) {
    e << YAML::Key << key << YAML::Value << value;
  }
  e << YAML::EndMap;
  e << YAML::Key << "log" << YAML::Value << YAML::BeginMap << YAML::Key << "level" << YAML::Value
    << c.log.level << YAML::Key << "format" << YAML::Value << c.log.format << YAML::EndMap;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace edge::config
