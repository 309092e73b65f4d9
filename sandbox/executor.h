// Executor: THE single entry through which every door (edge stream, compute stream, worker
// RPC) runs work on this host: tools (built-in and from config), exec, file operations,
// sandboxes, console logs. It applies the same rules whichever door the work came through:
// security contexts (allowed tools, run-as user, limits), lease fencing checked before any
// mutation, idempotency by command_id, concurrency caps, deadlines, output caps, drain and
// shutdown. Errors are the stable codes of design.md §7 with messages naming field and value.
//
// Owns the StateDb (data_dir/state/agent.db) and everything built on it (LeaseTable,
// IdempotencyStore, SandboxRegistry), the ProcessRunner and the sandboxes' console logs;
// borrows the io_context (whose threads run the children's I/O) and the Clock (lease expiry,
// idempotency window, durations). Thread-safe: call from any thread. Callbacks (`done`, the
// chunk sink) run on an io_context thread, on a thread of the executor's own blocking-work
// pool (file tools and sysinfo never run on the caller's thread, so a door's gRPC or HTTP
// thread is never held by a recursive delete or a large read), on its admission thread (a
// command with a command_id starts there once its journal row is on disk, so no door's thread
// waits for the disk), or on the caller's thread for refusals, possibly before Invoke returns.
//
// Sessions (wire.md §5.5): session.start runs an interactive config tool as one long
// process with a persistent stdin pipe; the executor owns the session table (session id →
// the command and its ProcessControl). A session is an ordinary admitted command (drain,
// caps, leases, command ids, AGENT_RESTARTED apply), capped by max_sessions; it leaves the
// table, its stdin closed, when its command ends (exit, cancel, deadline). session.input and
// session.signal reach it through the table.
//
// Text: payloads are JSON and always valid UTF-8. Bytes that are not (process output, file
// names) are put as text with U+FFFD replacements plus a `<key>_base64` field with the exact
// bytes (PutBytes); error messages are made valid UTF-8 the same way.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "common/clock.h"
#include "common/error.h"
#include "common/timer_queue.h"
#include "sandbox/cancel.h"
#include "sandbox/command_journal.h"
#include "sandbox/executor_api.h"
#include "sandbox/executor_options.h"
#include "sandbox/executor_types.h"
#include "sandbox/file_service.h"
#include "sandbox/idempotency_store.h"
#include "sandbox/lease_table.h"
#include "sandbox/log_buffer.h"
#include "sandbox/process_control.h"
#include "sandbox/process_result.h"
#include "sandbox/process_runner.h"
#include "sandbox/providers/provider.h"
#include "sandbox/sandbox_registry.h"
#include "sandbox/sandbox_types.h"
#include "sandbox/security_context.h"
#include "sandbox/state_db.h"
#include "sandbox/tool_registry.h"
#include "sandbox/unique_fd.h"

namespace edge::sandbox {

class Executor final : public ExecutorApi {
 public:
  // Opens the state (creating data_dir/state and the sandbox root), kills process groups a
  // previous agent left behind, and validates the options: INVALID_ARGUMENT naming the field
  // (empty data_dir or own_id, unknown provider, bad tool template or security context).
  static Result<std::unique_ptr<Executor>> Open(boost::asio::io_context& io, Clock& clock,
                                                ExecutorOptions options);
  // Kills and reaps whatever still runs (without calling its callbacks); call Shutdown first.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // THE one place a command is admitted, whatever door it came through. `done` is called
  // exactly once. A completed command_id returns its stored result first (even while
  // draining or at a cap). Refusals (no result is stored for them): DRAINING, ALREADY_EXISTS
  // (command_id running, `already_running` set), RESOURCE_EXHAUSTED (executor, door and
  // context caps). Then NOT_FOUND
  // (tool, context, sandbox), PERMISSION_DENIED (tool not allowed), LEASE_REJECTED,
  // INVALID_ARGUMENT / PATH_OUTSIDE_ROOT (args), and the tool's own outcome. A command_id that
  // already completed returns its stored result with `replayed` set.
  void Invoke(InvokeRequest request, CancelToken cancel, ChunkSink on_chunk,
              DoneCallback done) override;
  // The stored result of a command_id that already completed (with `replayed` set), nullopt
  // when there is none — what Invoke would return for it. Lets a door answer a repeat before
  // its own admission rules (drain, caps) would refuse it.
  Result<std::optional<InvokeResult>> StoredResult(const std::string& command_id) const override;

