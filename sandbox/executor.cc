#include "sandbox/executor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <algorithm>

#include <boost/asio/post.hpp>
#include <filesystem>

#include "common/atomic_file.h"
#include "common/base64.h"
#include "common/log.h"
#include "common/rfc3339.h"
#include "common/thread_name.h"
#include "common/utf8.h"
#include "sandbox/file_service.h"
#include "sandbox/output_tail.h"
#include "sandbox/run_as.h"
#include "sandbox/scoped_root.h"
#include "sandbox/shell_quote.h"
#include "sandbox/sysinfo.h"

namespace edge::sandbox {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kDefaultSandbox = "_default";

// The resource a lease for `sandbox_id` names: the sandbox, or "_default" for the default
// workspace.
std::string_view LeaseResource(std::string_view sandbox_id) {
  return sandbox_id.empty() ? std::string_view(kDefaultSandbox) : sandbox_id;
}
constexpr const char* kShutdownReason = "agent shutdown";
// The tail of each stream a session's result keeps (its output streams as chunks).
constexpr size_t kSessionTailBytes = 64u << 10;

InvokeResult ErrorResult(std::string command_id, Error error) {
  InvokeResult r;
  r.command_id = std::move(command_id);
  r.outcome = Outcome::kError;
  r.error = std::move(error);
  return r;
}

// The result of work whose cancel came before its process (or file call) started.
// Why a command was not started: its journal row could not be written or synced.
Error NotJournaled(const std::string& command_id, const Error& why) {
  log::Get("sandbox")->error(
      "command {}: not started, its command journal row is not on disk ({}); the agent's "
      "state database refuses writes until the agent restarts if a sync failed",
      log::Escape(command_id), why.ToString());
  return Error{why.code == ErrorCode::kResourceExhausted ? ErrorCode::kResourceExhausted
                                                         : ErrorCode::kUnavailable,
               "command " + command_id +
                   " was not started: the agent could not record it on disk (" + why.message +
                   "); it is safe to send again"};
}

InvokeResult CancelledBeforeStart(std::string command_id, const CancelSource& source) {
  InvokeResult r;
  r.command_id = std::move(command_id);
  r.outcome = Outcome::kCancelled;
  r.reason = source.token().reason();
  r.error = Error{ErrorCode::kCancelled, "cancelled before it started: " + r.reason};
  return r;
}

}  // namespace

// An admitted command on its way to Start: what it runs, under which rules (`rules` keeps
// `def` alive), its request and output sink.
struct Executor::Admission {
  std::shared_ptr<Inflight> job;
  std::shared_ptr<const Rules> rules;
  const ToolDefinition* def = nullptr;
  std::shared_ptr<const SecurityContext> ctx;
  InvokeRequest request;
  ChunkSink on_chunk;
};

struct Executor::Inflight {
  uint64_t id = 0;
  std::string command_id;
  std::string context;
  std::string door;  // "" = none
  // The sandbox id ("" = default workspace), or with a lease the resource it is for ("_default"
  // for the default workspace). Both set at admission under mu_, then only read.
  std::string resource;
  bool has_lease = false;
  CancelSource source;
  CancelRegistration external;
  DoneCallback done;
  Clock::MonoTime started{};
  // The admission number of its journal row (none when the row could not be written): Finish
  // removes that row and no later admission's of the same command_id.
  std::optional<int64_t> journal_admission;
  // False for a command refused after admission without running (its journal row could not be
  // written): like any refusal, its answer is not stored, so a repeat may run it.
  bool record_result = true;
  // session.start only: its entry in the session table and where its process runs.
  std::string session_id;
  std::string session_workspace;  // relative to the workspace root
  std::shared_ptr<ProcessControl> control;
};

Executor::Executor(boost::asio::io_context& io, Clock& clock, ExecutorOptions options,
                   std::shared_ptr<const Rules> rules, std::shared_ptr<Provider> provider)
    : io_(io),
      clock_(clock),
      options_(std::move(options)),
      rules_(std::move(rules)),
      provider_(std::move(provider)) {}

Result<std::shared_ptr<const Executor::Rules>> Executor::MakeRules(
    const std::map<std::string, ToolConfig>& tools,
    const std::map<std::string, SecurityContextConfig>& security_contexts) {
  auto registry = ToolRegistry::Make(tools);
  if (!registry) return std::unexpected(registry.error());
  auto contexts = SecurityContexts::Make(security_contexts);
  if (!contexts) return std::unexpected(contexts.error());
  for (const auto& [name, tool] : tools) {
    if (!tool.security_context.empty() && !contexts->Find(tool.security_context)) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          "tools." + name + ".security_context: '" + tool.security_context + "' is not configured");
    }
  }
  return std::make_shared<const Rules>(Rules{std::move(*registry), std::move(*contexts)});
}

std::shared_ptr<const Executor::Rules> Executor::rules() const {
  std::lock_guard lock(rules_mu_);
  return rules_;
}

edge::Status Executor::Reconfigure(
    const std::map<std::string, ToolConfig>& tools,
    const std::map<std::string, SecurityContextConfig>& security_contexts) {
  auto rules = MakeRules(tools, security_contexts);
  if (!rules) return std::unexpected(rules.error());
  std::lock_guard lock(rules_mu_);
  rules_ = std::move(*rules);
  return OkStatus();
}

std::vector<std::string> Executor::Tools() const {
  return rules()->tools.List();
}

Result<std::unique_ptr<Executor>> Executor::Open(boost::asio::io_context& io, Clock& clock,
                                                 ExecutorOptions options) {
  if (options.data_dir.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "data_dir: must not be empty");
  }
  if (options.own_id.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "own_id: the node/worker id must not be empty");
  }
  if (options.max_output_bytes == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "sandbox.max_output_bytes: must be > 0");
  }
  if (options.max_concurrent == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "max_concurrent: must be > 0");
  }
  if (options.max_sessions == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "sandbox.max_sessions: must be > 0");
  }
  if (options.sandbox_root.empty()) options.sandbox_root = options.data_dir + "/sandboxes";
  auto provider = MakeProvider(options.provider, options.bwrap_path);
  if (!provider) {
    return MakeError(ErrorCode::kInvalidArgument, "sandbox." + provider.error().message);
  }
  auto rules = MakeRules(options.tools, options.security_contexts);
  if (!rules) return std::unexpected(rules.error());
  std::unique_ptr<Executor> ex(
      new Executor(io, clock, std::move(options), std::move(*rules), std::move(*provider)));
  const ExecutorOptions& o = ex->options_;
  auto db = StateDb::Open(o.data_dir, o.state_db);
  if (!db) return std::unexpected(db.error());
  ex->db_ = std::move(*db);
  auto leases = LeaseTable::Open(*ex->db_);
  if (!leases) return std::unexpected(leases.error());
  ex->leases_ = std::move(*leases);
  auto idem = IdempotencyStore::Open(*ex->db_, clock, o.idempotency);
  if (!idem) return std::unexpected(idem.error());
  ex->idempotency_ = std::move(*idem);
  auto journal = CommandJournal::Open(*ex->db_);
  if (!journal) return std::unexpected(journal.error());
  ex->journal_ = std::move(*journal);
  auto registry = SandboxRegistry::Open(*ex->db_, clock, {o.sandbox_root, o.max_sandboxes});
  if (!registry) return std::unexpected(registry.error());
  ex->registry_ = std::move(*registry);

  ProcessRunner::Options runner_options{o.data_dir + "/state/process-groups", o.pids_cgroup_root,
                                        o.cgroup2_root};
  auto stale = ProcessRunner::KillStaleGroups(runner_options);
  if (!stale) return std::unexpected(stale.error());
  if (auto st = ex->RecoverInterrupted(*stale); !st) return std::unexpected(st.error());
  ex->timers_ = std::make_unique<TimerQueue>(clock);
  ex->runner_ = std::make_unique<ProcessRunner>(io, clock, runner_options, ex->timers_.get());

  ex->default_workspace_ = ex->registry_->RootDir(kDefaultSandbox);
  std::error_code ec;
  std::filesystem::create_directories(ex->default_workspace_, ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal,
                     "default workspace '" + ex->default_workspace_ + "': " + ec.message());
  }
  // The sandbox directory keeps other local users out; the workspace root inside it is
  // searchable so that a context's run_as user, reaching it only through the agent, can use
  // what it owns below it (whatever the umask made of it).
  ::chmod(ex->registry_->SandboxDir(kDefaultSandbox).c_str(), 0700);
  ::chmod(ex->default_workspace_.c_str(), 0755);
  return ex;
}

