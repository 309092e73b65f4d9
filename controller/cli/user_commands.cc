#include "controller/cli/user_commands.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "admin.grpc.pb.h"
#include "controller/cli/admin_cli.h"

namespace edge::controller::cli {
namespace {

namespace apb = edge::admin::v1;
using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;
using nlohmann::json;

struct State {
  std::string user;
  std::string tenant;
  std::string ttl = "8h";
  std::string format;
};

int TokenCreate(const edge::cli::GlobalOptions& opts, const State& s) {
  auto ttl = ParseDurationFlag("--ttl", s.ttl, std::chrono::seconds(1), "8h");
  if (!ttl) return kExitUsage;
  auto admin = OpenAdmin<apb::AdminService>(opts);
  if (!admin) return admin.error();
  auto& [cfg, stub] = *admin;
  apb::CreateUserTokenRequest req;
  req.set_user(s.user);
  req.set_tenant_id(s.tenant);
  req.set_ttl_seconds(std::chrono::duration_cast<std::chrono::seconds>(*ttl).count());
  apb::CreateUserTokenResponse resp;
  auto st = stub->CreateUserToken(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(cfg, st, kExitFailure);
  PrintMintedToken(s.format, resp.token(), resp.jti(), resp.expires_at_epoch_ms(),
                   {{"user", s.user}, {"tenant", s.tenant}}, "user token",
                   "for user " + s.user + ", tenant " + s.tenant);
  return kExitOk;
}

}  // namespace

edge::cli::CommandRunner AddUserCommands(CLI::App& app, const edge::cli::GlobalOptions& opts) {
  auto s = std::make_shared<State>();
  auto* user = app.add_subcommand("user", "operator users of the northbound API");
  user->require_subcommand(1);
  auto* token = user->add_subcommand("token", "bearer tokens for operator users");
  token->require_subcommand(1);
  auto* create = token->add_subcommand(
      "create", "mint a user token (ES256 JWT, aud edge-api; prints it on stdout)");
  create->add_option("--user", s->user, "the user (the token's sub)")->required();
  create->add_option("--tenant", s->tenant, "the tenant whose nodes the user sees")->required();
  create->add_option("--ttl", s->ttl, "lifetime, e.g. 8h")->capture_default_str();
  edge::cli::AddFormatOption(create, s->format);
  return [s, create, &opts]() -> std::optional<int> {
    if (*create) return TokenCreate(opts, *s);
    return std::nullopt;
  };
}

}  // namespace edge::controller::cli