  // Exec on a sandbox (tool "exec", `args` as for it): streams through `on_chunk` and appends
  // the output to the sandbox's console log. Same rules as Invoke.
  void Exec(std::string sandbox_id, nlohmann::json args, std::optional<Lease> lease,
            std::string command_id, CancelToken cancel, ChunkSink on_chunk, DoneCallback done);

  // Sandboxes. Spawn and Destroy need a lease for the sandbox id, accepted before anything
  // is created or removed. Destroy waits up to ExecutorOptions::destroy_wait (BeginDestroy).
  Result<SandboxInfo> Spawn(const SpawnRequest& request, const Lease* lease) override;
  void Destroy(std::string_view sandbox_id, const Lease* lease, DestroyCallback done) override;
  Result<SandboxInfo> Status(std::string_view sandbox_id) const override;
  Result<std::vector<SandboxInfo>> List() const override;
  // A renewed lease from the control plane replaces the current one (LeaseTable::Renew).
  Result<Lease> RenewLease(const Lease& renewed) override;

  // Files of a sandbox ("" = the default workspace), on the caller's thread, for local use
  // and the executor's tests. Doors do not call these: they run the file tools (file.read,
  // file.write, …) through Invoke, admitted and scheduled like any command. A given lease is
  // accepted before a mutation; reads ignore it.
  edge::Status WriteFile(std::string_view sandbox_id, std::string_view path,
                         std::string_view content, std::string_view mode, const Lease* lease);
  Result<std::string> ReadFile(std::string_view sandbox_id, std::string_view path,
                               uint64_t offset = 0, std::optional<uint64_t> length = {}) const;
  Result<std::vector<FileInfo>> ListFiles(std::string_view sandbox_id, std::string_view path) const;
  Result<FileInfo> StatFile(std::string_view sandbox_id, std::string_view path) const;
  edge::Status DeleteFile(std::string_view sandbox_id, std::string_view path, bool recursive,
                          const Lease* lease);
  edge::Status MoveFile(std::string_view sandbox_id, std::string_view from, std::string_view to,
                        const Lease* lease);
  edge::Status ChmodFile(std::string_view sandbox_id, std::string_view path, std::string_view mode,
                         const Lease* lease);
  Result<std::vector<std::string>> Glob(std::string_view sandbox_id,
                                        std::string_view pattern) const;
  // The last `n` lines of the sandbox's console log.
  Result<std::vector<std::string>> Logs(std::string_view sandbox_id, size_t n) override;

  // Whether `command_id` is running now (through any door): a door ignores a duplicate
  // before its own checks, so that a refusal of the duplicate never races the real result.
  bool IsRunning(const std::string& command_id) const override;
  // Cancels the running `command_id` (SIGTERM to its group, SIGKILL after kill_grace; a file
  // tool stops at its next check); false when it is not running.
  bool Cancel(const std::string& command_id, const std::string& reason) override;

  // Refuses new invocations and spawns with DRAINING; what runs finishes. The executor's
  // drain state is the only one: doors ask draining().
  void Drain() override;
  bool draining() const override;
  void DrainSpawns() override;
  bool spawns_draining() const override;
  bool shutting_down() const;
  // Drain, let running work finish for `grace`, then cancel what is left (SIGTERM, SIGKILL
  // after kill_grace); `done` is called once nothing runs any more.
  void Shutdown(std::chrono::milliseconds grace, std::function<void()> done) override;