Executor::~Executor() {
  if (timers_) timers_->Stop();  // no deadline, kill grace or shutdown grace fires from here on
  boost::asio::thread_pool* admissions = nullptr;
  {
    std::lock_guard lock(blocking_mu_);
    closing_ = true;  // results still to come sync on their own thread (DeliverAfterSync)
    admissions = admissions_.get();
  }
  if (admissions) admissions->join();  // admitted commands start (or end) first
  boost::asio::thread_pool* blocking = nullptr;
  {
    std::lock_guard lock(blocking_mu_);
    blocking = blocking_.get();
  }
  if (blocking) blocking->join();  // file work in progress ends; its callbacks run first
  runner_.reset();                 // kills and reaps every child
  // A destroy still waiting for its commands is answered (its timer will not fire now).
  std::map<std::string, std::map<uint64_t, DestroyCallback>, std::less<>> waiting;
  {
    std::lock_guard lock(mu_);
    waiting.swap(destroy_waiters_);
  }
  for (auto& [id, tickets] : waiting) {
    for (auto& [ticket, done] : tickets)
      done(MakeError(ErrorCode::kUnavailable,
                     "sandbox '" + id + "' was not destroyed: the agent is stopping"));
  }
}

boost::asio::thread_pool& Executor::Blocking() {
  std::lock_guard lock(blocking_mu_);
  return BlockingLocked();
}

boost::asio::thread_pool& Executor::BlockingLocked() {
  if (!blocking_) {
    const ScopedThreadName name("edge-files");  // the pool's threads inherit it
    blocking_ = std::make_unique<boost::asio::thread_pool>(2);
  }
  return *blocking_;
}

boost::asio::thread_pool& Executor::Admissions() {
  std::lock_guard lock(blocking_mu_);
  return AdmissionsLocked();
}

boost::asio::thread_pool& Executor::AdmissionsLocked() {
  if (!admissions_) {
    const ScopedThreadName name("edge-admit");  // the pool's thread inherits it
    admissions_ = std::make_unique<boost::asio::thread_pool>(1);
  }
  return *admissions_;
}

// ---- admission ---------------------------------------------------------------------------

Result<std::optional<InvokeResult>> Executor::StoredResult(const std::string& command_id) const {
  auto stored = idempotency_->Lookup(command_id);
  if (!stored) return std::unexpected(stored.error());
  if (!stored->has_value()) return std::optional<InvokeResult>();
  // A stored entry that no longer parses is treated as absent: the command runs again
  // rather than answering with something that is not its result.
  auto parsed = InvokeResult::FromJson(json::parse(**stored, nullptr, false));
  if (!parsed) return std::optional<InvokeResult>();
  parsed->replayed = true;
  return std::optional<InvokeResult>(std::move(*parsed));
}

void Executor::Invoke(InvokeRequest request, CancelToken cancel, ChunkSink on_chunk,
                      DoneCallback done) {
  const std::string command_id = request.command_id;
  auto refuse = [&](Error e) { done(ErrorResult(command_id, std::move(e))); };

  // Repeated command ids first: a stored result is returned even while draining.
  if (!command_id.empty()) {
    auto stored = StoredResult(command_id);
    if (!stored) return refuse(stored.error());
    if (stored->has_value()) {
      // A door that answers its caller itself answers from a record on disk only: the record
      // may be one a command has just written, whose own answer still waits for its sync.
      const std::string door = request.door_limit ? request.door_limit->door : "";
      if (options_.confirming_doors.contains(door)) return done(std::move(**stored));
      {
        std::lock_guard lock(mu_);
        ++pending_deliveries_;
      }
      return DeliverAfterSync(
          db_->CommitMark(), command_id,
          [done = std::move(done), r = std::move(**stored)]() mutable { done(std::move(r)); });
    }
  }
  // The rules in force now; a Reconfigure during this call does not change them for it.
  const std::shared_ptr<const Rules> rules = this->rules();
  auto tool = rules->tools.Find(request.tool);
  if (!tool) return refuse(tool.error());
  if ((*tool)->interactive) {
    return refuse(Error{ErrorCode::kInvalidArgument,
                        "tool '" + request.tool +
                            "' is interactive: it runs only as a session's process, started "
                            "with session.start {session_id, agent_name: \"" +
                            request.tool + "\"}"});
  }
  // What runs: the tool, or for session.start the interactive tool it names, whose own
  // security context binds as if it were called by name (the caller's context must also
  // allow session.start itself).
  const ToolDefinition* run_def = *tool;
  std::optional<SessionStartArgs> session;
  const ToolKind kind = (*tool)->kind;
  if (kind == ToolKind::kSessionStart) {
    auto args = ToolRegistry::ParseSessionStartArgs(request.args);
    if (!args) return refuse(args.error());
    auto agent = rules->tools.Find(args->agent_name);
    if (!agent) {
      return refuse(Error{ErrorCode::kNotFound, "session.start arg 'agent_name': no tool '" +
                                                    args->agent_name + "' is configured"});
    }
    if (!(*agent)->interactive) {
      return refuse(Error{ErrorCode::kInvalidArgument,
                          "session.start arg 'agent_name': tool '" + args->agent_name +
                              "' is not interactive (only a tool with tools." + args->agent_name +
                              ".interactive: true can be a session's process)"});
    }
    auto gate =
        rules->contexts.Resolve(request.tool, "", request.security_context, request.caller_roles);
    if (!gate) return refuse(gate.error());
    run_def = *agent;
    session = std::move(*args);
  }
  auto resolved = rules->contexts.Resolve(run_def->name, run_def->security_context,
                                          request.security_context, request.caller_roles);
  if (!resolved) return refuse(resolved.error());
  auto ctx = std::make_shared<const SecurityContext>(std::move(*resolved));
  const std::string ctx_name = ctx->name();

  auto job = std::make_shared<Inflight>();
  {
    std::lock_guard lock(mu_);
    // Input and signals for a running session are not new work: a drain lets what runs
    // finish, and a session finishes through them.
    const bool to_running_session =
        kind == ToolKind::kSessionInput || kind == ToolKind::kSessionSignal;
    if (draining_ && !to_running_session) {
      return refuse(Error{ErrorCode::kDraining,
                          "the agent is draining: tool '" + request.tool + "' was not started"});
    }
    if (!command_id.empty() && running_ids_.contains(command_id)) {
      InvokeResult r = ErrorResult(
          command_id,
          Error{ErrorCode::kAlreadyExists, "command_id '" + command_id + "' is already running"});
      r.already_running = true;
      return done(std::move(r));
    }
    if (inflight_.size() >= options_.max_concurrent) {
      return refuse(Error{ErrorCode::kResourceExhausted,
                          "max_concurrent " + std::to_string(options_.max_concurrent) +
                              " invocations already running"});
    }
    if (const auto& d = request.door_limit; d && d->max_concurrent > 0) {
      const auto it = per_door_.find(d->door);
      if (it != per_door_.end() && it->second >= d->max_concurrent) {
        return refuse(
            Error{ErrorCode::kResourceExhausted,
                  d->key + " " + std::to_string(d->max_concurrent) + " commands already running"});
      }
    }
    int cap = ctx->config().limits.max_concurrent;
    if (cap > 0 && per_context_[ctx_name] >= cap) {
      return refuse(Error{ErrorCode::kResourceExhausted,
                          "security context '" + ctx_name + "' max_concurrent " +
                              std::to_string(cap) + " invocations already running"});
    }
    if (session) {
      if (auto it = sessions_.find(session->session_id); it != sessions_.end()) {
        return refuse(Error{ErrorCode::kAlreadyExists,
                            "session.start arg 'session_id': session '" + session->session_id +
                                "' already exists (command '" + it->second.command_id +
                                "', tool '" + it->second.agent_name + "')"});
      }
      if (sessions_.size() >= options_.max_sessions) {
        return refuse(Error{ErrorCode::kResourceExhausted,
                            "sandbox.max_sessions " + std::to_string(options_.max_sessions) +
                                " sessions already live: session '" + session->session_id +
                                "' was not started"});
      }
    }
    job->id = next_job_++;
    job->command_id = command_id;
    job->context = ctx_name;
    if (session) {
      job->session_id = session->session_id;
      job->session_workspace = session->workspace_path;
      job->control = std::make_shared<ProcessControl>();
      sessions_[session->session_id] =
          Session{job->id, command_id, session->agent_name, job->control};
    }
    if (request.door_limit) {
      job->door = request.door_limit->door;
      ++per_door_[job->door];
    }
    job->has_lease = request.lease.has_value();
    job->resource =
        job->has_lease ? std::string(LeaseResource(request.sandbox_id)) : request.sandbox_id;
    job->done = std::move(done);
    job->started = clock_.Monotonic();
    inflight_[job->id] = job;
    if (!command_id.empty()) running_ids_.insert(command_id);
    ++per_context_[ctx_name];
  }
  // A cancel reaches the job from now on, also while it waits for its journal row's sync.
  std::weak_ptr<Inflight> weak = job;
  job->external = cancel.OnCancel([weak](const std::string& reason) {
    if (auto j = weak.lock()) j->source.Cancel(reason);
  });
  Admission admit{job, rules, run_def, ctx, std::move(request), std::move(on_chunk)};
  if (command_id.empty()) return Start(std::move(admit));
  auto admission = journal_->Admitted({.command_id = command_id,
                                       .tool = admit.request.tool,
                                       .door = job->door,
                                       .admitted_at_ms = ToEpochMillis(clock_.Now())},
                                      Durability::kRelaxed);
  if (!admission) {
    // Nothing durable would name a command that ran now (its result and record do not wait
    // for the disk either): a power cut could lose every trace, and the controller's resend
    // would run it a second time. It is not started; a command that never ran is safe to
    // refuse (the caller, or the controller's resend after a restart, tries again).
    job->record_result = false;
    return Finish(job, ErrorResult(command_id, NotJournaled(command_id, admission.error())));
  }
  job->journal_admission = *admission;
  const uint64_t mark = db_->CommitMark();  // the row's place in the WAL (StateDb::Sync)
  // The row is on disk before the command starts — a power cut must never leave a command
  // that ran without its row, or the controller's resend would run it a second time — but
  // the door's thread does not wait for the disk (issue 14): the admission thread does, and
  // one sync covers every command admitted meanwhile; it then starts them in order.
  boost::asio::post(Admissions(), [this, admit = std::move(admit), mark]() mutable {
    if (auto st = db_->Sync(mark); !st) {
      const std::string& id = admit.request.command_id;
      admit.job->record_result = false;
      return Finish(admit.job, ErrorResult(id, NotJournaled(id, st.error())));
    }
    if (admit.job->source.cancelled()) {
      return Finish(admit.job, CancelledBeforeStart(admit.request.command_id, admit.job->source));
    }
    Start(std::move(admit));
  });
}

