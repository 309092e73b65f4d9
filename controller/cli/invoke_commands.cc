#include "controller/cli/invoke_commands.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "admin.grpc.pb.h"
#include "common/json_parse.h"
#include "common/log.h"
#include "common/signals.h"
#include "config/duration.h"
#include "controller/cli/admin_cli.h"
#include "controller/command_notes.h"

namespace edge::controller::cli {
namespace {

namespace apb = admin::v1;
using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;
using json = nlohmann::json;
using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

// After Ctrl-C / SIGTERM, how long `invoke` waits for the cancelled command's result.
constexpr std::chrono::seconds kCancelWait{5};
// With a deadline, how long past it `invoke` waits for a node that stays connected but says
// nothing.
constexpr std::chrono::seconds kDeadlineSlack{60};

struct InvokeOptions {
  std::string node, tool, args_json, context, deadline, format, wait = "60s";
  std::vector<std::string> args;
  bool detach = false;
};

struct ListOptions {
  std::string node, format, command_id;
  int limit = 100;
};

json OutcomeJson(const apb::CommandOutcome& r) {
  json payload = nullptr;
  if (!r.payload_json().empty()) payload = JsonOrText(r.payload_json());
  return {{"outcome", r.outcome()}, {"exit_code", r.exit_code()}, {"code", r.code()},
          {"message", r.message()}, {"payload", payload},         {"duration_ms", r.duration_ms()}};
}

json CommandJson(const apb::CommandInfo& c) {
  json j = {{"command_id", c.command_id()},
            {"node_id", c.node_id()},
            {"tool", c.tool()},
            {"args", JsonOrText(c.args_json())},
            {"security_context", c.security_context()},
            {"deadline_ms", c.deadline_ms()},
            {"state", c.state()},
            {"created_at", JsonTime(c.created_at_epoch_ms())},
            {"completed_at", JsonTime(c.completed_at_epoch_ms())}};
  if (c.has_result()) j["result"] = OutcomeJson(c.result());
  return j;
}

// How an ended command maps to the CLI's exit code, with a line on stderr when not ok.
int OutcomeExit(const std::string& id, const apb::CommandOutcome& r, bool quiet) {
  if (r.outcome() == "ok") {
    return r.exit_code() >= 0 && r.exit_code() <= 255 ? r.exit_code() : kExitFailure;
  }
  if (r.outcome() == "timed_out") {
    if (!quiet)
      std::fprintf(stderr, "error: command %s timed out after %s\n", id.c_str(),
                   config::FormatDuration(milliseconds(r.duration_ms())).c_str());
    return kExitTimedOut;
  }
  if (r.outcome() == "cancelled") {
    if (!quiet) std::fprintf(stderr, "command %s cancelled: %s\n", id.c_str(), r.message().c_str());
    return kExitCancelled;
  }
  if (!quiet)
    std::fprintf(stderr, "error: %s: %s\n", r.code().empty() ? "ERROR" : r.code().c_str(),
                 r.message().c_str());
  return kExitFailure;
}

// The admin request from the flags; nullopt after printing why (exit 2).
std::optional<apb::InvokeRequest> BuildRequest(const InvokeOptions& o) {
  for (const auto& [flag, value] : {std::pair{"--node", &o.node}, std::pair{"--tool", &o.tool},
                                    std::pair{"--context", &o.context}}) {
    if (!CheckUtf8(flag, *value)) return std::nullopt;
  }
  auto args = ArgsFromFlags(o.args_json, o.args);
  if (!args) return std::nullopt;
  apb::InvokeRequest req;
  req.set_node_id(o.node);
  req.set_tool(o.tool);
  req.set_args_json(*args);
  req.set_security_context(o.context);
  req.set_detach(o.detach);
  if (!o.deadline.empty()) {
    auto d = ParseDurationFlag("--deadline", o.deadline, milliseconds(1), "30s");
    if (!d) return std::nullopt;
    req.set_deadline_ms(d->count());
  }
  return req;
}

// Runs beside an `invoke` call while it reads its events, on a thread of its own: the first
// Ctrl-C / SIGTERM cancels the command on the node (a second one leaves at once, 130); the
// call is ended when a cancel goes unanswered for kCancelWait, or when the node has been gone
// longer than --wait. Stopped and joined by its destructor.
class InvokeWatcher {
 public:
  enum class GaveUp { kNo, kCancelUnanswered, kNodeLost };