  // The periodic check the daemon drives with the injected clock: cancels running work whose
  // lease expired unrenewed, destroys sandboxes whose TTL ran out, and prunes the idempotency
  // window. Returns how many running commands it cancelled for expired leases.
  size_t Tick(Clock::WallTime now);
  // Gives back what the state database's connection caches (SqliteDb::ReleaseMemory): the
  // daemon calls it when the agent is idle. Returns the bytes freed.
  size_t ReleaseMemory();
  // What the next Tick has to watch, so that the host ticks only when there is work (issue
  // 14: an idle agent never wakes for a tick). `leased_work`: a running command holds a
  // lease (its expiry, which renewals move, is judged at each tick); `sandbox_expiry`: the
  // earliest expiry of a live sandbox with a TTL. Neither: nothing is due (the idempotency
  // window needs no prompt tick: Lookup ignores entries past their age, Record evicts by
  // count). Errors reading the registry count as "a sandbox may expire now".
  struct TickPlan {
    bool leased_work = false;
    std::optional<Clock::WallTime> sandbox_expiry;
  };
  TickPlan NextTick() const;
  // Called when work Tick watches is added — a command admitted with a lease, a sandbox
  // spawned — on the thread adding it, with no executor lock held; it must not block. Set
  // once, before the executor is used.
  void SetTickListener(std::function<void()> listener) { tick_listener_ = std::move(listener); }
  // The executor's timers (on the injected clock): its host schedules its tick here too, so
  // the tick needs no thread of its own.
  TimerQueue& timers() { return *timers_; }

  // Replaces the config tools and security contexts (a PushConfig, design.md §2: the edge
  // door applies config deltas). The next invocation uses the new rules; running ones keep
  // the ones they started with. Validated like Open (INVALID_ARGUMENT naming the field);
  // on error nothing changes. options() keeps reporting the tools given to Open.
  edge::Status Reconfigure(
      const std::map<std::string, ToolConfig>& tools,
      const std::map<std::string, SecurityContextConfig>& security_contexts) override;

  // AGENT_RESTARTED results made at Open for what the previous process left unfinished.
  std::vector<InvokeResult> TakeInterrupted(const std::string& door) override;
  edge::Status ConfirmInterrupted(const std::string& command_id) override;

  // Tool names (advertised by the edge stream).
  std::vector<std::string> Tools() const override;
  size_t running() const;
  // Session ids in the table now (started and not ended), sorted.
  std::vector<std::string> Sessions() const;
  // Invocations running that came with DoorLimit `door`.
  size_t running(const std::string& door) const override;
  // Results that could not be written to the idempotency store (each is logged); a repeat
  // of such a command_id would run again.
  uint64_t result_store_failures() const { return result_store_failures_.load(); }
  // True when no security context is configured and the implicit allow-all "default" is in
  // force (the daemon warns at start).
  bool implicit_default_context() const;
  // How commands are kept from outliving themselves (ProcessRunner::Isolation): a cgroup per
  // command, or "none: …" saying why not.
  std::string isolation() const;
  const ExecutorOptions& options() const { return options_; }

 private:
  struct Inflight;
  // The tool rules in force; replaced as a whole by Reconfigure (guarded by rules_mu_).
  struct Rules {
    ToolRegistry tools;
    SecurityContexts contexts;
  };
  Executor(boost::asio::io_context& io, Clock& clock, ExecutorOptions options,
           std::shared_ptr<const Rules> rules, std::shared_ptr<Provider> provider);

