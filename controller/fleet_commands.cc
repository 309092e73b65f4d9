#include "controller/fleet_commands.h"

#include "common/log.h"
#include "common/random.h"
#include "controller/command_notes.h"
#include "controller/edge_codec.h"
#include "controller/fleet_selector.h"

namespace edge::controller {

bool FleetCommandView::finished() const {
  for (const auto& p : parts)
    if (p.state == kPartPending || p.state == kPartRunning) return false;
  return true;
}

bool FleetCommandView::all_succeeded() const {
  for (const auto& p : parts)
    if (p.state != "ok" || p.exit_code.value_or(1) != 0) return false;
  return true;
}

FleetPartView FleetCommands::PartView(const FleetPartRecord& part,
                                      const std::optional<CommandRecord>& command) {
  FleetPartView v{.node_id = part.node_id};
  if (!command) {
    // Never stored as a command: refused before that, or not sent yet.
    if (!part.error_code.empty()) {
      v.state = "error";
      v.error_code = part.error_code;
      v.error_message = part.error_message;
    } else {
      v.state = kPartPending;
      v.command_id = part.command_id;
    }
    return v;
  }
  v.command_id = command->command_id;
  if (command->state != kCommandCompleted) {
    v.state = kPartRunning;
    return v;
  }
  const auto& r = command->result;
  v.state = r.outcome;
  v.duration_ms = std::max<int64_t>(0, command->completed_at_ms - command->created_at_ms);
  if (r.outcome == "ok") {
    v.exit_code = r.exit_code;
    v.output_cap_note = OutputCapNote(*command).value_or("");
  } else if (r.outcome == "timed_out") {
    v.error_code = "TIMED_OUT";
    v.error_message = r.message.empty() ? "the command ran out of time on the node" : r.message;
  } else if (r.outcome == "cancelled") {
    v.error_code = "CANCELLED";
    v.error_message = r.message;
  } else {
    v.error_code = r.error_code.empty() ? "ERROR" : r.error_code;
    v.error_message = r.message;
  }
  // A part refused after its command was stored (the stream ended as it was sent) keeps
  // the command's own result; nothing more to add.
  return v;
}

Result<FleetCommandView> FleetCommands::ViewOf(FleetCommandRecord record) const {
  FleetCommandView view;
  for (const auto& p : record.parts) {
    std::optional<CommandRecord> command;
    if (!p.command_id.empty()) {
      auto c = store_.GetCommand(p.command_id);
      if (!c) return std::unexpected(c.error());
      command = std::move(*c);
    }
    view.parts.push_back(PartView(p, command));
  }
  view.record = std::move(record);
  return view;
}

Result<FleetCommandView> FleetCommands::Invoke(const FleetInvokeSpec& spec,
                                               const FleetHooks& hooks) {
  auto selector = FleetSelector::Parse(spec.selector);
  if (!selector) return std::unexpected(selector.error());
  if (spec.tool.empty()) return MakeError(ErrorCode::kInvalidArgument, "tool is required");
  if (spec.deadline.count() < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "deadline " + std::to_string(spec.deadline.count()) + " ms is negative");
  }
  if (auto args = StructFromJsonObject(spec.args_json, "args"); !args) {
    return std::unexpected(args.error());
  }
  auto nodes = spec.tenant_id.empty() ? fleet_.ListNodes() : fleet_.ListTenantNodes(spec.tenant_id);
  if (!nodes) return std::unexpected(nodes.error());

  FleetCommandRecord rec{.fleet_id = NewUuidV4(),
                         .tenant_id = spec.tenant_id,
                         .created_by = spec.created_by,
                         .selector = selector->ToString(),
                         .tool = spec.tool,
                         .args_json = spec.args_json.empty() ? "{}" : spec.args_json,
                         .security_context = spec.security_context,
                         .deadline_ms = spec.deadline.count(),
                         .created_at_ms = ToEpochMillis(clock_.Now())};
  size_t not_live = 0;
  for (const auto& v : *nodes) {
    if (!selector->Matches(v)) continue;
    if (!IsLive(v)) {
      ++not_live;
      continue;
    }
    rec.parts.push_back({.node_id = v.node.node_id, .command_id = NewUuidV4()});
  }
  if (rec.parts.empty()) {
    std::string why = "no live node matches selector \"" + log::Escape(rec.selector, 200) + "\"";
    if (not_live > 0) {
      why += " (" + std::to_string(not_live) +
             " node(s) match but are not connected or are revoked; only live nodes take part)";
    }
    return MakeError(ErrorCode::kNotFound, why);
  }
  if (auto st = store_.InsertFleetCommand(rec); !st) return std::unexpected(st.error());
  if (hooks.planned) hooks.planned(rec);

