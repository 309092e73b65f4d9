#include "controller/cli/compute_commands.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/compute/cloudevent_codec.h"
#include "common/atomic_file.h"
#include "common/json_parse.h"
#include "compute_admin.grpc.pb.h"
#include "config/controller_config.h"
#include "controller/cli/admin_cli.h"

namespace edge::controller::cli {
namespace {

namespace apb = edge::admin::v1;
using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;
using nlohmann::json;

struct State {
  // token create
  std::string tenant;
  std::vector<std::string> roles;
  std::string ttl = "24h";
  std::string subject;
  std::string token_format;
  // members
  std::string members_format;
  // dispatch
  std::vector<std::string> tags;
  std::string processor, criteria, entity_file, entity_id, timeout, wait;
  std::string dispatch_tenant = "default";
  std::string dispatch_format;
};

int TokenCreate(const edge::cli::GlobalOptions& opts, const State& s) {
  auto ttl = ParseDurationFlag("--ttl", s.ttl, std::chrono::seconds(1), "8h");
  if (!ttl) return kExitUsage;
  auto admin = OpenAdmin<apb::ComputeAdmin>(opts);
  if (!admin) return admin.error();
  auto& [cfg, stub] = *admin;
  apb::CreateComputeTokenRequest req;
  req.set_tenant_id(s.tenant);
  for (const auto& r : s.roles)
    req.add_roles(r);
  req.set_ttl_seconds(std::chrono::duration_cast<std::chrono::seconds>(*ttl).count());
  req.set_subject(s.subject);
  apb::CreateComputeTokenResponse resp;
  auto st = stub->CreateComputeToken(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(cfg, st, kExitFailure);
  PrintMintedToken(s.token_format, resp.token(), resp.jti(), resp.expires_at_epoch_ms(),
                   {{"tenant", s.tenant}, {"roles", s.roles}}, "compute token",
                   "for tenant " + s.tenant);
  return kExitOk;
}

int Members(const edge::cli::GlobalOptions& opts, const State& s) {
  auto admin = OpenAdmin<apb::ComputeAdmin>(opts);
  if (!admin) return admin.error();
  auto& [cfg, stub] = *admin;
  apb::ListComputeMembersResponse resp;
  auto st = stub->ListComputeMembers(CallContext().get(), {}, &resp);
  if (!st.ok()) return ReportRpcFailure(cfg, st, kExitFailure);
  if (s.members_format == "json") {
    json out = json::array();
    for (const auto& m : resp.members()) {
      out.push_back({{"member_id", m.member_id()},
                     {"tenant", m.tenant_id()},
                     {"tags", std::vector<std::string>(m.tags().begin(), m.tags().end())},
                     {"connected_since", IsoTimeMs(m.connected_since_epoch_ms())},
                     {"last_seen", IsoTimeMs(m.last_seen_epoch_ms())},
                     {"calls_in_flight", m.calls_in_flight()},
                     {"subject", m.subject()},
                     {"peer", m.peer()}});
    }
    std::cout << json{{"members", out}}.dump() << "\n";
    return kExitOk;
  }
  std::printf("%-36s  %-12s  %-24s  %-24s  %-24s  %s\n", "MEMBER", "TENANT", "TAGS",
              "CONNECTED SINCE", "LAST SEEN", "IN FLIGHT");
  for (const auto& m : resp.members()) {
    std::string tags;
    for (const auto& t : m.tags())
      tags += (tags.empty() ? "" : ",") + t;
    std::printf("%-36s  %-12s  %-24s  %-24s  %-24s  %u\n", m.member_id().c_str(),
                m.tenant_id().c_str(), tags.empty() ? "-" : tags.c_str(),
                IsoTimeMs(m.connected_since_epoch_ms()).c_str(),
                IsoTimeMs(m.last_seen_epoch_ms()).c_str(), m.calls_in_flight());
  }
  return kExitOk;
}

int Dispatch(const edge::cli::GlobalOptions& opts, const State& s) {
  if (s.processor.empty() == s.criteria.empty()) {
    std::fprintf(stderr, "error: give exactly one of --processor or --criteria\n");
    return kExitUsage;
  }
  std::string entity = "{}";
  if (!s.entity_file.empty()) {
    auto text = s.entity_file == "-"
                    ? Result<std::string>(std::string(std::istreambuf_iterator<char>(std::cin), {}))
                    : ReadFile(s.entity_file, 16 << 20);
    if (!text) {
      std::fprintf(stderr, "error: --entity %s: %s\n", s.entity_file.c_str(),
                   text.error().message.c_str());
      return kExitUsage;
    }
    auto parsed = ParseJsonBounded(*text, "--entity " + s.entity_file);
    if (!parsed || !parsed->is_object()) {
      std::fprintf(stderr, "error: --entity %s: %s\n", s.entity_file.c_str(),
                   parsed ? "must hold a JSON object" : parsed.error().message.c_str());
      return kExitUsage;
    }
    entity = parsed->dump();
  }
  std::chrono::milliseconds timeout{0}, wait{-1};
  if (!s.timeout.empty()) {
    auto t = ParseDurationFlag("--timeout", s.timeout, std::chrono::milliseconds(1), "30s");
    if (!t) return kExitUsage;
    timeout = *t;
  }
  if (!s.wait.empty()) {
    auto w = ParseDurationFlag("--wait", s.wait, std::chrono::milliseconds(0), "5s");
    if (!w) return kExitUsage;
    wait = *w;
  }
  auto admin = OpenAdmin<apb::ComputeAdmin>(opts, false, kExitDispatchUnreachable);
  if (!admin) return admin.error();
  auto& [cfg, stub] = *admin;
  apb::DispatchComputeRequest req;
  req.set_tenant_id(s.dispatch_tenant);
  for (const auto& t : s.tags)
    req.add_tags(t);
  req.set_criteria(!s.criteria.empty());
  req.set_name(s.criteria.empty() ? s.processor : s.criteria);
  req.set_entity_json(entity);
  req.set_entity_id(s.entity_id);
  req.set_timeout_ms(timeout.count());
  req.set_member_wait_ms(wait.count());
  apb::DispatchComputeResponse resp;
  grpc::ClientContext ctx;
  const auto budget = (timeout.count() > 0 ? timeout : cfg.compute.dispatch_timeout) +
                      (wait.count() >= 0 ? wait : cfg.compute.member_wait) +
                      std::chrono::seconds(10);
  ctx.set_deadline(std::chrono::system_clock::now() + budget);
  auto st = stub->DispatchCompute(&ctx, req, &resp);
  if (!st.ok()) return ReportRpcFailure(cfg, st, kExitDispatchUnreachable);
  json response = nullptr;
  if (!resp.response_json().empty()) {
    response = json::parse(resp.response_json(), nullptr, false);
  }
  if (s.dispatch_format == "json") {
    json out = {{"request_id", resp.request_id()},
                {"member_id", resp.member_id()},
                {"duration_ms", resp.duration_ms()}};
    if (!resp.error_code().empty()) {
      out["error"] = {{"code", resp.error_code()}, {"message", resp.message()}};
    } else {
      out["response"] = response;
    }
    std::cout << out.dump() << "\n";
  } else if (!resp.error_code().empty()) {
    std::fprintf(stderr, "dispatch failed: %s: %s\n", resp.error_code().c_str(),
                 resp.message().c_str());
  } else {
    std::cout << response.dump(2) << "\n";
  }
  if (resp.error_code() == compute::kNoComputeMemberForTag) return kExitDispatchNoMember;
  if (resp.error_code() == compute::kComputeMemberDisconnected) return kExitDispatchDisconnected;
  if (resp.error_code() == compute::kDispatchTimeout) return kExitDispatchTimeout;
  if (!resp.error_code().empty()) return kExitDispatchUnreachable;
  return resp.success() ? kExitOk : kExitFailure;
}

}  // namespace

edge::cli::CommandRunner AddComputeCommands(CLI::App& app, const edge::cli::GlobalOptions& opts) {
  auto s = std::make_shared<State>();
  auto* compute = app.add_subcommand("compute", "compute members (CloudEventsService)");
  compute->require_subcommand(1);

  auto* token = compute->add_subcommand("token", "bearer tokens for compute members");
  token->require_subcommand(1);
  auto* create = token->add_subcommand(
      "create", "mint a compute member token (ES256 JWT; prints it on stdout)");
  create->add_option("--tenant", s->tenant, "tenant (the member's legal entity)")->required();
  create->add_option("--role", s->roles, "role, repeatable (startStreaming needs ROLE_M2M)")
      ->required();
  create->add_option("--ttl", s->ttl, "lifetime, e.g. 8h")->capture_default_str();
  create->add_option("--subject", s->subject, "a label for the token's sub claim");
  edge::cli::AddFormatOption(create, s->token_format);

  auto* members = compute->add_subcommand(
      "members", "list joined members: id, tenant, tags, connected since, last seen, in flight");
  edge::cli::AddFormatOption(members, s->members_format);

  auto* dispatch = compute->add_subcommand(
      "dispatch",
      "send one processor or criteria request to a member chosen by tags and print its "
      "response; exit 0 success, 1 success:false, 3 NO_COMPUTE_MEMBER_FOR_TAG, "
      "4 COMPUTE_MEMBER_DISCONNECTED, 5 DISPATCH_TIMEOUT, 6 controller not reachable");
  dispatch->add_option("--tags", s->tags, "member tags (any one matches; none = any member)")
      ->delimiter(',');
  dispatch->add_option("--processor", s->processor, "processor name");
  dispatch->add_option("--criteria", s->criteria, "criteria name");
  dispatch->add_option("--entity", s->entity_file,
                       "the entity data: a JSON object file, - = stdin");
  dispatch->add_option("--entity-id", s->entity_id, "the entity id (default: a new UUID)");
  dispatch->add_option("--tenant", s->dispatch_tenant, "tenant")->capture_default_str();
  dispatch->add_option("--timeout", s->timeout,
                       "response timeout (default compute.dispatch_timeout)");
  dispatch->add_option("--wait", s->wait,
                       "how long to wait for a matching member (default compute.member_wait)");
  edge::cli::AddFormatOption(dispatch, s->dispatch_format);

  return [s, create, members, dispatch, &opts]() -> std::optional<int> {
    if (*create) return TokenCreate(opts, *s);
    if (*members) return Members(opts, *s);
    if (*dispatch) return Dispatch(opts, *s);
    return std::nullopt;
  };
}

}  // namespace edge::controller::cli
