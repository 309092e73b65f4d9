#include "controller/cli/token_commands.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include "admin.grpc.pb.h"
#include "common/clock.h"
#include "controller/cli/admin_cli.h"

namespace edge::controller::cli {
namespace {

namespace apb = admin::v1;
using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;

struct TokenOptions {
  std::string node, tenant, ttl, format, id;
  bool all = false, replace = false;
};

int Create(const edge::cli::GlobalOptions& opts, const TokenOptions& o) {
  if (o.replace && o.node.empty()) {
    std::fprintf(stderr,
                 "error: --replace needs --node: only a token bound to one node may replace "
                 "that node's identity\n");
    return kExitUsage;
  }
  apb::CreateJoinTokenRequest req;
  req.set_node_id(o.node);
  req.set_tenant_id(o.tenant);
  req.set_replace(o.replace);
  if (!o.ttl.empty()) {
    auto ttl = ParseDurationFlag("--ttl", o.ttl, std::chrono::seconds(1), "30m or 1h");
    if (!ttl) return kExitUsage;
    req.set_ttl_seconds(ttl->count() / 1000);
  }
  auto admin = OpenAdmin<apb::AdminService>(opts);
  if (!admin) return admin.error();
  auto& [cfg, stub] = *admin;
  apb::CreateJoinTokenResponse resp;
  auto st = stub->CreateJoinToken(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(cfg, st);
  if (o.format == "json") {
    nlohmann::json j = {{"token_id", resp.token_id()},
                        {"join_token", resp.join_token()},
                        {"expires_at", IsoTime(resp.expires_at_epoch_ms())}};
    std::cout << Dump(j) << "\n";
  } else {
    std::cout << "token id:   " << resp.token_id() << "\n"
              << "expires at: " << IsoTime(resp.expires_at_epoch_ms()) << "\n"
              << "join token: " << resp.join_token() << "\n";
  }
  return kExitOk;
}

// "active", "used by N", "revoked" or "expired".
std::string TokenState(const apb::JoinTokenInfo& t) {
  if (t.revoked_at_epoch_ms()) return "revoked";
  if (t.consumed_at_epoch_ms()) return "used by " + t.consumed_by_node_id();
  if (t.expires_at_epoch_ms() <= ToEpochMillis(SystemClock::Instance().Now())) return "expired";
  return "active";
}

int List(const edge::cli::GlobalOptions& opts, const TokenOptions& o) {
  auto admin = OpenAdmin<apb::AdminService>(opts);
  if (!admin) return admin.error();
  auto& [cfg, stub] = *admin;
  apb::ListJoinTokensRequest req;
  req.set_include_inactive(o.all);
  apb::ListJoinTokensResponse resp;
  auto st = stub->ListJoinTokens(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(cfg, st);
  if (o.format == "json") {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& t : resp.tokens()) {
      arr.push_back({{"token_id", t.token_id()},
                     {"node_id", t.node_id()},
                     {"tenant_id", t.tenant_id()},
                     {"created_at", IsoTime(t.created_at_epoch_ms())},
                     {"expires_at", IsoTime(t.expires_at_epoch_ms())},
                     {"replace", t.replace()},
                     {"state", TokenState(t)}});
    }
    std::cout << Dump(arr) << "\n";
    return kExitOk;
  }
  std::printf("%-24s %-16s %-10s %-21s %s\n", "TOKEN ID", "NODE", "TENANT", "EXPIRES", "STATE");
  for (const auto& t : resp.tokens()) {
    const std::string node =
        t.node_id().empty() ? "*" : t.node_id() + (t.replace() ? " (replace)" : "");
    std::printf("%-24s %-16s %-10s %-21s %s\n", t.token_id().c_str(), node.c_str(),
                t.tenant_id().c_str(), IsoTime(t.expires_at_epoch_ms()).c_str(),
                TokenState(t).c_str());
  }
  return kExitOk;
}

int Revoke(const edge::cli::GlobalOptions& opts, const TokenOptions& o) {
  auto admin = OpenAdmin<apb::AdminService>(opts);
  if (!admin) return admin.error();
  auto& [cfg, stub] = *admin;
  apb::RevokeJoinTokenRequest req;
  req.set_token_id(o.id);
  apb::RevokeJoinTokenResponse resp;
  auto st = stub->RevokeJoinToken(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(cfg, st);
  std::cout << "revoked " << o.id << "\n";
  return kExitOk;
}

}  // namespace

edge::cli::CommandRunner AddTokenCommands(CLI::App& app, const edge::cli::GlobalOptions& opts) {
  auto o = std::make_shared<TokenOptions>();
  auto* token = app.add_subcommand("token", "join tokens for enrolling agents");
  token->require_subcommand(1);
  auto* create = token->add_subcommand(
      "create",
      "create a single-use join token (without --node it enrolls only a node id the "
      "controller has never seen)");
  create->add_option("--node", o->node, "bind the token to this node id");
  create->add_flag("--replace", o->replace,
                   "with --node: the token may re-enroll that node although it exists, "
                   "replacing its identity (key, certificate) and lifting a revocation");
  create->add_option("--tenant", o->tenant, "tenant of the node (default: default)");
  create->add_option("--ttl", o->ttl, "lifetime, e.g. 30m or 1h (default: tokens.default_ttl)");
  edge::cli::AddFormatOption(create, o->format);
  auto* list = token->add_subcommand("list", "list join tokens (active ones unless --all)");
  list->add_flag("--all", o->all, "include used, revoked and expired tokens");
  edge::cli::AddFormatOption(list, o->format);
  auto* revoke = token->add_subcommand("revoke", "revoke a join token by id");
  revoke->add_option("token_id", o->id, "the token id")->required();

  return [&opts, o, create, list, revoke]() -> std::optional<int> {
    if (*create) return Create(opts, *o);
    if (*list) return List(opts, *o);
    if (*revoke) return Revoke(opts, *o);
    return std::nullopt;
  };
}

}  // namespace edge::controller::cli