  InvokeWatcher(apb::AdminService::Stub& stub, grpc::ClientContext& call, milliseconds node_wait)
      : stub_(stub), call_(call), node_wait_(node_wait), thread_([this] { Run(); }) {}
  ~InvokeWatcher() {
    done_ = true;
    // Wake its wait at once (a thread-directed SIGTERM, blocked everywhere, is taken by its
    // sigtimedwait and ignored because `done_` is set) instead of after the poll interval.
    ::pthread_kill(thread_.native_handle(), SIGTERM);
    thread_.join();
  }

  void SetCommandId(const std::string& id) {
    std::lock_guard lock(mu_);
    command_id_ = id;
  }
  // The node's stream ended while the command ran: the --wait clock starts.
  void NodeDropped() {
    std::lock_guard lock(mu_);
    if (!node_gone_since_) node_gone_since_ = std::chrono::steady_clock::now();
  }
  void NodeBack() {
    std::lock_guard lock(mu_);
    node_gone_since_.reset();
  }
  GaveUp gave_up() const { return gave_up_; }

 private:
  void Run() {
    int signals = 0;
    std::optional<SteadyTime> cancel_deadline;
    while (!done_) {
      auto sig = WaitForTerminationSignal(milliseconds(100));
      if (done_) break;
      const auto now = std::chrono::steady_clock::now();
      std::string id;
      bool node_lost = false;
      {
        std::lock_guard lock(mu_);
        id = command_id_;
        node_lost = node_gone_since_ && now - *node_gone_since_ >= node_wait_;
      }
      if (node_lost) return GiveUp(GaveUp::kNodeLost);
      // The node did not answer the cancel in time (it may be gone): stop waiting.
      if (cancel_deadline && now >= *cancel_deadline) return GiveUp(GaveUp::kCancelUnanswered);
      if (!sig) continue;
      if (++signals > 1 || id.empty()) std::_Exit(kExitCancelled);
      std::fprintf(stderr,
                   "interrupted: cancelling command %s (waiting up to %llds for its result; "
                   "again to leave now)\n",
                   id.c_str(), static_cast<long long>(kCancelWait.count()));
      if (!SendCancel(id)) return GiveUp(GaveUp::kCancelUnanswered);
      cancel_deadline = std::chrono::steady_clock::now() + kCancelWait;
    }
  }

  // False when the cancel was not delivered (the node is not connected, or the controller is
  // gone): no result will come soon.
  bool SendCancel(const std::string& id) {
    apb::CancelCommandRequest req;
    req.set_command_id(id);
    req.set_reason("interrupted by the operator");
    apb::CancelCommandResponse resp;
    auto st = stub_.CancelCommand(CallContext(std::chrono::seconds(5)).get(), req, &resp);
    if (!st.ok()) std::fprintf(stderr, "cancel not delivered: %s\n", st.error_message().c_str());
    return st.ok();
  }

  void GiveUp(GaveUp why) {
    gave_up_ = why;
    call_.TryCancel();
  }