  // All parts in one go: their commands are stored in one transaction, then sent.
  std::vector<InvokeSpec> specs;
  std::vector<std::shared_ptr<CommandObserver>> observers;
  specs.reserve(rec.parts.size());
  observers.reserve(rec.parts.size());
  for (const auto& part : rec.parts) {
    specs.push_back({.node_id = part.node_id,
                     .tool = spec.tool,
                     .args_json = rec.args_json,
                     .security_context = spec.security_context,
                     .deadline = spec.deadline,
                     .command_id = part.command_id});
    observers.push_back(hooks.observer ? hooks.observer(part.node_id) : nullptr);
  }
  auto ids = dispatcher_.InvokeMany(specs, observers);
  size_t refused = 0;
  for (size_t i = 0; i < rec.parts.size(); ++i) {
    if (ids[i]) continue;
    auto& part = rec.parts[i];
    ++refused;
    part.error_code = std::string(ErrorCodeName(ids[i].error().code));
    part.error_message = ids[i].error().message;
    log::Get("fleet")->warn("fleet command {}: node {} refused {}: {}", rec.fleet_id,
                            log::Escape(part.node_id), log::Escape(spec.tool),
                            log::Escape(part.error_message, 512));
    if (auto st = store_.SetFleetPartError(rec.fleet_id, part.node_id, part.error_code,
                                           part.error_message);
        !st) {
      log::Get("fleet")->error("fleet command {}: the refusal of node {} not stored: {}",
                               rec.fleet_id, log::Escape(part.node_id), st.error().ToString());
    }
  }
  log::Get("fleet")->info(
      "fleet command {} by {}: {} on {} node(s) matching \"{}\"{}", rec.fleet_id,
      log::Escape(spec.created_by, 128), log::Escape(spec.tool), rec.parts.size(),
      log::Escape(rec.selector, 200),
      refused ? ", " + std::to_string(refused) + " refused at dispatch" : std::string());
  return ViewOf(std::move(rec));
}

Result<FleetCommandView> FleetCommands::Get(const std::string& fleet_id,
                                            const std::string& tenant_id) const {
  if (fleet_id.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "fleet_command_id is required");
  }
  auto rec = store_.GetFleetCommand(fleet_id);
  if (!rec) return std::unexpected(rec.error());
  if (!*rec || (!tenant_id.empty() && (*rec)->tenant_id != tenant_id)) {
    return MakeError(ErrorCode::kNotFound,
                     "fleet command " + log::Escape(fleet_id, 128) + " not found");
  }
  return ViewOf(std::move(**rec));
}

Result<std::vector<FleetCommandView>> FleetCommands::List(int limit) const {
  if (limit < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "limit " + std::to_string(limit) + " is negative");
  }
  auto list = store_.ListFleetCommands(limit);
  if (!list) return std::unexpected(list.error());
  std::vector<FleetCommandView> out;
  for (auto& rec : *list) {
    auto v = ViewOf(std::move(rec));
    if (!v) return std::unexpected(v.error());
    out.push_back(std::move(*v));
  }
  return out;
}

Result<std::vector<FleetPartCancel>> FleetCommands::Cancel(const std::string& fleet_id,
                                                           const std::string& tenant_id,
                                                           const std::string& reason) {
  auto view = Get(fleet_id, tenant_id);
  if (!view) return std::unexpected(view.error());
  if (auto st = store_.MarkFleetCancelled(fleet_id, ToEpochMillis(clock_.Now())); !st) {
    return std::unexpected(st.error());
  }
  const std::string why =
      reason.empty() ? "fleet command " + fleet_id + " cancelled by the operator" : reason;
  std::vector<FleetPartCancel> out;
  size_t sent = 0;
  for (const auto& p : view->parts) {
    FleetPartCancel c{.node_id = p.node_id, .command_id = p.command_id};
    if (p.state != kPartRunning) {
      c.outcome = "ended";
      c.message = "the part is " + p.state;
    } else if (auto st = dispatcher_.Cancel(p.command_id, why); st) {
      c.outcome = "sent";
      ++sent;
    } else if (st.error().code == ErrorCode::kFailedPrecondition) {
      c.outcome = "ended";  // its result arrived meanwhile
      c.message = st.error().message;
    } else {
      c.outcome = "not_delivered";
      c.message = st.error().message;
    }
    out.push_back(std::move(c));
  }
  log::Get("fleet")->info("fleet command {}: cancel sent to {} of {} part(s)", fleet_id, sent,
                          out.size());
  return out;
}

}  // namespace edge::controller