void Executor::Start(Admission admit) {
  const std::shared_ptr<Inflight>& job = admit.job;
  InvokeRequest& request = admit.request;
  const std::string& command_id = request.command_id;
  // From here on every path ends in Finish (which stores the result).
  auto workspace = Workspace(request.sandbox_id);
  if (!workspace) return Finish(job, ErrorResult(command_id, workspace.error()));
  if (request.lease) {
    if (auto st = AcceptLease(&*request.lease, job->resource); !st) {
      return Finish(job, ErrorResult(command_id, st.error()));
    }
    if (tick_listener_) tick_listener_();  // its lease is judged at every tick from now on
  }
  const ToolDefinition& def = *admit.def;
  if (def.kind == ToolKind::kExec || def.kind == ToolKind::kConfig) {
    return RunProcess(job, def, *admit.ctx, request, *workspace, std::move(admit.on_chunk));
  }
  if (def.kind == ToolKind::kSessionInput || def.kind == ToolKind::kSessionSignal) {
    // Never blocks (a full stdin queue is refused); on the blocking-work pool like the file
    // tools (never the caller's thread; the destructor joins the pool before members go).
    boost::asio::post(Blocking(),
                      [this, job, rules = admit.rules, &def, request = std::move(request)] {
                        if (job->source.cancelled()) {
                          return Finish(job, CancelledBeforeStart(request.command_id, job->source));
                        }
                        InvokeResult r = RunSessionTool(def, request);
                        r.command_id = request.command_id;
                        Finish(job, std::move(r));
                      });
    return;
  }
  // File tools and sysinfo: on the blocking-work pool, never on the caller's (door's) thread.
  // `rules` keeps `def` alive; the job's cancel source reaches the file walk.
  boost::asio::post(Blocking(), [this, job, rules = admit.rules, &def, ctx = admit.ctx,
                                 request = std::move(request), workspace = std::move(*workspace)] {
    if (job->source.cancelled()) {
      return Finish(job, CancelledBeforeStart(request.command_id, job->source));
    }
    UniqueFd replaced;  // closed after Finish: the replaced file is freed after the answer
    InvokeResult r = RunFileTool(def, request, workspace, *ctx, job->source.token(), &replaced);
    r.command_id = request.command_id;
    Finish(job, std::move(r));
  });
}

std::string Executor::isolation() const {
  return runner_->Isolation();
}

bool Executor::implicit_default_context() const {
  return rules()->contexts.implicit_default();
}

void Executor::Exec(std::string sandbox_id, json args, std::optional<Lease> lease,
                    std::string command_id, CancelToken cancel, ChunkSink on_chunk,
                    DoneCallback done) {
  InvokeRequest req;
  req.command_id = std::move(command_id);
  req.tool = "exec";
  req.args = std::move(args);
  req.sandbox_id = std::move(sandbox_id);
  req.lease = std::move(lease);
  Invoke(std::move(req), std::move(cancel), std::move(on_chunk), std::move(done));
}

// ---- running -----------------------------------------------------------------------------