  Result<std::string> Workspace(std::string_view sandbox_id) const;
  Result<FileService> Files(std::string_view sandbox_id) const;
  edge::Status AcceptLease(const Lease* lease, std::string_view resource_id) const;
  // The file methods' one shape: the sandbox's files, the lease (when given) accepted for
  // LeaseResource(sandbox_id) before `fn` runs on them.
  template <typename Fn>
  auto OnFiles(std::string_view sandbox_id, const Lease* lease, Fn&& fn) const
      -> std::invoke_result_t<Fn, FileService&>;
  // Destroy without a lease check (explicit destroys check first; TTL expiry has none). From
  // the call on, the sandbox takes no new work (Workspace refuses it) and its running commands
  // are cancelled; its directory is removed and its record marked destroyed only once the
  // last of them has ended (Finish hands the waiters to FinishDestroy), so no process of it
  // outlives its workspace or writes into a sandbox spawned again under the same id. No
  // thread waits meanwhile. After `wait` on the clock with commands still running, `done`
  // gets UNAVAILABLE naming how many: the workspace is untouched and the sandbox still
  // refuses work until a destroy succeeds.
  void BeginDestroy(const std::string& sandbox_id, std::string_view why,
                    std::chrono::milliseconds wait, DestroyCallback done);
  // On the blocking pool: removes the sandbox (registry), releases its lease and answers
  // every waiter with the outcome.
  void FinishDestroy(const std::string& sandbox_id, std::vector<DestroyCallback> waiters);
  // ExecutorOptions::destroy_wait, or its default.
  std::chrono::milliseconds DestroyWait() const;
  // Commands in flight for `resource` (mu_ held).
  size_t RunningForLocked(std::string_view resource) const;
  // Posts `work` to the blocking pool, or runs it here once the destructor has begun.
  void PostBlocking(std::function<void()> work);
  // Shared: a command still writing keeps the log alive after a destroy drops it here.
  std::shared_ptr<LogBuffer> ConsoleLog(const std::string& sandbox_id);
  // Runs exec, a config tool, or (tool.interactive, job->session set) a session's process.
  void RunProcess(std::shared_ptr<Inflight> job, const ToolDefinition& tool,
                  const SecurityContext& ctx, const InvokeRequest& request,
                  const std::string& workspace, ChunkSink on_chunk);
  // session.input / session.signal on the session table (never blocks).
  InvokeResult RunSessionTool(const ToolDefinition& tool, const InvokeRequest& request);
  // `release_after` receives what the caller closes once the result is handed on: the file
  // a file_write replaced (FileService::Write), so freeing it never delays the answer.
  InvokeResult RunFileTool(const ToolDefinition& tool, const InvokeRequest& request,
                           const std::string& workspace, const SecurityContext& ctx,
                           const CancelToken& cancel, UniqueFd* release_after);
  void Finish(const std::shared_ptr<Inflight>& job, InvokeResult result);
  struct Admission;
  // An admitted command starts: its workspace and lease are checked, then it runs (a process,
  // or a session or file tool on the blocking-work pool).
  void Start(Admission admit);
  // At Open: every command the journal says was admitted and not finished gets its one
  // terminal result — its stored result when it got that far, else AGENT_RESTARTED naming
  // what is known of its process (`stale`: the groups killed just before).
  edge::Status RecoverInterrupted(const ProcessRunner::StaleReport& stale);