  apb::AdminService::Stub& stub_;
  grpc::ClientContext& call_;
  const milliseconds node_wait_;
  std::atomic<bool> done_{false};
  std::atomic<GaveUp> gave_up_{GaveUp::kNo};
  std::mutex mu_;
  std::string command_id_;
  std::optional<SteadyTime> node_gone_since_;
  std::thread thread_;  // last: starts once everything above is set
};

// What an invoke call brought: the command id, its result, and its output when collected.
struct InvokeEvents {
  std::string command_id;
  std::optional<apb::CommandOutcome> result;
  std::string out, err;  // collected only for --format json
  bool streamed = false;
  std::string node_message;     // the controller's word on a dropped node
  bool output_dropped = false;  // some output was dropped for this client (output_dropped)
  bool output_capped = false;   // the node's output cap dropped output for everyone
};

// Reads the call's events, writing the output as it comes (or collecting it for JSON).
InvokeEvents ReadEvents(grpc::ClientReaderInterface<apb::InvokeEvent>& reader,
                        InvokeWatcher& watcher, const InvokeOptions& o) {
  const bool as_json = o.format == "json";
  InvokeEvents got;
  apb::InvokeEvent ev;
  auto output = [&](const std::string& bytes, std::string& collected, FILE* fp) {
    got.streamed = true;
    if (as_json) {
      collected += bytes;
      return;
    }
    std::fwrite(bytes.data(), 1, bytes.size(), fp);
    std::fflush(fp);
  };
  while (reader.Read(&ev)) {
    switch (ev.event_case()) {
      case apb::InvokeEvent::kAccepted:
        got.command_id = ev.accepted().command_id();
        watcher.SetCommandId(got.command_id);
        if (o.detach) std::cout << got.command_id << "\n";
        break;
      case apb::InvokeEvent::kStdout:
        output(ev.stdout(), got.out, stdout);
        break;
      case apb::InvokeEvent::kStderr:
        output(ev.stderr(), got.err, stderr);
        break;
      case apb::InvokeEvent::kStatus:
        if (ev.status().state() == controller::kNodeDisconnected) {
          got.node_message = ev.status().message();
          watcher.NodeDropped();
          if (!as_json) std::fprintf(stderr, "note: %s\n", ev.status().message().c_str());
        } else if (ev.status().state() == controller::kNodeReconnected) {
          watcher.NodeBack();
          if (!as_json) std::fprintf(stderr, "note: %s\n", ev.status().message().c_str());
        } else if (ev.status().state() == controller::kOutputDropped ||
                   ev.status().state() == controller::kOutputResumed) {
          // This client fell too far behind (controller/output_pacer.h).
          if (ev.status().state() == controller::kOutputDropped) got.output_dropped = true;
          if (!as_json) std::fprintf(stderr, "note: %s\n", ev.status().message().c_str());
        } else if (ev.status().state() == controller::kOutputCapped) {
          got.output_capped = true;
          if (!as_json) std::fprintf(stderr, "note: %s\n", ev.status().message().c_str());
        }
        break;
      case apb::InvokeEvent::kResult:
        got.result = ev.result();
        break;
      case apb::InvokeEvent::EVENT_NOT_SET:
        break;
    }
  }
  return got;
}

// Prints an ok result's payload the way a terminal user wants it: a non-exec payload as
// JSON (or its text), an exec's output only when it did not stream.
void PrintPayload(const InvokeEvents& got, const json& payload) {
  const bool exec_like =
      payload.is_object() && (payload.contains("stdout") || payload.contains("stderr"));
  if (!exec_like) {
    std::cout << (payload.is_string() ? payload.get<std::string>() : Dump(payload, 2)) << "\n";
    return;
  }
  if (got.streamed) return;
  // The node sent its output only in the result: show it as a stream would have.
  for (auto [key, fp] : {std::pair{"stdout", stdout}, std::pair{"stderr", stderr}}) {
    if (payload.contains(key) && payload[key].is_string()) {
      const std::string text = payload[key].get<std::string>();
      std::fwrite(text.data(), 1, text.size(), fp);
    }
  }
}

int Invoke(const edge::cli::GlobalOptions& opts, const InvokeOptions& o) {
  auto req = BuildRequest(o);
  if (!req) return kExitUsage;
  auto node_wait = ParseDurationFlag("--wait", o.wait, milliseconds(0), "60s");
  if (!node_wait) return kExitUsage;
  BlockTerminationSignals();
  auto admin = OpenAdmin<apb::AdminService>(opts, /*wait_connected=*/true);
  if (!admin) return admin.error();
  auto& stub = admin->stub;
  grpc::ClientContext ctx;
  if (req->deadline_ms() > 0) {
    // The node reports TimedOut itself; this only bounds a node that never answers.
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(req->deadline_ms()) +
                     kDeadlineSlack);
  }
  auto reader = stub->Invoke(&ctx, *req);
  InvokeEvents got;
  InvokeWatcher::GaveUp gave_up;
  grpc::Status st;
  {
    InvokeWatcher watcher(*stub, ctx, *node_wait);
    got = ReadEvents(*reader, watcher, o);
    st = reader->Finish();
    gave_up = watcher.gave_up();
  }
  const std::string& id = got.command_id;
  if (!got.result && gave_up == InvokeWatcher::GaveUp::kCancelUnanswered) {
    std::fprintf(stderr,
                 "interrupted: left without the result of command %s; see `edge-controller "
                 "command get %s`\n",
                 id.c_str(), id.c_str());
    return kExitCancelled;
  }
  if (!got.result && gave_up == InvokeWatcher::GaveUp::kNodeLost) {
    std::fprintf(stderr,
                 "error: node %s went away while command %s ran and did not come back within "
                 "%s (--wait); the command may still end there: see `edge-controller command "
                 "get %s`\n",
                 o.node.c_str(), id.c_str(), config::FormatDuration(*node_wait).c_str(),
                 id.c_str());
    return kExitResultUnknown;
  }
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && !id.empty()) {
      std::fprintf(stderr,
                   "error: no result for command %s within its deadline + %llds%s; see "
                   "`edge-controller command get %s`\n",
                   id.c_str(), static_cast<long long>(kDeadlineSlack.count()),
                   got.node_message.empty() ? "" : (" (" + got.node_message + ")").c_str(),
                   id.c_str());
      return kExitResultUnknown;
    }
    if (!id.empty() && !o.detach && st.error_code() == grpc::StatusCode::UNAVAILABLE) {
      std::fprintf(stderr,
                   "error: lost the controller while command %s ran (%s); the command may "
                   "still end on the node: see `edge-controller command get %s`\n",
                   id.c_str(), st.error_message().c_str(), id.c_str());
      return kExitResultUnknown;
    }
    return ReportNodeCallFailure(st);
  }
  if (o.detach) return kExitOk;
  if (!got.result) {
    std::fprintf(stderr, "error: the controller ended the call without a result\n");
    return kExitFailure;
  }
  const json outcome = OutcomeJson(*got.result);
  int code = kExitOk;
  if (o.format == "json") {
    json j = {{"command_id", id},
              {"result", outcome},
              {"stdout", got.out},
              {"stderr", got.err},
              {"output_complete", !got.output_dropped && !got.output_capped}};
    std::cout << Dump(j) << "\n";
    code = OutcomeExit(id, *got.result, true);
  } else {
    if (got.result->outcome() == "ok" && !got.result->payload_json().empty()) {
      PrintPayload(got, outcome["payload"]);
    }
    std::fflush(stdout);
    code = OutcomeExit(id, *got.result, false);
  }
  if (got.output_dropped) {
    std::fprintf(stderr,
                 "error: this client fell behind and some of command %s's output was dropped "
                 "for it; the result keeps the output's tail: see `edge-controller command get "
                 "%s`\n",
                 id.c_str(), id.c_str());
    if (code == kExitOk) code = kExitOutputIncomplete;
  }
  if (got.output_capped) {
    std::fprintf(stderr,
                 "error: command %s wrote more output than the node's output cap and the rest "
                 "is lost; raise that cap on the node (the note above names it), or have the "
                 "command write to a file\n",
                 id.c_str());
    if (code == kExitOk) code = kExitOutputIncomplete;
  }
  return code;
}