void Executor::RunProcess(std::shared_ptr<Inflight> job, const ToolDefinition& tool,
                          const SecurityContext& ctx, const InvokeRequest& request,
                          const std::string& workspace, ChunkSink on_chunk) {
  const std::string& command_id = request.command_id;
  ProcessSpec spec;
  milliseconds requested{0};
  std::string cwd_rel;
  if (tool.kind == ToolKind::kExec) {
    auto args = ToolRegistry::ParseExecArgs(request.args);
    if (!args) return Finish(job, ErrorResult(command_id, args.error()));
    spec.argv = args->shell ? ShellArgv(args->command, args->args)
                            : std::vector<std::string>{args->command};
    if (!args->shell) spec.argv.insert(spec.argv.end(), args->args.begin(), args->args.end());
    spec.env = args->env;
    spec.stdin_data = args->stdin_data;
    requested = args->timeout;
    cwd_rel = args->cwd;
  } else if (job->control) {
    // A session's process: the interactive tool's argv (no placeholders), a persistent
    // stdin through the session's handle, cwd = its workspace below the workspace root.
    auto argv = tool.command->Render(json::object());
    if (!argv) return Finish(job, ErrorResult(command_id, argv.error()));
    spec.argv = std::move(*argv);
    spec.env = request.env;
    spec.env["EDGE_SESSION_ID"] = job->session_id;
    spec.env["EDGE_AGENT_NAME"] = tool.name;
    spec.control = job->control;
    requested = tool.timeout;
    cwd_rel = job->session_workspace;
    auto root = ScopedRoot::Open(workspace);
    if (!root) return Finish(job, ErrorResult(command_id, root.error()));
    if (auto dir = root->OpenBeneath(cwd_rel, O_PATH | O_DIRECTORY); !dir) {
      return Finish(job, ErrorResult(command_id, Error{dir.error().code,
                                                       "session.start arg 'workspace_path' '" +
                                                           cwd_rel + "': " + dir.error().message}));
    }
  } else {
    auto argv = tool.command->Render(request.args);
    if (!argv) return Finish(job, ErrorResult(command_id, argv.error()));
    spec.argv = std::move(*argv);
    spec.env = request.env;
    spec.stdin_data = request.stdin_data;
    requested = tool.timeout;
  }
  if (request.timeout) requested = *request.timeout;
  // A session has no default deadline (its controller ends it); a context's cap still applies.
  spec.timeout =
      ctx.EffectiveTimeout(requested, job->control ? milliseconds(0) : options_.default_timeout);
  spec.kill_grace = options_.kill_grace;
  spec.env_allow = options_.env_allow;
  spec.run_as = ctx.config().run_as;
  // The config key of the cap that applies, for the payload of a command it cuts short.
  const std::string context_cap_key =
      "security_contexts." + ctx.name() + ".limits.max_output_bytes";
  const uint64_t context_cap = ctx.config().limits.max_output_bytes;
  std::string cap_key = context_cap != 0 && context_cap <= options_.max_output_bytes
                            ? context_cap_key
                            : "sandbox.max_output_bytes";
  if (job->control) {
    // A session runs for days and streams as it goes (back-pressure bounds memory; its result
    // keeps a tail): the agent-wide cap, a total per command, would leave it running mute once
    // it had printed 64 MiB. Only its security context's own cap applies, and past that the
    // session is ended (its result says output_capped) rather than left without output.
    spec.max_output_bytes = context_cap == 0 ? std::numeric_limits<uint64_t>::max() : context_cap;
    if (context_cap != 0) spec.on_output_cap = OutputCapPolicy::kStop;
    cap_key = context_cap_key;
  } else {
    spec.max_output_bytes = ctx.EffectiveOutputCap(options_.max_output_bytes);
  }
  spec.max_processes = ctx.config().limits.max_processes;
  spec.output_window_bytes = request.output_window_bytes;
  spec.output_linger = request.output_linger;
  spec.label = command_id;
  auto parts = ScopedRoot::Normalize(cwd_rel);
  if (!parts) {
    const std::string field =
        job->control ? "session.start arg 'workspace_path'" : "exec arg 'cwd'";
    return Finish(
        job, ErrorResult(command_id, Error{parts.error().code, field + " '" + cwd_rel +
                                                                   "': " + parts.error().message}));
  }
  spec.cwd = workspace;
  for (const auto& p : *parts)
    spec.cwd += "/" + p;
  WrapOptions wrap{workspace, ctx.config().mount_points, options_.bwrap_network};
  if (auto st = provider_->Wrap(spec, wrap); !st) {
    return Finish(job, ErrorResult(command_id, st.error()));
  }

  // Output kept for the payload: all of it (up to the cap), or with a tail limit the last
  // bytes of each stream, trimmed as it grows so memory stays bounded.
  size_t tail = request.collect_tail_bytes;
  bool collect = request.collect_output;
  if (job->control) {
    // A session can run for days: its result keeps only the last bytes of each stream.
    collect = true;
    if (tail == 0 || tail > kSessionTailBytes) tail = kSessionTailBytes;
  }
  struct Collected {
    OutputTail out, err;
  };
  auto collected = std::make_shared<Collected>(Collected{OutputTail(tail), OutputTail(tail)});
  std::shared_ptr<LogBuffer> console =
      request.sandbox_id.empty() ? nullptr : ConsoleLog(request.sandbox_id);
  ChunkSink sink = [collected, console, collect, on_chunk](OutputChunk chunk,
                                                           std::function<void()> ack) {
    if (console != nullptr) (void)console->Append(chunk.data);
    if (collect) {
      (chunk.stream == OutputStream::kStdout ? collected->out : collected->err).Add(chunk.data);
    }
    if (on_chunk) {
      on_chunk(std::move(chunk), std::move(ack));
    } else {
      ack();
    }
  };
  milliseconds timeout = spec.timeout;
  const uint64_t output_cap = spec.max_output_bytes;
  const std::string agent_name = tool.name;
  runner_->Run(std::move(spec), job->source.token(), std::move(sink),
               [this, job, collected, collect, command_id, timeout, output_cap, cap_key, console,
                agent_name](Result<ProcessResult> pr) {
                 if (console != nullptr) console->FlushPartial();
                 if (!pr) {
                   // A cancel that came before the start (a destroy removing the workspace, a drain
                   // past its grace) is why the start failed: the outcome is the cancel.
                   if (job->source.cancelled())
                     return Finish(job, CancelledBeforeStart(command_id, job->source));
                   return Finish(job, ErrorResult(command_id, pr.error()));
                 }
                 InvokeResult r;
                 r.command_id = command_id;
                 r.exit_code = pr->exit_code;
                 r.signal = pr->signal;
                 r.output_truncated = pr->output_truncated;
                 r.peak_rss_kb = pr->peak_rss_kb;
                 r.payload = json{{"exit_code", pr->exit_code}, {"signal", pr->signal}};
                 if (pr->output_truncated) {
                   // Past the cap the output was dropped, not just kept out of the payload:
                   // a door that streamed it says so to its caller.
                   r.payload["output_capped"] = true;
                   r.payload["output_cap_bytes"] = output_cap;
                   r.payload["output_cap_key"] = cap_key;
                 }
                 if (job->control) {
                   r.payload["session_id"] = job->session_id;
                   r.payload["agent_name"] = agent_name;
                 }
                 if (collect) {
                   // Output is bytes: text when it is UTF-8, else lossy text + the exact bytes.
                   PutBytes(r.payload, "stdout", collected->out.Finish());
                   PutBytes(r.payload, "stderr", collected->err.Finish());
                   if (collected->out.cut() || collected->err.cut()) {
                     r.payload["output_truncated"] = true;
                   }
                 }
                 r.timeout = timeout;
                 if (pr->timed_out) {
                   r.outcome = Outcome::kTimedOut;
                   r.error =
                       Error{ErrorCode::kTimedOut, "command exceeded its timeout of " +
                                                       std::to_string(timeout.count()) + " ms"};
                 } else if (pr->cancelled) {
                   r.outcome = Outcome::kCancelled;
                   r.reason = pr->cancel_reason;
                   r.error = Error{ErrorCode::kCancelled, "cancelled: " + pr->cancel_reason};
                 }
                 Finish(job, std::move(r));
               });
}

