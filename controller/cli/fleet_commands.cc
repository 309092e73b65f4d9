#include "controller/cli/fleet_commands.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/signals.h"
#include "config/duration.h"
#include "controller/cli/admin_cli.h"
#include "controller/command_notes.h"
#include "controller/fleet_selector.h"
#include "fleet_admin.grpc.pb.h"

namespace edge::controller::cli {
namespace {

namespace apb = admin::v1;
using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;
using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr int kExitResultUnknown = 75;
constexpr int kExitCancelled = 130;
// After Ctrl-C / SIGTERM, how long `fleet invoke` waits for the cancelled parts' results.
constexpr std::chrono::seconds kCancelWait{5};
// With --timeout, how long past it `fleet invoke` waits for parts that say nothing.
constexpr std::chrono::seconds kTimeoutSlack{60};

struct TagOptions {
  std::string node, format;
  std::vector<std::string> add, remove;
};

struct FleetOptions {
  std::string selector, tool, args_json, context, timeout, format, id, reason;
  std::vector<std::string> args;
  bool detach = false;
  int limit = 20;
};

// ---- tags ----------------------------------------------------------------------------------

void PrintTags(const apb::NodeTagsResponse& resp, const std::string& format) {
  std::map<std::string, std::string> tags(resp.tags().begin(), resp.tags().end());
  if (format == "json") {
    std::cout << Dump(json{{"node_id", resp.node_id()}, {"tags", tags}}) << "\n";
    return;
  }
  if (tags.empty()) {
    std::fprintf(stderr, "node %s has no tags\n", resp.node_id().c_str());
    return;
  }
  for (const auto& [k, v] : tags)
    std::cout << k << "=" << v << "\n";
}

int TagList(const edge::cli::GlobalOptions& opts, const TagOptions& o) {
  auto admin = OpenAdmin<apb::FleetAdmin>(opts);
  if (!admin) return admin.error();
  apb::GetNodeTagsRequest req;
  req.set_node_id(o.node);
  apb::NodeTagsResponse resp;
  auto st = admin->stub->GetNodeTags(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(admin->cfg, st);
  PrintTags(resp, o.format);
  return kExitOk;
}

int TagUpdate(const edge::cli::GlobalOptions& opts, const TagOptions& o, bool add) {
  apb::UpdateNodeTagsRequest req;
  req.set_node_id(o.node);
  for (const auto& text : add ? o.add : o.remove) {
    if (!CheckUtf8(add ? "tag add" : "tag remove", text)) return kExitUsage;
    if (add) {
      auto kv = ParseTagAssignment(text);
      if (!kv) {
        std::fprintf(stderr, "error: %s\n", kv.error().message.c_str());
        return kExitUsage;
      }
      (*req.mutable_set())[kv->first] = kv->second;
    } else {
      auto r = ParseTagRemoval(text);
      if (!r) {
        std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
        return kExitUsage;
      }
      auto* out = req.add_remove();
      out->set_key(r->key);
      out->set_has_value(r->value.has_value());
      out->set_value(r->value.value_or(""));
    }
  }
  auto admin = OpenAdmin<apb::FleetAdmin>(opts);
  if (!admin) return admin.error();
  apb::NodeTagsResponse resp;
  auto st = admin->stub->UpdateNodeTags(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(admin->cfg, st);
  PrintTags(resp, o.format);
  return kExitOk;
}

// ---- fleet ---------------------------------------------------------------------------------

std::string DurationText(const apb::FleetPart& p) {
  return p.has_duration() ? config::FormatDuration(milliseconds(p.duration_ms())) : "-";
}

json PartJson(const apb::FleetPart& p) {
  json j = {{"node_id", p.node_id()},
            {"command_id", p.command_id()},
            {"state", p.state()},
            {"exit_code", p.has_exit_code() ? json(p.exit_code()) : json(nullptr)},
            {"duration_ms", p.has_duration() ? json(p.duration_ms()) : json(nullptr)},
            {"error", nullptr},
            {"output_capped", !p.output_cap_note().empty()}};
  if (!p.error_code().empty()) {
    j["error"] = {{"code", p.error_code()}, {"message", p.error_message()}};
  }
  if (!p.output_cap_note().empty()) j["output_cap_note"] = p.output_cap_note();
  return j;
}

json FleetJson(const apb::FleetCommandInfo& f) {
  json parts = json::array();
  for (const auto& p : f.parts())
    parts.push_back(PartJson(p));
  return {{"fleet_command_id", f.fleet_command_id()},
          {"tenant_id", f.tenant_id()},
          {"created_by", f.created_by()},
          {"selector", f.selector()},
          {"tool", f.tool()},
          {"args", JsonOrText(f.args_json())},
          {"deadline_ms", f.deadline_ms()},
          {"created_at", JsonTime(f.created_at_epoch_ms())},
          {"cancelled_at", JsonTime(f.cancelled_at_epoch_ms())},
          {"state", f.state()},
          {"parts", std::move(parts)}};
}

bool Succeeded(const apb::FleetPart& p) {
  return p.state() == "ok" && p.has_exit_code() && p.exit_code() == 0;
}

// The per-node table: node, state, exit code, duration, command, error.
void PrintParts(const std::vector<apb::FleetPart>& parts) {
  std::printf("%-20s %-10s %-5s %-9s %-36s %s\n", "NODE", "STATE", "EXIT", "DURATION", "COMMAND",
              "ERROR");
  for (const auto& p : parts) {
    std::string exit = p.has_exit_code() ? std::to_string(p.exit_code()) : "-";
    std::string error = p.error_code().empty() ? "" : p.error_code() + ": " + p.error_message();
    char row[256];
    std::snprintf(row, sizeof row, "%-20s %-10s %-5s %-9s %-36s", p.node_id().c_str(),
                  p.state().c_str(), exit.c_str(), DurationText(p).c_str(),
                  p.command_id().empty() ? "-" : p.command_id().c_str());
    std::string line = row;
    if (!error.empty()) line += " " + error;
    std::printf("%s\n", line.c_str());
  }
}

// "3 part(s): 2 succeeded, 1 failed, 0 running"
std::string Tally(const std::vector<apb::FleetPart>& parts) {
  size_t ok = 0, failed = 0, running = 0;
  for (const auto& p : parts) {
    if (p.state() == "running" || p.state() == "pending") {
      ++running;
    } else if (Succeeded(p)) {
      ++ok;
    } else {
      ++failed;
    }
  }
  return std::to_string(parts.size()) + " part(s): " + std::to_string(ok) + " succeeded, " +
         std::to_string(failed) + " failed, " + std::to_string(running) + " running";
}

// Output lines of one node's stream, each printed whole with a "[node] " prefix (chunks are
// cut anywhere; a part's last partial line is printed when it ends).
class LinePrinter {
 public:
  explicit LinePrinter(bool collect) : collect_(collect) {}

  void Add(const std::string& node, bool err, const std::string& data) {
    auto& s = streams_[{node, err}];
    if (collect_) {
      s += data;
      return;
    }
    s += data;
    size_t start = 0, nl;
    while ((nl = s.find('\n', start)) != std::string::npos) {
      Print(node, err, std::string_view(s).substr(start, nl - start));
      start = nl + 1;
    }
    s.erase(0, start);
  }
  // The part of `node` ended: its partial lines are printed.
  void Flush(const std::string& node) {
    if (collect_) return;
    for (bool err : {false, true}) {
      auto it = streams_.find({node, err});
      if (it == streams_.end() || it->second.empty()) continue;
      Print(node, err, it->second);
      it->second.clear();
    }
  }
  // Collected output (--format json).
  std::string Collected(const std::string& node, bool err) const {
    auto it = streams_.find({node, err});
    return it == streams_.end() ? "" : it->second;
  }

 private:
  static void Print(const std::string& node, bool err, std::string_view line) {
    FILE* fp = err ? stderr : stdout;
    std::string out = "[" + node + "] ";
    out.append(line);
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), fp);
    std::fflush(fp);
  }

  const bool collect_;
  std::map<std::pair<std::string, bool>, std::string> streams_;
};

// Beside a `fleet invoke` call, on a thread of its own: the first Ctrl-C / SIGTERM cancels
// the fleet command (a second one leaves at once, 130); the call is ended when the cancelled
// parts do not all end within kCancelWait. Stopped and joined by its destructor.
class FleetWatcher {
 public:
  FleetWatcher(apb::FleetAdmin::Stub& stub, grpc::ClientContext& call)
      : stub_(stub), call_(call), thread_([this] { Run(); }) {}
  ~FleetWatcher() {
    done_ = true;
    ::pthread_kill(thread_.native_handle(), SIGTERM);  // wakes its wait at once
    thread_.join();
  }
  void SetFleetId(const std::string& id) {
    std::lock_guard lock(mu_);
    fleet_id_ = id;
  }
  bool interrupted() const { return interrupted_; }