int Commands(const edge::cli::GlobalOptions& opts, const ListOptions& o) {
  auto admin = OpenAdmin<apb::AdminService>(opts);
  if (!admin) return admin.error();
  apb::ListCommandsRequest req;
  req.set_node_id(o.node);
  req.set_limit(o.limit);
  apb::ListCommandsResponse resp;
  auto st = admin->stub->ListCommands(CallContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcFailure(admin->cfg, st);
  if (o.format == "json") {
    json arr = json::array();
    for (const auto& c : resp.commands())
      arr.push_back(CommandJson(c));
    std::cout << Dump(arr) << "\n";
    return kExitOk;
  }
  std::printf("%-36s %-16s %-12s %-10s %-10s %-5s %s\n", "COMMAND", "NODE", "TOOL", "STATE",
              "OUTCOME", "EXIT", "CREATED");
  for (const auto& c : resp.commands()) {
    std::string exit = c.has_result() ? std::to_string(c.result().exit_code()) : "-";
    std::printf("%-36s %-16s %-12s %-10s %-10s %-5s %s\n", c.command_id().c_str(),
                c.node_id().c_str(), c.tool().c_str(), c.state().c_str(),
                c.has_result() ? c.result().outcome().c_str() : "-", exit.c_str(),
                IsoTime(c.created_at_epoch_ms()).c_str());
  }
  return kExitOk;
}

int CommandGet(const edge::cli::GlobalOptions& opts, const ListOptions& o) {
  auto admin = OpenAdmin<apb::AdminService>(opts);
  if (!admin) return admin.error();
  apb::GetCommandRequest req;
  req.set_command_id(o.command_id);
  apb::CommandInfo c;
  auto st = admin->stub->GetCommand(CallContext().get(), req, &c);
  if (!st.ok()) return ReportRpcFailure(admin->cfg, st);
  json j = CommandJson(c);
  if (o.format == "json") {
    std::cout << Dump(j) << "\n";
    return kExitOk;
  }
  std::cout << "command:   " << c.command_id() << "\n"
            << "node:      " << c.node_id() << "\n"
            << "tool:      " << c.tool() << "\n"
            << "args:      " << Dump(j["args"]) << "\n"
            << "state:     " << c.state() << "\n"
            << "created:   " << IsoTimeMs(c.created_at_epoch_ms()) << "\n";
  if (c.has_result()) {
    const auto& r = c.result();
    std::cout << "completed: " << IsoTimeMs(c.completed_at_epoch_ms()) << "\n"
              << "outcome:   " << r.outcome() << "\n"
              << "exit code: " << r.exit_code() << "\n";
    if (!r.code().empty()) std::cout << "code:      " << r.code() << "\n";
    if (!r.message().empty()) std::cout << "message:   " << r.message() << "\n";
    if (r.duration_ms()) std::cout << "duration:  " << r.duration_ms() << " ms\n";
    if (!r.payload_json().empty())
      std::cout << "payload:   " << Dump(j["result"]["payload"], 2) << "\n";
  }
  return kExitOk;
}

}  // namespace