InvokeResult Executor::RunFileTool(const ToolDefinition& tool, const InvokeRequest& request,
                                   const std::string& workspace, const SecurityContext& ctx,
                                   const CancelToken& cancel, UniqueFd* release_after) {
  InvokeResult r;
  auto fail = [&](Error e) {
    r.outcome = e.code == ErrorCode::kCancelled ? Outcome::kCancelled : Outcome::kError;
    if (r.outcome == Outcome::kCancelled) r.reason = cancel.reason();
    r.error = std::move(e);
    return r;
  };
  if (tool.kind == ToolKind::kSysinfo) {
    r.payload = CollectSysinfo(options_.agent_version);
    return r;
  }
  // file.search has args of its own; the other file tools share FileArgs.
  std::optional<FileSearchArgs> search;
  std::optional<FileArgs> args;
  if (tool.kind == ToolKind::kFileSearch) {
    auto parsed = ToolRegistry::ParseFileSearchArgs(request.args);
    if (!parsed) return fail(parsed.error());
    search = std::move(*parsed);
  } else {
    auto parsed = ToolRegistry::ParseFileArgs(tool.kind, request.args);
    if (!parsed) return fail(parsed.error());
    args = std::move(*parsed);
  }
  // The workspace root is opened by the agent; below it the context's user does the work:
  // this pool thread takes the user's file-system identity for the call, so the kernel grants
  // exactly what that user may do inside the workspace (run_as.h).
  auto root = ScopedRoot::Open(workspace);
  if (!root) return fail(root.error());
  auto run_as = ResolveRunAs(ctx.config().run_as);
  if (!run_as) return fail(run_as.error());
  std::unique_ptr<ThreadFsCredentials> as_user;
  if (run_as->has_value()) {
    auto switched = ThreadFsCredentials::Switch(**run_as);
    if (!switched) return fail(switched.error());
    as_user = std::move(*switched);
  }
  uint64_t read_cap = ctx.EffectiveOutputCap(options_.max_output_bytes);
  if (request.max_result_bytes > 0) {
    // base64 makes 3 bytes 4; keep 4 KiB for the rest of the payload.
    const uint64_t fits =
        request.max_result_bytes > 4096 ? (request.max_result_bytes - 4096) / 4 * 3 : 0;
    read_cap = std::min(read_cap, fits);
  }
  FileService files(std::move(*root), read_cap, [cancel] { return cancel.cancelled(); });
  switch (tool.kind) {
    case ToolKind::kFileRead: {
      auto content = files.ReadBase64(args->path, args->offset, args->length);
      if (!content) return fail(content.error());
      r.payload = json{
          {"path", args->path}, {"size", content->size}, {"content", std::move(content->base64)}};
      return r;
    }
    case ToolKind::kFileWrite: {
      // 8 MiB of bytes at a time: a file of hundreds of MB costs one such buffer, not its size.
      Base64PieceDecoder content(args->content_base64, size_t{8} << 20);
      if (auto st = files.Write(
              args->path, [&] { return content.Next(); }, args->mode, release_after);
          !st) {
        return fail(st.error());
      }
      r.payload = json{{"path", args->path}, {"size", args->content_size}};
      return r;
    }
    case ToolKind::kFileList: {
      auto list = files.List(args->path);
      if (!list) return fail(list.error());
      json arr = json::array();
      for (const auto& f : *list)
        arr.push_back(FileInfoToJson(f));
      r.payload = json{{"files", std::move(arr)}};
      return r;
    }
    case ToolKind::kFileStat: {
      auto info = files.Stat(args->path);
      if (!info) return fail(info.error());
      r.payload = json{{"file", FileInfoToJson(*info)}};
      return r;
    }
    case ToolKind::kFileDelete: {
      if (auto st = files.Delete(args->path, args->recursive); !st) return fail(st.error());
      r.payload = json{{"path", args->path}, {"deleted", true}};
      return r;
    }
    case ToolKind::kFileMove: {
      if (auto st = files.Move(args->path, args->new_path); !st) return fail(st.error());
      r.payload = json{{"old_path", args->path}, {"new_path", args->new_path}, {"moved", true}};
      return r;
    }
    case ToolKind::kFileChmod: {
      if (auto st = files.Chmod(args->path, args->mode); !st) return fail(st.error());
      r.payload = json{{"path", args->path}, {"mode", args->mode}};
      return r;
    }
    case ToolKind::kFileSearch: {
      auto found = files.Search(search->path, search->query, search->limit);
      if (!found) return fail(found.error());
      json arr = json::array();
      for (const auto& c : found->candidates) {
        json one = json::object();
        PutBytes(one, "path", c.path);
        one["type"] = c.type;
        arr.push_back(std::move(one));
      }
      r.payload = json{{"candidates", std::move(arr)}, {"truncated", found->truncated}};
      return r;
    }
    case ToolKind::kFileGlob: {
      auto matches = files.Glob(args->path);
      if (!matches) return fail(matches.error());
      // Each match as text; a name that is not UTF-8 is listed again, exactly, in
      // matches_base64 (same index), as PutBytes does for one field.
      json arr = json::array();
      json raw = json::array();
      bool any_raw = false;
      for (const auto& m : *matches) {
        json one = json::object();
        PutBytes(one, "m", m);
        arr.push_back(one["m"]);
        any_raw = any_raw || one.contains("m_base64");
        raw.push_back(one.value("m_base64", Base64Encode(m)));
      }
      r.payload = json{{"matches", std::move(arr)}};
      if (any_raw) r.payload["matches_base64"] = std::move(raw);
      return r;
    }
    default:
      return fail(Error{ErrorCode::kInternal, "tool '" + tool.name + "' has no file action"});
  }
}

InvokeResult Executor::RunSessionTool(const ToolDefinition& tool, const InvokeRequest& request) {
  std::string session_id;
  std::optional<SessionInputArgs> input;
  std::optional<SessionSignalArgs> signal;
  if (tool.kind == ToolKind::kSessionInput) {
    auto a = ToolRegistry::ParseSessionInputArgs(request.args);
    if (!a) return ErrorResult(request.command_id, a.error());
    session_id = a->session_id;
    input = std::move(*a);
  } else {
    auto a = ToolRegistry::ParseSessionSignalArgs(request.args);
    if (!a) return ErrorResult(request.command_id, a.error());
    session_id = a->session_id;
    signal = std::move(*a);
  }
  std::shared_ptr<ProcessControl> control;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(session_id);
    if (it != sessions_.end()) control = it->second.control;
  }
  if (!control) {
    return ErrorResult(request.command_id, Error{ErrorCode::kNotFound,
                                                 "session '" + session_id +
                                                     "' is not live here (unknown, or it ended)"});
  }
  auto fail = [&](const Error& e) {
    return ErrorResult(request.command_id,
                       Error{e.code, tool.name + ": session '" + session_id + "': " + e.message});
  };
  InvokeResult r;
  if (input) {
    const size_t bytes = input->line.size() + 1;
    if (auto st = control->Write(std::move(input->line) + "\n"); !st) return fail(st.error());
    r.payload = json{
        {"session_id", session_id}, {"bytes", bytes}, {"queued_bytes", control->queued_bytes()}};
    return r;
  }
  if (auto st = control->Signal(signal->signal); !st) return fail(st.error());
  r.payload = json{{"session_id", session_id}, {"signal", signal->signal_name}};
  return r;
}