 private:
  void Run() {
    int signals = 0;
    std::optional<std::chrono::steady_clock::time_point> give_up;
    while (!done_) {
      auto sig = WaitForTerminationSignal(milliseconds(100));
      if (done_) break;
      if (give_up && std::chrono::steady_clock::now() >= *give_up) {
        call_.TryCancel();
        return;
      }
      if (!sig) continue;
      std::string id;
      {
        std::lock_guard lock(mu_);
        id = fleet_id_;
      }
      if (++signals > 1 || id.empty()) std::_Exit(kExitCancelled);
      interrupted_ = true;
      std::fprintf(stderr,
                   "interrupted: cancelling fleet command %s (waiting up to %llds for its parts; "
                   "again to leave now)\n",
                   id.c_str(), static_cast<long long>(kCancelWait.count()));
      apb::CancelFleetCommandRequest req;
      req.set_fleet_command_id(id);
      req.set_reason("interrupted by the operator");
      apb::CancelFleetCommandResponse resp;
      auto st = stub_.CancelFleetCommand(CallContext(std::chrono::seconds(5)).get(), req, &resp);
      if (!st.ok()) std::fprintf(stderr, "cancel not delivered: %s\n", st.error_message().c_str());
      give_up = std::chrono::steady_clock::now() + kCancelWait;
    }
  }