  boost::asio::io_context& io_;
  Clock& clock_;
  ExecutorOptions options_;
  static Result<std::shared_ptr<const Rules>> MakeRules(
      const std::map<std::string, ToolConfig>& tools,
      const std::map<std::string, SecurityContextConfig>& security_contexts);
  std::shared_ptr<const Rules> rules() const;
  mutable std::mutex rules_mu_;
  std::shared_ptr<const Rules> rules_;
  std::shared_ptr<Provider> provider_;
  // Shared: Finish removes a journal row after the door's callback, which may end the
  // executor's owner's wait and so the executor itself; the row's removal keeps both alive.
  std::shared_ptr<StateDb> db_;
  std::unique_ptr<LeaseTable> leases_;
  std::unique_ptr<IdempotencyStore> idempotency_;
  std::shared_ptr<CommandJournal> journal_;
  std::unique_ptr<SandboxRegistry> registry_;
  // The executor's timers (shutdown grace; the runner's deadlines and kill grace) on the
  // injected clock. Declared before runner_, stopped first by the destructor.
  std::unique_ptr<TimerQueue> timers_;
  std::unique_ptr<ProcessRunner> runner_;
  std::string default_workspace_;
  std::function<void()> tick_listener_;
  // The pool for blocking work (file tools, sysinfo, session input): started at its first
  // use, so an agent that never runs such a tool has no threads waiting for it.
  boost::asio::thread_pool& Blocking();
  // One thread, created at the first command with a command_id: waits for the sync of the
  // commands' journal rows (one for every row written meanwhile) and starts them in order.
  boost::asio::thread_pool& Admissions();
  boost::asio::thread_pool& AdmissionsLocked();  // blocking_mu_ held
  boost::asio::thread_pool& BlockingLocked();    // blocking_mu_ held
  // Runs `deliver` (the door's done callback and what follows it) once the database is synced
  // up to `mark`: on the admission thread, so the thread that ends commands never waits for
  // the disk and one sync serves every result recorded meanwhile; here, once the destructor
  // has begun. The caller has counted the delivery in pending_deliveries_ (under mu_); idle
  // waiters go only when nothing is in flight and nothing waits to be delivered.
  void DeliverAfterSync(uint64_t mark, const std::string& command_id,
                        std::function<void()> deliver);
  // After a command's result reached its door: its journal row goes.
  static void Delivered(CommandJournal& journal, const std::string& command_id,
                        std::optional<int64_t> admission);
  std::mutex blocking_mu_;
  bool closing_ = false;  // the destructor has begun (guarded by blocking_mu_)

  mutable std::mutex mu_;
  uint64_t next_job_ = 1;
  std::map<uint64_t, std::shared_ptr<Inflight>> inflight_;
  std::set<std::string> running_ids_;
  std::map<std::string, int> per_context_;
  std::map<std::string, size_t> per_door_;
  // The session table: session id → the session.start command running it.
  struct Session {
    uint64_t job_id = 0;
    std::string command_id;
    std::string agent_name;
    std::shared_ptr<ProcessControl> control;
  };
  std::map<std::string, Session> sessions_;
  bool draining_ = false;
  bool spawns_draining_ = false;
  bool shutting_down_ = false;
  std::vector<std::function<void()>> idle_waiters_;
  // Sandboxes a destroy was asked for and has not finished (BeginDestroy), and the destroys
  // waiting for their commands to end: id → (ticket, done). Finish hands them on when the
  // last command of the sandbox ends; a waiter's timer answers it UNAVAILABLE first.
  std::set<std::string, std::less<>> destroying_;
  std::map<std::string, std::map<uint64_t, DestroyCallback>, std::less<>> destroy_waiters_;
  std::map<std::string, int, std::less<>> destroy_finishing_;  // FinishDestroy posted, not done
  uint64_t next_destroy_ticket_ = 1;
  size_t pending_deliveries_ = 0;  // results waiting for their record's sync (DeliverAfterSync)
  // Nothing in flight and no answer waiting for its sync: what a Shutdown waits for (mu_ held).
  bool IdleLocked() const;
  std::map<std::string, std::vector<InvokeResult>> interrupted_;  // door → RecoverInterrupted
  // A confirming door's interrupted rows: command_id → admission, until ConfirmInterrupted.
  std::map<std::string, int64_t> interrupted_rows_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // timers check it before running
  std::atomic<uint64_t> result_store_failures_{0};
  // File tools and sysinfo run here, never on a door's thread (joined by the destructor);
  // made by Blocking() at its first use (guarded by blocking_mu_).
  std::unique_ptr<boost::asio::thread_pool> blocking_;
  std::unique_ptr<boost::asio::thread_pool> admissions_;  // joined first by the destructor
  std::mutex logs_mu_;
  std::map<std::string, std::shared_ptr<LogBuffer>> logs_;
};

}  // namespace edge::sandbox