void Executor::Finish(const std::shared_ptr<Inflight>& job, InvokeResult result) {
  result.duration = std::chrono::duration_cast<milliseconds>(clock_.Monotonic() - job->started);
  // Messages can quote file names and other bytes: text on every wire must be UTF-8.
  result.error.message = ToValidUtf8(result.error.message);
  result.reason = ToValidUtf8(result.reason);
  // Every admitted command's result is stored, a cut by the agent's shutdown included: it is
  // the command's one terminal result (the door delivers it), so a repeat of the command_id
  // after the restart — the controller sends again what has no result — answers with it
  // instead of running the command a second time.
  // Set when the answer must wait for this record's sync (a door that is not confirming).
  std::optional<uint64_t> sync_mark;
  if (!job->command_id.empty() && job->record_result) {
    // A confirming door (the edge door) writes the result to its outbox inside `done` below,
    // and neither that row nor this record waits for the disk (issue 14): the command's journal
    // row, on disk since before it started, goes only after both (Finished, below), and the WAL
    // is replayed as a prefix — so a power cut leaves the row whenever it takes either, and the
    // next start ends the command with this record if it survived, else AGENT_RESTARTED: one
    // terminal result either way (the controller keeps the first it got). Other doors answer
    // their caller directly; their record is on disk before the answer leaves. That sync is
    // not waited for here, on the thread that ends commands one after another, but on the
    // admission thread, which makes one sync for every record written meanwhile
    // (DeliverAfterSync).
    // The payload is valid UTF-8 by construction; `replace` keeps a slip from throwing here.
    auto st = idempotency_->Record(
        job->command_id, result.ToJson().dump(-1, ' ', false, json::error_handler_t::replace),
        Durability::kRelaxed);
    if (!st) {
      ++result_store_failures_;
      log::Get("sandbox")->error(
          "command {}: its result could not be stored for idempotency ({}); a repeat of this "
          "command_id would run it again",
          log::Escape(job->command_id), st.error().ToString());
    } else if (!options_.confirming_doors.contains(job->door)) {
      sync_mark = db_->CommitMark();
    }
  }
  job->external.Reset();
  // The session ends with its command: out of the table, its stdin closed, no more signals.
  if (job->control) job->control->Close("session '" + job->session_id + "' has ended");
  DoneCallback done = std::move(job->done);
  std::vector<std::function<void()>> waiters;
  std::vector<DestroyCallback> destroy_ready;
  {
    std::lock_guard lock(mu_);
    if (!job->session_id.empty()) {
      auto it = sessions_.find(job->session_id);
      if (it != sessions_.end() && it->second.job_id == job->id) sessions_.erase(it);
    }
    inflight_.erase(job->id);
    // The last command of a sandbox being destroyed: the destroys waiting for it go on.
    if (destroying_.contains(job->resource) && RunningForLocked(job->resource) == 0) {
      if (auto it = destroy_waiters_.find(job->resource); it != destroy_waiters_.end()) {
        for (auto& [ticket, cb] : it->second)
          destroy_ready.push_back(std::move(cb));
        destroy_waiters_.erase(it);
        ++destroy_finishing_[job->resource];
      }
    }
    if (!job->command_id.empty()) running_ids_.erase(job->command_id);
    if (--per_context_[job->context] <= 0) per_context_.erase(job->context);
    if (!job->door.empty() && --per_door_[job->door] == 0) per_door_.erase(job->door);
    if (sync_mark) ++pending_deliveries_;  // counted until delivered (DeliverAfterSync)
    if (shutting_down_ && IdleLocked()) waiters.swap(idle_waiters_);
  }
  if (!destroy_ready.empty()) {
    PostBlocking([this, id = job->resource, ready = std::move(destroy_ready)]() mutable {
      FinishDestroy(id, std::move(ready));
    });
  }
  // `done` may let the executor's owner destroy it (a waiter on the result): nothing of `this`
  // is used after it. The journal and the database it writes to (the journal holds only a
  // reference to it) are kept alive by the delivery itself.
  std::shared_ptr<StateDb> db = db_;
  std::shared_ptr<CommandJournal> journal = journal_;
  const std::string command_id = job->command_id;
  const std::optional<int64_t> admission = job->journal_admission;
  auto deliver = [done = std::move(done), result = std::move(result), db, journal, command_id,
                  admission, waiters = std::move(waiters)]() mutable {
    (void)db;  // held until the journal row is removed: the owner may drop the executor in `done`
    if (done) done(std::move(result));
    Delivered(*journal, command_id, admission);
    for (auto& w : waiters)
      w();
  };
  if (sync_mark) return DeliverAfterSync(*sync_mark, command_id, std::move(deliver));
  deliver();
}

void Executor::Delivered(CommandJournal& journal, const std::string& command_id,
                         std::optional<int64_t> admission) {
  // The journal row goes only once the door has the result (the edge door's outbox row is
  // written, synced, inside `done`). The removal does not wait for the disk: whatever ends the
  // agent, either it is lost — the row comes back at the next start, which delivers the stored
  // result again (the door keeps the first) — or it survives, and then so does everything the
  // door wrote before it (the WAL is replayed as a prefix). Only this run's row: should the
  // same command_id have been admitted again meanwhile (its result could not be stored, so a
  // repeat runs it again), that run's row stays until that run ends.
  if (admission) {
    if (auto fin = journal.Finished(command_id, *admission); !fin) {
      log::Get("sandbox")->error(
          "command {}: still in the command journal ({}); after a restart its stored result "
          "is delivered again",
          log::Escape(command_id), fin.error().ToString());
    }
  }
}

bool Executor::IdleLocked() const {
  return inflight_.empty() && pending_deliveries_ == 0;
}

void Executor::DeliverAfterSync(uint64_t mark, const std::string& command_id,
                                std::function<void()> deliver) {
  auto work = [this, db = db_, mark, command_id, deliver = std::move(deliver)] {
    if (auto st = db->Sync(mark); !st) {
      ++result_store_failures_;
      log::Get("sandbox")->error(
          "command {}: its result record may not be on disk ({}); after a power cut a repeat "
          "of this command_id would run it again",
          log::Escape(command_id), st.error().ToString());
    }
    // The last delivery a Shutdown waits for lets its waiters go, after the answer.
    std::vector<std::function<void()>> waiters;
    {
      std::lock_guard lock(mu_);
      --pending_deliveries_;
      if (shutting_down_ && IdleLocked()) waiters.swap(idle_waiters_);
    }
    // Nothing of `this` from here on: `deliver` may let the owner destroy the executor — from
    // another thread: the destructor joins this one, so a `done` must never destroy the
    // executor itself.
    deliver();
    for (auto& w : waiters)
      w();
  };
  {
    std::lock_guard lock(blocking_mu_);
    if (!closing_) {
      boost::asio::post(AdmissionsLocked(), std::move(work));
      return;
    }
  }
  work();  // the destructor has joined (or is joining) the admission thread: sync here
}

edge::Status Executor::RecoverInterrupted(const ProcessRunner::StaleReport& stale) {
  auto unfinished = journal_->Unfinished();
  if (!unfinished) return std::unexpected(unfinished.error());
  auto log = log::Get("sandbox");
  for (const auto& e : *unfinished) {
    auto stored = StoredResult(e.command_id);
    InvokeResult r;
    if (stored && stored->has_value()) {
      // It ended and its result was stored; only the journal entry was left.
      r = std::move(**stored);
      r.replayed = false;
    } else {
      std::string process =
          "it had no process running (it was received but not started, or "
          "its process had already ended)";
      for (const auto& g : stale.groups) {
        if (g.label != e.command_id) continue;
        process = "its process group " + std::to_string(g.pgid) +
                  (g.signalled ? " was killed when the agent started again"
                               : " had already exited when the agent started again");
      }
      r = ErrorResult(e.command_id,
                      Error{ErrorCode::kAgentRestarted,
                            "command " + e.command_id + " (tool " + e.tool + ", admitted at " +
                                FormatRfc3339(FromEpochMillis(e.admitted_at_ms)) +
                                ") was running when the agent stopped without ending it; " +
                                process + "; whatever it did before is not undone"});
      auto st = idempotency_->Record(
          e.command_id, r.ToJson().dump(-1, ' ', false, json::error_handler_t::replace));
      if (!st) {
        log->error("command {}: its AGENT_RESTARTED result could not be stored ({})",
                   log::Escape(e.command_id), st.error().ToString());
      }
    }
    log->warn("command {}: {}", log::Escape(e.command_id),
              r.outcome == Outcome::kError ? r.error.message : "its stored result is delivered");
    // A confirming door's row stays until the door has stored the result (ConfirmInterrupted).
    if (!options_.confirming_doors.contains(e.door)) {
      if (auto fin = journal_->Finished(e.command_id, e.admission); !fin) return fin;
    }
    std::lock_guard lock(mu_);
    if (options_.confirming_doors.contains(e.door)) {
      interrupted_rows_[e.command_id] = e.admission;
    }
    interrupted_[e.door].push_back(std::move(r));
  }
  return OkStatus();
}

std::vector<InvokeResult> Executor::TakeInterrupted(const std::string& door) {
  std::lock_guard lock(mu_);
  auto node = interrupted_.extract(door);
  return node.empty() ? std::vector<InvokeResult>{} : std::move(node.mapped());
}

edge::Status Executor::ConfirmInterrupted(const std::string& command_id) {
  int64_t admission = 0;
  {
    std::lock_guard lock(mu_);
    auto it = interrupted_rows_.find(command_id);
    if (it == interrupted_rows_.end()) return OkStatus();  // confirmed already, or never
    admission = it->second;
  }
  if (auto st = journal_->Finished(command_id, admission); !st) return st;  // may be retried
  std::lock_guard lock(mu_);
  interrupted_rows_.erase(command_id);
  return OkStatus();
}

// ---- sandboxes and files -----------------------------------------------------------------

Result<std::string> Executor::Workspace(std::string_view sandbox_id) const {
  if (sandbox_id.empty()) return default_workspace_;
  {
    std::lock_guard lock(mu_);
    if (destroying_.contains(sandbox_id)) {
      return MakeError(
          ErrorCode::kFailedPrecondition,
          "sandbox '" + std::string(sandbox_id) + "' is being destroyed: it takes no new work");
    }
  }
  auto info = registry_->Get(sandbox_id);
  if (!info) return std::unexpected(info.error());
  if (info->state == SandboxState::kDestroyed) {
    return MakeError(ErrorCode::kNotFound,
                     "sandbox '" + std::string(sandbox_id) + "' was destroyed");
  }
  if (info->state != SandboxState::kRunning) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "sandbox '" + std::string(sandbox_id) + "' is " +
                         std::string(SandboxStateName(info->state)) + ", not running");
  }
  return info->root_dir;
}