  apb::FleetAdmin::Stub& stub_;
  grpc::ClientContext& call_;
  std::atomic<bool> done_{false};
  std::atomic<bool> interrupted_{false};
  std::mutex mu_;
  std::string fleet_id_;
  std::thread thread_;  // last: starts once everything above is set
};

int Invoke(const edge::cli::GlobalOptions& opts, const FleetOptions& o) {
  for (const auto& [flag, value] :
       {std::pair{"--selector", &o.selector}, std::pair{"--tool", &o.tool},
        std::pair{"--context", &o.context}}) {
    if (!CheckUtf8(flag, *value)) return kExitUsage;
  }
  auto args = ArgsFromFlags(o.args_json, o.args);
  if (!args) return kExitUsage;
  apb::FleetInvokeRequest req;
  req.set_selector(o.selector);
  req.set_tool(o.tool);
  req.set_args_json(*args);
  req.set_security_context(o.context);
  req.set_detach(o.detach);
  if (!o.timeout.empty()) {
    auto d = ParseDurationFlag("--timeout", o.timeout, milliseconds(1), "30s");
    if (!d) return kExitUsage;
    req.set_deadline_ms(d->count());
  }
  const bool as_json = o.format == "json";
  BlockTerminationSignals();
  auto admin = OpenAdmin<apb::FleetAdmin>(opts, /*wait_connected=*/true);
  if (!admin) return admin.error();
  grpc::ClientContext ctx;
  if (req.deadline_ms() > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(req.deadline_ms()) +
                     kTimeoutSlack);
  }
  auto reader = admin->stub->FleetInvoke(&ctx, req);
  apb::FleetCommandInfo fleet;
  std::map<std::string, apb::FleetPart> ended;  // by node
  LinePrinter lines(as_json);
  grpc::Status st;
  bool interrupted = false;
  bool output_dropped = false;   // some output was dropped for this client (output_dropped)
  std::set<std::string> capped;  // nodes whose output cap dropped output (output_capped)
  {
    FleetWatcher watcher(*admin->stub, ctx);
    apb::FleetInvokeEvent ev;
    while (reader->Read(&ev)) {
      switch (ev.event_case()) {
        case apb::FleetInvokeEvent::kAccepted:
          fleet = ev.accepted();
          watcher.SetFleetId(fleet.fleet_command_id());
          if (o.detach) std::cout << fleet.fleet_command_id() << "\n";
          if (!as_json) {
            std::fprintf(stderr, "fleet command %s: %s on %d node(s) matching \"%s\"\n",
                         fleet.fleet_command_id().c_str(), fleet.tool().c_str(), fleet.parts_size(),
                         fleet.selector().c_str());
          }
          break;
        case apb::FleetInvokeEvent::kOutput:
          lines.Add(ev.output().node_id(), ev.output().stderr(), ev.output().data());
          break;
        case apb::FleetInvokeEvent::kNote:
          if (ev.note().state() == controller::kOutputDropped) output_dropped = true;
          if (ev.note().state() == controller::kOutputCapped) capped.insert(ev.note().node_id());
          if (!as_json && (ev.note().state() == controller::kNodeDisconnected ||
                           ev.note().state() == controller::kNodeReconnected ||
                           ev.note().state() == controller::kOutputDropped ||
                           ev.note().state() == controller::kOutputResumed ||
                           ev.note().state() == controller::kOutputCapped)) {
            if (ev.note().node_id().empty()) {  // about the whole call
              std::fprintf(stderr, "note: %s\n", ev.note().message().c_str());
            } else {
              std::fprintf(stderr, "[%s] note: %s\n", ev.note().node_id().c_str(),
                           ev.note().message().c_str());
            }
          }
          break;
        case apb::FleetInvokeEvent::kPartResult:
          lines.Flush(ev.part_result().node_id());
          // The result names its cap too (a client that joined late missed the note).
          if (!ev.part_result().output_cap_note().empty()) {
            capped.insert(ev.part_result().node_id());
          }
          ended[ev.part_result().node_id()] = ev.part_result();
          break;
        case apb::FleetInvokeEvent::EVENT_NOT_SET:
          break;
      }
    }
    st = reader->Finish();
    interrupted = watcher.interrupted();
  }
  if (fleet.fleet_command_id().empty()) {
    // Refused before anything was created.
    return st.ok() ? kExitFailure : ReportRpcFailure(admin->cfg, st);
  }
  const std::string& id = fleet.fleet_command_id();
  // Every part as it stands: ended ones from their results, the rest as accepted.
  std::vector<apb::FleetPart> parts;
  for (const auto& p : fleet.parts()) {
    auto it = ended.find(p.node_id());
    parts.push_back(it != ended.end() ? it->second : p);
  }
  if (o.detach) {
    for (const auto& p : parts) {
      if (!p.error_code().empty()) {
        std::fprintf(stderr, "[%s] not sent: %s: %s\n", p.node_id().c_str(), p.error_code().c_str(),
                     p.error_message().c_str());
      }
    }
    return st.ok() ? kExitOk : ReportRpcFailure(admin->cfg, st);
  }
  if (as_json) {
    json j = {{"fleet_command_id", id},
              {"selector", fleet.selector()},
              {"tool", fleet.tool()},
              {"parts", json::array()},
              {"output_complete", !output_dropped && capped.empty()}};
    for (const auto& p : parts) {
      json pj = PartJson(p);
      pj["output_capped"] = capped.contains(p.node_id());  // from the note or the result
      pj["stdout"] = lines.Collected(p.node_id(), false);
      pj["stderr"] = lines.Collected(p.node_id(), true);
      j["parts"].push_back(std::move(pj));
    }
    std::cout << Dump(j) << "\n";
  } else {
    std::fflush(stderr);
    PrintParts(parts);
    std::printf("fleet command %s: %s\n", id.c_str(), Tally(parts).c_str());
    std::fflush(stdout);
  }
  const bool all_ended = ended.size() >= static_cast<size_t>(fleet.parts_size());
  if (!all_ended) {
    if (interrupted) {
      std::fprintf(stderr,
                   "interrupted: left before every part ended; see `edge-controller fleet get "
                   "%s`\n",
                   id.c_str());
      return kExitCancelled;
    }
    std::fprintf(stderr,
                 "error: left before every part of fleet command %s ended (%s); the parts may "
                 "still end: see `edge-controller fleet get %s`\n",
                 id.c_str(),
                 st.ok() ? "the call ended early"
                         : (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                                ? "no word within --timeout + 60s"
                                : st.error_message().c_str()),
                 id.c_str());
    return kExitResultUnknown;
  }
  if (interrupted) return kExitCancelled;
  if (output_dropped) {
    std::fprintf(stderr,
                 "error: this client fell behind and some of fleet command %s's output was "
                 "dropped for it (the notes above say whose); each part's result keeps its "
                 "output's tail: see `edge-controller fleet get %s`\n",
                 id.c_str(), id.c_str());
  }
  if (!capped.empty()) {
    std::string nodes;
    for (const auto& n : capped)
      nodes += (nodes.empty() ? "" : ", ") + n;
    std::fprintf(stderr,
                 "error: on %zu node(s) (%s) fleet command %s wrote more output than the node's "
                 "output cap and the rest is lost; raise that cap there (the notes above name it), "
                 "or have the command write to a file\n",
                 capped.size(), nodes.c_str(), id.c_str());
  }
  for (const auto& p : parts)
    if (!Succeeded(p)) return kExitSomePartsFailed;
  return output_dropped || !capped.empty() ? kExitOutputIncomplete : kExitOk;
}

int Get(const edge::cli::GlobalOptions& opts, const FleetOptions& o) {
  auto admin = OpenAdmin<apb::FleetAdmin>(opts);
  if (!admin) return admin.error();
  apb::GetFleetCommandRequest req;
  req.set_fleet_command_id(o.id);
  apb::FleetCommandInfo f;
  auto st = admin->stub->GetFleetCommand(CallContext().get(), req, &f);
  if (!st.ok()) return ReportRpcFailure(admin->cfg, st);
  if (o.format == "json") {
    std::cout << Dump(FleetJson(f)) << "\n";
    return kExitOk;
  }
  std::vector<apb::FleetPart> parts(f.parts().begin(), f.parts().end());
  std::cout << "fleet command: " << f.fleet_command_id() << "\n"
            << "selector:      " << f.selector() << "\n"
            << "tool:          " << f.tool() << "\n"
            << "args:          " << Dump(JsonOrText(f.args_json())) << "\n"
            << "created:       " << IsoTimeMs(f.created_at_epoch_ms()) << " by " << f.created_by()
            << (f.tenant_id().empty() ? "" : " (tenant " + f.tenant_id() + ")") << "\n";
  if (f.cancelled_at_epoch_ms() != 0) {
    std::cout << "cancelled:     " << IsoTimeMs(f.cancelled_at_epoch_ms()) << "\n";
  }
  std::cout << "state:         " << f.state() << " (" << Tally(parts) << ")\n";
  std::cout.flush();
  PrintParts(parts);
  for (const auto& p : parts) {
    if (!p.output_cap_note().empty()) {
      std::printf("[%s] note: %s\n", p.node_id().c_str(), p.output_cap_note().c_str());
    }
  }
  return kExitOk;
}

int List(const edge::cli::GlobalOptions& opts, const FleetOptions& o) {
  auto admin = OpenAdmin<apb::FleetAdmin>(opts);
  if (!admin) return admin.error();
  apb::ListFleetCommandsRequest req;
  req.set_limit(o.limit);
  apb::ListFleetCommandsResponse resp;
  auto st = admin->stub->ListFleetCommands(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(admin->cfg, st);
  if (o.format == "json") {
    json arr = json::array();
    for (const auto& f : resp.fleet_commands())
      arr.push_back(FleetJson(f));
    std::cout << Dump(arr) << "\n";
    return kExitOk;
  }
  std::printf("%-36s %-24s %-10s %-12s %-24s %s\n", "FLEET COMMAND", "CREATED", "STATE", "TOOL",
              "SELECTOR", "PARTS");
  for (const auto& f : resp.fleet_commands()) {
    std::vector<apb::FleetPart> parts(f.parts().begin(), f.parts().end());
    std::printf("%-36s %-24s %-10s %-12s %-24s %s\n", f.fleet_command_id().c_str(),
                IsoTimeMs(f.created_at_epoch_ms()).c_str(), f.state().c_str(), f.tool().c_str(),
                f.selector().c_str(), Tally(parts).c_str());
  }
  return kExitOk;
}

int Cancel(const edge::cli::GlobalOptions& opts, const FleetOptions& o) {
  auto admin = OpenAdmin<apb::FleetAdmin>(opts, /*wait_connected=*/true);
  if (!admin) return admin.error();
  apb::CancelFleetCommandRequest req;
  req.set_fleet_command_id(o.id);
  req.set_reason(o.reason);
  apb::CancelFleetCommandResponse resp;
  auto st = admin->stub->CancelFleetCommand(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(admin->cfg, st);
  size_t sent = 0, undelivered = 0;
  for (const auto& p : resp.parts()) {
    if (p.outcome() == "sent") ++sent;
    if (p.outcome() == "not_delivered") ++undelivered;
    std::printf("[%s] %s%s%s\n", p.node_id().c_str(), p.outcome().c_str(),
                p.message().empty() ? "" : ": ", p.message().c_str());
  }
  std::printf("fleet command %s: cancel sent to %zu of %d part(s)\n", o.id.c_str(), sent,
              resp.parts_size());
  return undelivered > 0 ? kExitNodeUnavailable : kExitOk;
}

}  // namespace

edge::cli::CommandRunner AddFleetCommands(CLI::App& app, const edge::cli::GlobalOptions& opts) {
  auto t = std::make_shared<TagOptions>();
  auto* tag = app.add_subcommand(
      "tag",
      "the operator's tags of a node (stored on the controller only; never changed by the "
      "node): tag --node N add K=V…, remove K[=V]…, list");
  tag->add_option("--node", t->node, "node id")->required();
  tag->require_subcommand(1);
  tag->fallthrough();
  auto* tag_add = tag->add_subcommand("add", "add or change tags K=V");
  tag_add->add_option("tags", t->add, "KEY=VALUE (repeatable)")->required();
  edge::cli::AddFormatOption(tag_add, t->format);
  auto* tag_remove =
      tag->add_subcommand("remove", "remove tags: K (whatever its value) or K=V (only that value)");
  tag_remove->add_option("tags", t->remove, "KEY or KEY=VALUE (repeatable)")->required();
  edge::cli::AddFormatOption(tag_remove, t->format);
  auto* tag_list = tag->add_subcommand("list", "the node's tags");
  edge::cli::AddFormatOption(tag_list, t->format);

  auto f = std::make_shared<FleetOptions>();
  auto* fleet = app.add_subcommand("fleet", "one command on every live node a selector matches");
  fleet->require_subcommand(1);
  auto* invoke = fleet->add_subcommand(
      "invoke",
      "run a tool on every live node the selector matches: streams each node's output as "
      "\"[node] line\", then a per-node summary (exit 0 all succeeded, 3 some failed, 74 all "
      "succeeded but output is missing, 75 left early, 130 interrupted, 2 bad selector, 1 no "
      "node matches)");
  invoke
      ->add_option("--selector", f->selector,
                   "comma-separated terms, all of which must hold: tag:K=V (operator tag), "
                   "label:K=V (node label), os:X, node:ID")
      ->required();
  invoke->add_option("--tool", f->tool, "tool name, e.g. exec, sysinfo")->required();
  invoke->add_option("--arg", f->args,
                     "argument key=value (repeatable; typed as for `invoke --arg`)");
  invoke->add_option("--args-json", f->args_json, "arguments as a JSON object (--arg wins)");
  invoke->add_option("--context", f->context, "security context name on the nodes");
  invoke->add_option("--timeout", f->timeout,
                     "each part's deadline on its node, e.g. 30s (default: the agent's own); "
                     "the CLI waits at most this + 60s");
  invoke->add_flag("--detach", f->detach, "print only the fleet command id and return at once");
  edge::cli::AddFormatOption(invoke, f->format);

  auto* get = fleet->add_subcommand("get", "a fleet command and its parts");
  get->add_option("fleet_command_id", f->id, "the fleet command id")->required();
  edge::cli::AddFormatOption(get, f->format);
  auto* list = fleet->add_subcommand("list", "fleet commands, newest first");
  list->add_option("--limit", f->limit, "at most this many")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  edge::cli::AddFormatOption(list, f->format);
  auto* cancel = fleet->add_subcommand(
      "cancel", "cancel every running part (exit 69 when a part's node is not connected)");
  cancel->add_option("fleet_command_id", f->id, "the fleet command id")->required();
  cancel->add_option("--reason", f->reason, "why (shown in each part's result)");

  return [&opts, t, f, tag_add, tag_remove, tag_list, invoke, get, list,
          cancel]() -> std::optional<int> {
    if (*tag_add) return TagUpdate(opts, *t, true);
    if (*tag_remove) return TagUpdate(opts, *t, false);
    if (*tag_list) return TagList(opts, *t);
    if (*invoke) return Invoke(opts, *f);
    if (*get) return Get(opts, *f);
    if (*list) return List(opts, *f);
    if (*cancel) return Cancel(opts, *f);
    return std::nullopt;
  };
}

}  // namespace edge::controller::cli
