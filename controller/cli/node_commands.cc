#include "controller/cli/node_commands.h"

#include <cstdio>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>

#include "admin.grpc.pb.h"
#include "common/atomic_file.h"
#include "controller/cli/admin_cli.h"

namespace edge::controller::cli {
namespace {

namespace apb = admin::v1;
using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;
using json = nlohmann::json;
using Stub = apb::AdminService::Stub;

struct NodeOptions {
  std::string nodes_format;
  std::string cancel_id, cancel_reason;
  std::string drain_node;
  std::string shutdown_node, shutdown_grace = "10s";
  std::string push_node, push_file, push_version;
  std::string revoke_node;
};

int Nodes(const edge::cli::GlobalOptions& opts, const std::string& format) {
  auto admin = OpenAdmin<apb::AdminService>(opts);
  if (!admin) return admin.error();
  apb::ListNodesResponse resp;
  auto st = admin->stub->ListNodes(CallContext().get(), {}, &resp);
  if (!st.ok()) return ReportRpcFailure(admin->cfg, st);
  if (format == "json") {
    json arr = json::array();
    for (const auto& n : resp.nodes()) {
      const auto& c = n.capabilities();
      json labels = json::object(), tags = json::object();
      for (const auto& [k, v] : c.labels())
        labels[k] = v;
      for (const auto& [k, v] : n.tags())
        tags[k] = v;
      arr.push_back({{"node_id", n.node_id()},
                     {"tenant_id", n.tenant_id()},
                     {"state", n.state()},
                     {"connected", n.connected()},
                     {"edge_enrolled", n.edge_enrolled()},
                     {"enrolled_at", IsoTime(n.enrolled_at_epoch_ms())},
                     {"last_seen", IsoTime(n.last_seen_epoch_ms())},
                     {"last_heartbeat", JsonTime(n.last_heartbeat_epoch_ms())},
                     {"public_key_sha256", n.public_key_sha256()},
                     {"config_version", n.config_version()},
                     {"tags", tags},
                     {"capabilities",
                      {{"os", c.os()},
                       {"arch", c.arch()},
                       {"tools", std::vector<std::string>(c.tools().begin(), c.tools().end())},
                       {"mounts", std::vector<std::string>(c.mounts().begin(), c.mounts().end())},
                       {"labels", labels}}}});
    }
    std::cout << Dump(arr) << "\n";
    return kExitOk;
  }
  std::printf("%-20s %-10s %-10s %-9s %-24s %-14s %s\n", "NODE", "TENANT", "STATE", "CONNECTED",
              "LAST HEARTBEAT", "PLATFORM", "TAGS");
  for (const auto& n : resp.nodes()) {
    const auto& c = n.capabilities();
    std::string platform = c.os().empty() ? "-" : c.os() + "/" + c.arch();
    // Sorted by key (a proto map has no order).
    std::map<std::string, std::string> sorted(n.tags().begin(), n.tags().end());
    std::string tags;
    for (const auto& [k, v] : sorted)
      tags += (tags.empty() ? "" : ",") + k + "=" + v;
    std::printf("%-20s %-10s %-10s %-9s %-24s %-14s %s\n", n.node_id().c_str(),
                n.tenant_id().c_str(), n.state().c_str(), n.connected() ? "yes" : "no",
                IsoTimeMs(n.last_heartbeat_epoch_ms()).c_str(), platform.c_str(),
                tags.empty() ? "-" : tags.c_str());
  }
  return kExitOk;
}

// One unary call about a node (cancel, drain, shutdown, push-config, revoke-node): prints
// `on_ok`'s line, or the refusal with its exit code (the node not connected → 69).
template <typename Req, typename Resp, typename Call>
int NodeCall(const edge::cli::GlobalOptions& opts, const Req& req, Call call,
             const std::function<void(const Resp&)>& on_ok) {
  auto admin = OpenAdmin<apb::AdminService>(opts, /*wait_connected=*/true);
  if (!admin) return admin.error();
  Resp resp;
  auto st = ((*admin->stub).*call)(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportNodeCallFailure(st);
  on_ok(resp);
  return kExitOk;
}

int Cancel(const edge::cli::GlobalOptions& opts, const NodeOptions& o) {
  apb::CancelCommandRequest req;
  req.set_command_id(o.cancel_id);
  req.set_reason(o.cancel_reason);
  return NodeCall<apb::CancelCommandRequest, apb::CancelCommandResponse>(
      opts, req, &Stub::CancelCommand,
      [&](const auto&) { std::cout << "cancel sent for command " << o.cancel_id << "\n"; });
}

int Drain(const edge::cli::GlobalOptions& opts, const NodeOptions& o) {
  apb::DrainNodeRequest req;
  req.set_node_id(o.drain_node);
  return NodeCall<apb::DrainNodeRequest, apb::DrainNodeResponse>(
      opts, req, &Stub::DrainNode,
      [&](const auto&) { std::cout << "drain sent to node " << o.drain_node << "\n"; });
}

int Shutdown(const edge::cli::GlobalOptions& opts, const NodeOptions& o) {
  auto grace = ParseDurationFlag("--grace", o.shutdown_grace, std::chrono::milliseconds(0), "10s");
  if (!grace) return kExitUsage;
  apb::ShutdownNodeRequest req;
  req.set_node_id(o.shutdown_node);
  req.set_grace_ms(grace->count());
  return NodeCall<apb::ShutdownNodeRequest, apb::ShutdownNodeResponse>(
      opts, req, &Stub::ShutdownNode,
      [&](const auto&) { std::cout << "shutdown sent to node " << o.shutdown_node << "\n"; });
}

int PushConfig(const edge::cli::GlobalOptions& opts, const NodeOptions& o) {
  std::string delta;
  if (o.push_file == "-") {
    delta.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    auto text = ReadFile(o.push_file, 4 << 20);
    if (!text) {
      std::fprintf(stderr, "error: cannot read %s: %s\n", o.push_file.c_str(),
                   text.error().message.c_str());
      return kExitUsage;
    }
    delta = std::move(*text);
  }
  apb::PushConfigRequest req;
  req.set_node_id(o.push_node);
  req.set_delta(delta);
  req.set_version(o.push_version);
  return NodeCall<apb::PushConfigRequest, apb::PushConfigResponse>(
      opts, req, &Stub::PushConfig, [&](const apb::PushConfigResponse& r) {
        if (!r.version().empty())
          std::cout << "config version " << r.version() << " sent to node " << o.push_node << "\n";
        if (r.has_limits_version())
          std::cout << "edge_api.limits of node " << o.push_node << ": config_version "
                    << r.limits_version() << "\n";
      });
}

int RevokeNode(const edge::cli::GlobalOptions& opts, const NodeOptions& o) {
  apb::RevokeNodeRequest req;
  req.set_node_id(o.revoke_node);
  return NodeCall<apb::RevokeNodeRequest, apb::RevokeNodeResponse>(
      opts, req, &Stub::RevokeNode,
      [&](const auto&) { std::cout << "node " << o.revoke_node << " revoked\n"; });
}

}  // namespace

edge::cli::CommandRunner AddNodeCommands(CLI::App& app, const edge::cli::GlobalOptions& opts) {
  auto o = std::make_shared<NodeOptions>();
  auto* nodes = app.add_subcommand("nodes", "list enrolled nodes");
  edge::cli::AddFormatOption(nodes, o->nodes_format);

  auto* cancel = app.add_subcommand("cancel", "cancel a running command");
  cancel->add_option("--command", o->cancel_id, "command id")->required();
  cancel->add_option("--reason", o->cancel_reason, "why (shown in the result)");

  auto* drain =
      app.add_subcommand("drain", "tell a node to refuse new work and finish what it runs");
  drain->add_option("--node", o->drain_node, "node id")->required();

  auto* shutdown = app.add_subcommand(
      "shutdown", "tell a node's agent to exit after cancelling what still runs after --grace");
  shutdown->add_option("--node", o->shutdown_node, "node id")->required();
  shutdown->add_option("--grace", o->shutdown_grace, "grace period")->capture_default_str();

  auto* push = app.add_subcommand(
      "push-config", "send a partial agent config (YAML or JSON file, '-' = stdin) to a node");
  push->add_option("--node", o->push_node, "node id")->required();
  push->add_option("file", o->push_file, "the config delta")->required();
  push->add_option("--version", o->push_version, "version label (default: v<epoch ms>)");

  auto* revoke = app.add_subcommand(
      "revoke-node",
      "revoke a node: its tokens stop working and its stream is closed; it stays revoked until "
      "a token from `token create --node N --replace` re-enrolls it");
  revoke->add_option("--node", o->revoke_node, "node id")->required();

  return [&opts, o, nodes, cancel, drain, shutdown, push, revoke]() -> std::optional<int> {
    if (*nodes) return Nodes(opts, o->nodes_format);
    if (*cancel) return Cancel(opts, *o);
    if (*drain) return Drain(opts, *o);
    if (*shutdown) return Shutdown(opts, *o);
    if (*push) return PushConfig(opts, *o);
    if (*revoke) return RevokeNode(opts, *o);
    return std::nullopt;
  };
}

}  // namespace edge::controller::cli