Result<FileService> Executor::Files(std::string_view sandbox_id) const {
  auto ws = Workspace(sandbox_id);
  if (!ws) return std::unexpected(ws.error());
  auto root = ScopedRoot::Open(*ws);
  if (!root) return std::unexpected(root.error());
  return FileService(std::move(*root), options_.max_output_bytes);
}

edge::Status Executor::AcceptLease(const Lease* lease, std::string_view resource_id) const {
  return leases_->Accept(lease, options_.own_id, resource_id, clock_);
}

std::shared_ptr<LogBuffer> Executor::ConsoleLog(const std::string& sandbox_id) {
  std::lock_guard lock(logs_mu_);
  auto it = logs_.find(sandbox_id);
  if (it != logs_.end()) return it->second;
  auto log = LogBuffer::Open(registry_->SandboxDir(sandbox_id) + "/console.log");
  if (!log) return nullptr;
  return logs_.emplace(sandbox_id, std::shared_ptr<LogBuffer>(std::move(*log))).first->second;
}

Result<SandboxInfo> Executor::Spawn(const SpawnRequest& request, const Lease* lease) {
  if (auto st = SandboxRegistry::ValidateId(request.id); !st) return std::unexpected(st.error());
  if (request.id == kDefaultSandbox) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "sandbox_id '_default': reserved for the default workspace");
  }
  if (spawns_draining()) {
    return MakeError(ErrorCode::kDraining,
                     "the agent is draining: sandbox '" + request.id + "' was not spawned");
  }
  SpawnRequest req = request;
  if (req.provider.empty()) req.provider = provider_->name();
  if (req.provider != provider_->name()) {
    return MakeError(ErrorCode::kInvalidArgument, "provider '" + req.provider +
                                                      "': this agent runs provider '" +
                                                      std::string(provider_->name()) + "'");
  }
  if (auto st = AcceptLease(lease, req.id); !st) return std::unexpected(st.error());
  {
    std::lock_guard lock(mu_);
    if (destroying_.contains(req.id)) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "sandbox_id '" + req.id +
                           "' is being destroyed; spawn it again once a destroy of it has "
                           "succeeded");
    }
  }
  if (req.runtime_id.empty()) req.runtime_id = req.provider + "-" + req.id;
  auto spawned = registry_->Spawn(req);
  if (spawned && spawned->expires_at && tick_listener_) tick_listener_();  // a TTL to watch
  return spawned;
}

void Executor::Destroy(std::string_view sandbox_id, const Lease* lease, DestroyCallback done) {
  if (auto st = SandboxRegistry::ValidateId(sandbox_id); !st)
    return done(std::unexpected(st.error()));
  if (auto info = registry_->Get(sandbox_id); !info) return done(std::unexpected(info.error()));
  if (auto st = AcceptLease(lease, sandbox_id); !st) return done(std::unexpected(st.error()));
  BeginDestroy(std::string(sandbox_id), "destroyed", DestroyWait(), std::move(done));
}

std::chrono::milliseconds Executor::DestroyWait() const {
  return options_.destroy_wait.value_or(options_.kill_grace + std::chrono::seconds(5));
}

size_t Executor::RunningForLocked(std::string_view resource) const {
  return static_cast<size_t>(std::count_if(inflight_.begin(), inflight_.end(), [&](const auto& e) {
    return e.second->resource == resource;
  }));
}

void Executor::PostBlocking(std::function<void()> work) {
  {
    std::lock_guard lock(blocking_mu_);
    if (!closing_) {
      boost::asio::post(BlockingLocked(), std::move(work));
      return;
    }
  }
  work();  // the destructor has joined (or is joining) the pool
}

void Executor::BeginDestroy(const std::string& sandbox_id, std::string_view why,
                            std::chrono::milliseconds wait, DestroyCallback done) {
  std::vector<std::shared_ptr<Inflight>> victims;
  uint64_t ticket = 0;
  {
    std::lock_guard lock(mu_);
    // Set in the same section that reads inflight_: a command admitted after it finds the
    // mark in Start (Workspace) and is refused; one admitted before is a victim here.
    destroying_.insert(sandbox_id);
    for (auto& [job_id, job] : inflight_) {
      if (job->resource == sandbox_id) victims.push_back(job);
    }
    if (!victims.empty()) {
      ticket = next_destroy_ticket_++;
      destroy_waiters_[sandbox_id].emplace(ticket, std::move(done));
    } else {
      ++destroy_finishing_[sandbox_id];
    }
  }
  if (victims.empty()) {
    std::vector<DestroyCallback> now;
    now.push_back(std::move(done));
    return PostBlocking([this, sandbox_id, now = std::move(now)]() mutable {
      FinishDestroy(sandbox_id, std::move(now));
    });
  }
  for (auto& j : victims)
    j->source.Cancel("sandbox '" + sandbox_id + "' " + std::string(why));
  // Past `wait` on the clock, a waiter still here is answered UNAVAILABLE (the runner's
  // SIGKILL comes after kill_grace, so only a process it cannot end outlasts the default).
  std::weak_ptr<int> alive = alive_;
  timers_->After(wait, [this, alive, sandbox_id, ticket, wait] {
    if (alive.expired()) return;
    DestroyCallback late;
    size_t still = 0;
    {
      std::lock_guard lock(mu_);
      auto it = destroy_waiters_.find(sandbox_id);
      if (it == destroy_waiters_.end()) return;
      auto w = it->second.find(ticket);
      if (w == it->second.end()) return;  // answered already
      late = std::move(w->second);
      it->second.erase(w);
      if (it->second.empty()) destroy_waiters_.erase(it);
      still = RunningForLocked(sandbox_id);
    }
    late(MakeError(ErrorCode::kUnavailable,
                   "sandbox '" + sandbox_id + "': " + std::to_string(still) +
                       " of its commands still running " + std::to_string(wait.count()) +
                       " ms after they were cancelled; its workspace is kept and it takes no new "
                       "work; destroy it again"));
    // An expired sandbox is watched by the tick again (NextTick skipped it while it waited).
    if (tick_listener_) tick_listener_();
  });
}

void Executor::FinishDestroy(const std::string& sandbox_id, std::vector<DestroyCallback> waiters) {
  {
    std::lock_guard lock(logs_mu_);
    logs_.erase(sandbox_id);
  }
  auto info = registry_->Destroy(sandbox_id);  // on failure still marked: a destroy retries
  if (info) (void)leases_->Release(sandbox_id, options_.own_id);
  {
    std::lock_guard lock(mu_);
    auto it = destroy_finishing_.find(sandbox_id);
    if (it != destroy_finishing_.end() && --it->second == 0) destroy_finishing_.erase(it);
    // Work is taken again once no other destroy of the id is waiting or finishing.
    if (info && !destroy_waiters_.contains(sandbox_id) && !destroy_finishing_.contains(sandbox_id))
      destroying_.erase(sandbox_id);
  }
  for (auto& done : waiters)
    done(info);
}

Result<SandboxInfo> Executor::Status(std::string_view sandbox_id) const {
  return registry_->Get(sandbox_id);
}

Result<std::vector<SandboxInfo>> Executor::List() const {
  return registry_->List(false);
}

Result<Lease> Executor::RenewLease(const Lease& renewed) {
  if (auto st = leases_->Renew(renewed, options_.own_id, clock_); !st) {
    return std::unexpected(st.error());
  }
  return renewed;
}