edge::cli::CommandRunner AddInvokeCommands(CLI::App& app, const edge::cli::GlobalOptions& opts) {
  auto inv = std::make_shared<InvokeOptions>();
  auto* invoke = app.add_subcommand(
      "invoke",
      "run a tool on a node: streams its stdout/stderr, prints the result and exits with the "
      "tool's exit code (error 1, node not connected 69, succeeded but output is missing 74, "
      "node gone and not back within --wait 75, timed out 124, cancelled 130)");
  invoke->add_option("--node", inv->node, "node id")->required();
  invoke->add_option("--tool", inv->tool, "tool name, e.g. exec, sysinfo, file.read")->required();
  invoke->add_option("--arg", inv->args,
                     "argument key=value (repeatable); a value that is a JSON number, boolean, "
                     "array or object is passed typed, a JSON \"string\" unquoted, anything "
                     "else as a string");
  invoke->add_option("--args-json", inv->args_json, "arguments as a JSON object (--arg wins)");
  invoke->add_option("--context", inv->context, "security context name on the node");
  invoke->add_option("--deadline", inv->deadline,
                     "deadline on the node, e.g. 30s (default: its own)");
  invoke
      ->add_option("--wait", inv->wait,
                   "when the node drops while the command runs, how long to wait for it to "
                   "come back with the result before leaving with 75 (0 = leave at once)")
      ->capture_default_str();
  invoke->add_flag("--detach", inv->detach, "print only the command id and return at once");
  edge::cli::AddFormatOption(invoke, inv->format);

  auto list = std::make_shared<ListOptions>();
  auto* commands = app.add_subcommand("commands", "list commands, newest first");
  commands->add_option("--node", list->node, "only this node's commands");
  commands->add_option("--limit", list->limit, "at most this many")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  edge::cli::AddFormatOption(commands, list->format);

  auto* command = app.add_subcommand("command", "one command");
  command->require_subcommand(1);
  auto* get = command->add_subcommand("get", "show a command and its result");
  get->add_option("command_id", list->command_id, "the command id")->required();
  edge::cli::AddFormatOption(get, list->format);

  return [&opts, inv, list, invoke, commands, get]() -> std::optional<int> {
    if (*invoke) return Invoke(opts, *inv);
    if (*commands) return Commands(opts, *list);
    if (*get) return CommandGet(opts, *list);
    return std::nullopt;
  };
}

}  // namespace edge::controller::cli