template <typename Fn>
auto Executor::OnFiles(std::string_view sandbox_id, const Lease* lease, Fn&& fn) const
    -> std::invoke_result_t<Fn, FileService&> {
  using R = std::invoke_result_t<Fn, FileService&>;
  auto files = Files(sandbox_id);
  if (!files) return R(std::unexpected(files.error()));
  if (lease != nullptr) {
    if (auto st = AcceptLease(lease, LeaseResource(sandbox_id)); !st) {
      return R(std::unexpected(st.error()));
    }
  }
  return fn(*files);
}

edge::Status Executor::WriteFile(std::string_view sandbox_id, std::string_view path,
                                 std::string_view content, std::string_view mode,
                                 const Lease* lease) {
  return OnFiles(sandbox_id, lease, [&](FileService& f) { return f.Write(path, content, mode); });
}

Result<std::string> Executor::ReadFile(std::string_view sandbox_id, std::string_view path,
                                       uint64_t offset, std::optional<uint64_t> length) const {
  return OnFiles(sandbox_id, nullptr, [&](FileService& f) { return f.Read(path, offset, length); });
}

Result<std::vector<FileInfo>> Executor::ListFiles(std::string_view sandbox_id,
                                                  std::string_view path) const {
  return OnFiles(sandbox_id, nullptr, [&](FileService& f) { return f.List(path); });
}

Result<FileInfo> Executor::StatFile(std::string_view sandbox_id, std::string_view path) const {
  return OnFiles(sandbox_id, nullptr, [&](FileService& f) { return f.Stat(path); });
}

edge::Status Executor::DeleteFile(std::string_view sandbox_id, std::string_view path,
                                  bool recursive, const Lease* lease) {
  return OnFiles(sandbox_id, lease, [&](FileService& f) { return f.Delete(path, recursive); });
}

edge::Status Executor::MoveFile(std::string_view sandbox_id, std::string_view from,
                                std::string_view to, const Lease* lease) {
  return OnFiles(sandbox_id, lease, [&](FileService& f) { return f.Move(from, to); });
}

edge::Status Executor::ChmodFile(std::string_view sandbox_id, std::string_view path,
                                 std::string_view mode, const Lease* lease) {
  return OnFiles(sandbox_id, lease, [&](FileService& f) { return f.Chmod(path, mode); });
}

Result<std::vector<std::string>> Executor::Glob(std::string_view sandbox_id,
                                                std::string_view pattern) const {
  return OnFiles(sandbox_id, nullptr, [&](FileService& f) { return f.Glob(pattern); });
}

Result<std::vector<std::string>> Executor::Logs(std::string_view sandbox_id, size_t n) {
  auto info = registry_->Get(sandbox_id);
  if (!info) return std::unexpected(info.error());
  if (info->state == SandboxState::kDestroyed) {
    return MakeError(ErrorCode::kNotFound,
                     "sandbox '" + std::string(sandbox_id) + "' was destroyed");
  }
  std::shared_ptr<LogBuffer> log = ConsoleLog(std::string(sandbox_id));
  if (log == nullptr) {
    return MakeError(ErrorCode::kInternal,
                     "console log of sandbox '" + std::string(sandbox_id) + "' cannot be opened");
  }
  return log->Tail(n);
}

// ---- lifecycle ---------------------------------------------------------------------------

void Executor::Drain() {
  std::lock_guard lock(mu_);
  draining_ = true;
}

bool Executor::draining() const {
  std::lock_guard lock(mu_);
  return draining_;
}

void Executor::DrainSpawns() {
  std::lock_guard lock(mu_);
  spawns_draining_ = true;
}

bool Executor::spawns_draining() const {
  std::lock_guard lock(mu_);
  return draining_ || spawns_draining_;
}

bool Executor::shutting_down() const {
  std::lock_guard lock(mu_);
  return shutting_down_;
}

bool Executor::IsRunning(const std::string& command_id) const {
  std::lock_guard lock(mu_);
  return running_ids_.contains(command_id);
}

bool Executor::Cancel(const std::string& command_id, const std::string& reason) {
  std::shared_ptr<Inflight> job;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, j] : inflight_) {
      if (j->command_id == command_id) {
        job = j;
        break;
      }
    }
  }
  if (!job) return false;
  job->source.Cancel(reason);
  return true;
}

size_t Executor::running(const std::string& door) const {
  std::lock_guard lock(mu_);
  const auto it = per_door_.find(door);
  return it == per_door_.end() ? 0 : it->second;
}

size_t Executor::running() const {
  std::lock_guard lock(mu_);
  return inflight_.size();
}

std::vector<std::string> Executor::Sessions() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, s] : sessions_)
    out.push_back(id);
  return out;
}

void Executor::Shutdown(milliseconds grace, std::function<void()> done) {
  bool idle = false;
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    shutting_down_ = true;
    idle = IdleLocked();
    if (!idle && done) idle_waiters_.push_back(std::move(done));
  }
  if (idle) {
    runner_->Shutdown(options_.kill_grace);
    if (done) boost::asio::post(io_, std::move(done));
    return;
  }
  // After `grace` on the injected clock, on the io_context: cancel what is left.
  std::weak_ptr<int> alive = alive_;
  timers_->After(grace, [this, alive] {
    boost::asio::post(io_, [this, alive] {
      if (alive.expired()) return;
      std::vector<std::shared_ptr<Inflight>> jobs;
      {
        std::lock_guard lock(mu_);
        for (auto& [id, job] : inflight_)
          jobs.push_back(job);
      }
      for (auto& j : jobs)
        j->source.Cancel(kShutdownReason);
      runner_->Shutdown(options_.kill_grace);
    });
  });
}

size_t Executor::ReleaseMemory() {
  return db_->ReleaseMemory();
}

size_t Executor::Tick(Clock::WallTime now) {
  auto expired = leases_->ExpiredLeases(clock_);
  size_t cancelled = 0;
  if (expired && !expired->empty()) {
    std::vector<std::pair<std::shared_ptr<Inflight>, std::string>> victims;
    {
      std::lock_guard lock(mu_);
      for (const auto& lease : *expired) {
        for (auto& [id, job] : inflight_) {
          if (job->has_lease && job->resource == lease.resource_id) {
            victims.emplace_back(job, "lease for '" + lease.resource_id + "' (generation " +
                                          std::to_string(lease.generation) + ") expired unrenewed");
          }
        }
      }
    }
    for (auto& [job, reason] : victims) {
      if (job->source.Cancel(reason)) ++cancelled;
    }
  }
  // Sandboxes whose TTL ran out are destroyed like an explicit destroy: their work is
  // cancelled, the workspace removed, the lease released.
  if (auto sandboxes = registry_->Expired(now); sandboxes) {
    for (const auto& sb : *sandboxes) {
      {
        std::lock_guard lock(mu_);
        // Already waiting for its commands, or being removed.
        if (destroy_waiters_.contains(sb.id) || destroy_finishing_.contains(sb.id)) continue;
      }
      BeginDestroy(sb.id, "expired (ttl)", DestroyWait(), [id = sb.id](Result<SandboxInfo> gone) {
        if (gone) {
          log::Get("sandbox")->info("sandbox {} expired (ttl) and was destroyed", id);
        } else {
          log::Get("sandbox")->warn(
              "sandbox {} expired (ttl) but could not be destroyed: {}; "
              "retried on the next tick",
              id, gone.error().ToString());
        }
      });
    }
  }
  (void)idempotency_->Prune();
  return cancelled;
}

Executor::TickPlan Executor::NextTick() const {
  TickPlan plan;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, job] : inflight_) {
      if (job->has_lease) {
        plan.leased_work = true;
        break;
      }
    }
  }
  auto live = registry_->List(false);
  if (!live) {
    plan.sandbox_expiry = clock_.Now();  // look again at the next tick_interval
    return plan;
  }
  std::lock_guard lock(mu_);
  for (const auto& sb : *live) {
    // A destroy under way ends by itself (when its commands end): no tick needs to watch it.
    if (destroy_waiters_.contains(sb.id) || destroy_finishing_.contains(sb.id)) continue;
    if (sb.expires_at && (!plan.sandbox_expiry || *sb.expires_at < *plan.sandbox_expiry)) {
      plan.sandbox_expiry = sb.expires_at;
    }
  }
  return plan;
}

}  // namespace edge::sandbox
