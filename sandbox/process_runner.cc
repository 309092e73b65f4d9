#include "sandbox/process_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "sandbox/process_control.h"
#include "sandbox/process_ledger.h"
#include "sandbox/run_as.h"

extern char** environ;

namespace edge::sandbox {
namespace {

namespace asio = boost::asio;
using Strand = asio::strand<asio::io_context::executor_type>;

std::string Errno(int err) {
  return std::strerror(err);
}

int PidfdOpen(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

// Field 22 of /proc/<pid>/stat (the start time in clock ticks after boot); 0 when the
// process is gone. One read into a stack buffer: it runs once per command (issue 14).
uint64_t ProcStartTime(pid_t pid) {
  char path[32];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return 0;
  const std::string_view text(buf, static_cast<size_t>(n));
  // The command (field 2) is in parentheses and may hold anything, ')' too: fields resume
  // after the last ')', at field 3 (state).
  size_t at = text.rfind(')');
  if (at == std::string_view::npos) return 0;
  at += 1;
  for (int field = 3; field <= 22; ++field) {
    at = text.find_first_not_of(' ', at);
    if (at == std::string_view::npos) return 0;
    const size_t end = std::min(text.find(' ', at), text.size());
    if (field == 22) {
      uint64_t v = 0;
      auto [p, ec] = std::from_chars(text.data() + at, text.data() + end, v);
      return ec == std::errc() && p == text.data() + end ? v : 0;
    }
    at = end;
  }
  return 0;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

Result<std::string> ResolveExecutable(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) {
    if (!IsExecutableFile(name)) {
      return MakeError(ErrorCode::kNotFound,
                       "argv[0] '" + name + "' is not an executable file: " + Errno(errno));
    }
    return name;
  }
  size_t start = 0;
  while (start <= path_var.size()) {
    size_t end = path_var.find(':', start);
    if (end == std::string::npos) end = path_var.size();
    std::string dir = path_var.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (IsExecutableFile(candidate)) return candidate;
    start = end + 1;
  }
  return MakeError(ErrorCode::kNotFound,
                   "command '" + name + "' not found in PATH '" + path_var + "'");
}

bool HasNul(const std::string& s) {
  return s.find('\0') != std::string::npos;
}

const char* StageName(int stage) {
  switch (stage) {
    case 1:
      return "setsid";
    case 2:
      return "prctl(PR_SET_PDEATHSIG)";
    case 3:
      return "joining the command's cgroup (writing cgroup.procs)";
    case 4:
      return "chdir to cwd";
    case 5:
      return "setrlimit(RLIMIT_NPROC)";
    case 6:
      return "setgroups";
    case 7:
      return "setgid";
    case 8:
      return "setuid";
    case 9:
      return "dup2 of stdio";
    case 10:
      return "execve";
    default:
      return "child setup";
  }
}

bool Exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

// Writes `value` to a cgroup control file; the error names the file, the value and errno.
Status WriteCgroupFile(const std::string& path, std::string_view value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return MakeError(ErrorCode::kInternal, "open " + path + " for writing: " + Errno(errno));
  }
  ssize_t n;
  do {
    n = ::write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return MakeError(ErrorCode::kInternal, "write '" + std::string(value) + "' to " + path + ": " +
                                               (n < 0 ? Errno(e) : "short write"));
  }
  return OkStatus();
}

std::vector<pid_t> CgroupPids(const std::string& dir) {
  std::vector<pid_t> out;
  std::ifstream in(dir + "/cgroup.procs");
  pid_t pid;
  while (in >> pid)
    out.push_back(pid);
  return out;
}

// One pass of killing everything in the cgroup `dir` (v1 or v2); the caller repeats until
// the cgroup can be removed. v2 with cgroup.kill: the kernel kills the whole cgroup at once,
// also processes forked meanwhile. v2 without it: freeze, SIGKILL each member, thaw (a frozen
// process cannot fork; SIGKILL still ends it). v1: SIGKILL each pid listed (a member that
// forks meanwhile is caught by the next pass).
Status KillCgroup(const std::string& dir) {
  if (Exists(dir + "/cgroup.kill")) return WriteCgroupFile(dir + "/cgroup.kill", "1");
  bool freeze = Exists(dir + "/cgroup.freeze");
  Status st = OkStatus();
  if (freeze) st = WriteCgroupFile(dir + "/cgroup.freeze", "1");
  for (pid_t pid : CgroupPids(dir))
    ::kill(pid, SIGKILL);
  if (freeze) {
    Status thaw = WriteCgroupFile(dir + "/cgroup.freeze", "0");
    if (st && !thaw) st = thaw;
  }
  return st;
}

// Kills and removes the cgroup `dir`, waiting up to ~1 s for its members to die (used
// where no io_context is at hand: the destructor and KillStaleGroups). True when it held
// processes.
bool KillAndRemoveCgroup(const std::string& dir) {
  bool had = !CgroupPids(dir).empty();
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (auto st = KillCgroup(dir); !st && Exists(dir)) {
      log::Get("sandbox")->warn("killing cgroup {}: {}", dir, st.error().message);
    }
    if (::rmdir(dir.c_str()) == 0 || errno != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return had;
}

enum class CgroupKind { kNone, kV1Pids, kV2 };

struct CgroupSetup {
  CgroupKind kind = CgroupKind::kNone;
  std::string base;   // <root>/edge-agent
  bool pids = false;  // command groups have pids.max
  std::string description;
};

// The instance tag in a command cgroup's name: 16 hex digits of the FNV-1a hash of the
// runner's state_dir. Agents (and test processes) that share a cgroup root but not a data
// directory each sweep only their own leftovers at start.
std::string CgroupInstanceTag(const std::string& state_dir) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : state_dir) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string tag(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4)
    tag[static_cast<size_t>(i)] = kHex[h & 0xf];
  return tag;
}

// The agent pid of a command cgroup's name that this instance (`tag`) may sweep: "<agent
// pid>-<seq>-<tag>", or the untagged "<agent pid>-<seq>" of releases before the tag. 0 for
// anything else, including another instance's groups.
long SweepableCgroupAgent(const std::string& name, const std::string& tag) {
  size_t dash = name.find('-');
  if (dash == 0 || dash == std::string::npos) return 0;
  size_t second = name.find('-', dash + 1);
  std::string numbers = name.substr(0, second);
  if (second != std::string::npos && name.substr(second + 1) != tag) return 0;
  if (dash + 1 == numbers.size() || numbers.find_first_not_of("0123456789-") != std::string::npos) {
    return 0;
  }
  return std::strtol(numbers.substr(0, dash).c_str(), nullptr, 10);
}

// The agent's own cgroup on the cgroup2 mount, or "" with `why` set.
std::string Cgroup2OwnDir(std::string* why) {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line, mount_point;
  while (std::getline(mounts, line)) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, dev, root;
    head >> id >> parent >> dev >> root >> mount_point;
    break;
  }
  if (mount_point.empty()) {
    *why = "cgroup v2: not mounted";
    return "";
  }
  std::ifstream self("/proc/self/cgroup");
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) == 0) {
      std::string path = line.substr(3);
      return path == "/" ? mount_point : mount_point + path;
    }
  }
  *why = "cgroup v2: mounted at " + mount_point + " but /proc/self/cgroup has no 0:: line";
  return "";
}

// Makes <root>/edge-agent (0755) and checks that command groups can be created and joined
// there; "" on success, else why not.
std::string PrepareBase(const std::string& root, const std::string& base) {
  if (::access((root + "/cgroup.procs").c_str(), W_OK) != 0) {
    return root + "/cgroup.procs is not writable (" + Errno(errno) + ")";
  }
  if (::mkdir(base.c_str(), 0755) != 0 && errno != EEXIST) {
    return "mkdir " + base + ": " + Errno(errno);
  }
  if (::access((base + "/cgroup.procs").c_str(), W_OK) != 0) {
    return base + "/cgroup.procs is not writable (" + Errno(errno) + ")";
  }
  return "";
}

CgroupSetup ProbeCgroups(const ProcessRunner::Options& o) {
  CgroupSetup s;
  std::string v1_why = "cgroup v1 pids: not configured";
  if (!o.pids_cgroup_root.empty()) {
    std::string base = o.pids_cgroup_root + "/edge-agent";
    std::string why = PrepareBase(o.pids_cgroup_root, base);
    if (why.empty()) {
      s.kind = CgroupKind::kV1Pids;
      s.base = base;
      s.pids = true;
      s.description = "cgroup v1 pids (" + base + ")";
      return s;
    }
    v1_why = "cgroup v1 pids: " + why;
  }
  std::string v2_why = "cgroup v2: not configured";
  std::string root = o.cgroup2_root == "auto" ? Cgroup2OwnDir(&v2_why) : o.cgroup2_root;
  if (!root.empty()) {
    std::string base = root + "/edge-agent";
    std::string why;
    if (!Exists(root + "/cgroup.controllers")) {
      why = root + " is not a cgroup v2 directory (no cgroup.controllers)";
    } else {
      why = PrepareBase(root, base);
    }
    if (why.empty()) {
      s.kind = CgroupKind::kV2;
      s.base = base;
      // The pids controller for the command groups, when the parent hands it down.
      std::ifstream controllers(base + "/cgroup.controllers");
      std::string c;
      while (controllers >> c) {
        if (c == "pids") {
          s.pids = WriteCgroupFile(base + "/cgroup.subtree_control", "+pids").has_value();
        }
      }
      s.description =
          "cgroup v2 (" + base + "; " +
          (Exists(base + "/cgroup.kill") ? "cgroup.kill" : "freeze + SIGKILL each member") + "; " +
          (s.pids ? "pids limit"
                  : "no pids controller: max_processes applies only through RLIMIT_NPROC for "
                    "run_as users") +
          ")";
      return s;
    }
    v2_why = "cgroup v2: " + why;
  }
  s.description = "none: " + v1_why + "; " + v2_why +
                  " — processes that leave the process group can outlive their command";
  return s;
}

// The command cgroup <base>/<agent pid>-<seq>-<instance tag>, its limit written, and an fd
// on its cgroup.procs for the child to join. Every failure names the file and errno.
Result<std::pair<std::string, int>> MakeCommandCgroup(const CgroupSetup& cg, uint64_t seq,
                                                      const std::string& tag, int max_processes) {
  std::string dir =
      cg.base + "/" + std::to_string(::getpid()) + "-" + std::to_string(seq) + "-" + tag;
  if (::mkdir(dir.c_str(), 0755) != 0) {
    return MakeError(ErrorCode::kInternal, "mkdir " + dir + ": " + Errno(errno));
  }
  if (cg.pids) {
    std::string value = max_processes > 0 ? std::to_string(max_processes) : "max";
    if (auto st = WriteCgroupFile(dir + "/pids.max", value); !st) {
      ::rmdir(dir.c_str());
      return MakeError(ErrorCode::kInternal, "max_processes " + std::to_string(max_processes) +
                                                 ": " + st.error().message);
    }
  }
  int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    ::rmdir(dir.c_str());
    return MakeError(ErrorCode::kInternal,
                     "open " + dir + "/cgroup.procs for writing: " + Errno(e));
  }
  return std::make_pair(dir, fd);
}

}  // namespace

// Bytes of one command's enlarged stdout pipe, taken from the runner's budget
// (Options::large_pipe_budget_bytes) and given back when the hold is reset or destroyed: when
// the command finishes (its pipes closed, before its result is reported) or when it is
// dropped. Owned by the command's Child; `used` is its runner's counter, which outlives every
// Child. (A grandchild that keeps the pipe's write end open keeps the kernel's charge past
// that; the budget counts what the runner asked for, not the kernel's accounting.)
class LargePipeHold {
 public:
  LargePipeHold() = default;
  LargePipeHold(std::atomic<uint64_t>* used, uint64_t bytes) : used_(used), bytes_(bytes) {}
  LargePipeHold(LargePipeHold&& o) noexcept
      : used_(std::exchange(o.used_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  LargePipeHold& operator=(LargePipeHold&& o) noexcept {
    if (this != &o) {
      Release();
      used_ = std::exchange(o.used_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  LargePipeHold(const LargePipeHold&) = delete;
  LargePipeHold& operator=(const LargePipeHold&) = delete;
  ~LargePipeHold() { Release(); }

 private:
  void Release() {
    if (used_ != nullptr) used_->fetch_sub(bytes_);
    used_ = nullptr;
    bytes_ = 0;
  }
  std::atomic<uint64_t>* used_ = nullptr;
  uint64_t bytes_ = 0;
};

// The largest stdout pipe a command gets (Linux's default fs.pipe-max-size, the most an
// unprivileged user may ask for), and the smallest window worth enlarging for.
constexpr uint64_t kLargePipeBytes = 1 << 20;
constexpr uint64_t kMinLargePipeWindow = 128 << 10;
// The most one read of a windowed stdout takes (Child::window_read): a quarter of the
// streaming window, a quarter of the large pipe.
constexpr size_t kWindowReadBytes = 256 << 10;

struct ProcessRunner::Impl : std::enable_shared_from_this<ProcessRunner::Impl> {
  struct Child;

  Impl(asio::io_context& io, Clock& clock, Options options, TimerQueue* shared_timers)
      : io(io),
        clock(clock),
        options(std::move(options)),
        own_timers(shared_timers ? nullptr : std::make_unique<TimerQueue>(clock)),
        timers(shared_timers ? *shared_timers : *own_timers) {}

  asio::io_context& io;
  Clock& clock;
  Options options;
  // The deadline and the kill grace run on the injected clock (design.md §9); the drain and
  // cgroup retries below wait for the kernel, not for a policy, and stay asio timers.
  std::unique_ptr<TimerQueue> own_timers;
  TimerQueue& timers;
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> large_pipe_bytes{0};    // of options.large_pipe_budget_bytes, in use
  std::atomic<bool> large_pipe_refused{false};  // logged once
  std::once_flag cgroup_once;
  CgroupSetup cgroups;
  // The live groups on disk (options.state_dir): null without a state_dir, or when the ledger
  // could not be opened, and then one file per group, as releases before it wrote.
  std::unique_ptr<ProcessLedger> ledger;

  mutable std::mutex mu;
  std::map<pid_t, std::shared_ptr<Child>> live;
  bool shutting_down = false;
  bool destroyed = false;
  std::vector<std::function<void()>> reaped_waiters;

  const CgroupSetup& Cgroups() {
    std::call_once(cgroup_once, [this] { cgroups = ProbeCgroups(options); });
    return cgroups;
  }

  void Spawn(ProcessSpec spec, CancelToken cancel, OutputSink sink, DoneCallback done);
  // Enlarges the pipe whose read end is `fd` for a command with an output window of
  // `window` bytes, when the window is worth it and the budget has room: the fewer wake-ups a
  // fast producer costs when its reader can take up to a window per read. Nothing (and no
  // error: the default pipe works, only slower) when it cannot.
  LargePipeHold EnlargeStdoutPipe(int fd, uint64_t window);
  // Drops the child; false when the runner was destroyed meanwhile.
  bool Forget(pid_t pid);
};

struct ProcessRunner::Impl::Child : std::enable_shared_from_this<Child> {
  Child(std::shared_ptr<Impl> impl, asio::io_context& io)
      : impl(std::move(impl)),
        strand(asio::make_strand(io)),
        pidfd(strand),
        out{asio::posix::stream_descriptor(strand), asio::posix::stream_descriptor(strand)},
        in(strand),
        drain(strand),
        linger(strand) {}

  std::shared_ptr<Impl> impl;
  Strand strand;
  pid_t pid = 0;
  asio::posix::stream_descriptor pidfd;
  std::array<asio::posix::stream_descriptor, 2> out;
  asio::posix::stream_descriptor in;
  asio::steady_timer drain;
  asio::steady_timer linger;  // ProcessSpec::output_linger, armed for the queue's front chunk
  TimerQueue::TimerId deadline_timer = 0, grace_timer = 0;
  std::string stdin_data;
  ProcessSpec spec;
  OutputSink sink;
  DoneCallback done;
  CancelRegistration cancel_reg;
  std::optional<size_t> ledger_slot;  // its record in impl->ledger
  std::string ledger_file;            // or its own record file (no ledger)
  std::string cgroup_dir;
  Clock::MonoTime started{};
  LargePipeHold large_pipe;  // the stdout pipe's share of the runner's budget

  std::atomic<bool> reaped{false};
  bool exited = false;
  bool terminating = false;
  bool finished = false;
  bool drain_expired = false;
  bool writing_stdin = false;  // an interactive command's stdin write is in flight
  std::array<bool, 2> eof{false, false};
  std::array<bool, 2> reading{false, false};  // a read of that stream is pending
  std::array<uint64_t, 2> waiting{0, 0};      // bytes of that stream in `queue`
  std::array<std::array<char, OutputChunk::kMaxChunkBytes>, 2> buf{};
  // With a window of at least kWindowReadBytes, stdout is read up to that much at a time
  // (made at its first read, freed with the child), each read no larger than the room left
  // in the chunk it will join: a fast producer's output reaches the sink in window-sized
  // chunks with an eighth of the reads (and their event-loop round trips) that 32 KiB reads
  // take. stderr, and commands without such a window, read into `buf`.
  std::unique_ptr<char[]> window_read;
  std::array<size_t, 2> asked{0, 0};  // the size of the pending (or last) read of a stream
  std::deque<OutputChunk> queue;
  bool in_flight = false;
  int in_flight_stream = 0;  // the stream of the chunk with the sink
  bool lingering = false;    // the linger timer runs for the front chunk
  bool linger_over = false;  // it fired: deliver the front chunk whatever its size
  uint64_t progress = 0;     // reads completed and acks taken, for the drain after exit
  uint64_t total = 0;
  ProcessResult result;

  bool LeaderExited() const {
    struct pollfd p {};
    p.fd = const_cast<asio::posix::stream_descriptor&>(pidfd).native_handle();
    p.events = POLLIN;
    return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
  }

  void Start() {
    auto self = shared_from_this();
    pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                     [self](const boost::system::error_code& ec) {
                       if (!ec) self->OnExit();
                     });
    ReadMore(0);
    ReadMore(1);
    if (spec.control) {
      // Interactive: stdin stays open; the handle's queue is written as it fills.
      std::weak_ptr<Child> weak = self;
      spec.control->Attach(pid, [weak] {
        if (auto c = weak.lock()) asio::post(c->strand, [c] { c->PumpStdin(); });
      });
    } else if (in.is_open()) {
      asio::async_write(in, asio::buffer(stdin_data),
                        [self](const boost::system::error_code&, size_t) {
                          boost::system::error_code ignored;
                          self->in.close(ignored);
                          self->stdin_data.clear();
                        });
    }
    if (spec.timeout.count() > 0) {
      deadline_timer = OnStrandAfter(spec.timeout, [](Child& c) {
        if (c.exited || c.LeaderExited()) return;
        c.result.timed_out = true;
        c.Terminate();
      });
    }
  }

  // Writes what the interactive command's handle has queued, one write in flight; the
  // pipe's refusal (the process closed its stdin) ends writing for good.
  void PumpStdin() {
    if (writing_stdin || finished || !in.is_open() || !spec.control) return;
    auto data = std::make_shared<std::string>(spec.control->TakeForWrite());
    if (data->empty()) return;
    writing_stdin = true;
    auto self = shared_from_this();
    asio::async_write(
        in, asio::buffer(*data), [self, data](const boost::system::error_code& ec, size_t) {
          self->writing_stdin = false;
          if (ec) {
            self->spec.control->StdinFailed("the process closed its stdin (" + ec.message() + ")");
            boost::system::error_code ignored;
            self->in.close(ignored);
            return;
          }
          self->spec.control->Written(data->size());
          self->PumpStdin();
        });
  }

  // `fn` on the child's strand once `after` has passed on the injected clock; nothing when
  // the child is gone by then.
  TimerQueue::TimerId OnStrandAfter(std::chrono::milliseconds after,
                                    std::function<void(Child&)> fn) {
    std::weak_ptr<Child> weak = shared_from_this();
    return impl->timers.After(after, [weak, fn = std::move(fn)] {
      if (auto self = weak.lock()) asio::post(self->strand, [self, fn] { fn(*self); });
    });
  }

  void OnCancel(const std::string& reason) {
    if (exited || finished || LeaderExited()) return;
    if (!result.cancelled && !result.timed_out) {
      result.cancelled = true;
      result.cancel_reason = reason;
    }
    Terminate();
  }

  void Terminate() {
    if (exited || terminating || reaped.load()) return;
    terminating = true;
    if (spec.kill_grace.count() <= 0) {
      ::kill(-pid, SIGKILL);
      return;
    }
    ::kill(-pid, SIGTERM);
    ArmKill(spec.kill_grace);
  }

  // SIGKILL to the group `after` from now (replacing an earlier arming).
  void ArmKill(std::chrono::milliseconds after) {
    impl->timers.Cancel(grace_timer);
    grace_timer = OnStrandAfter(after, [](Child& c) {
      if (c.exited || c.reaped.load()) return;
      ::kill(-c.pid, SIGKILL);
    });
  }

  // Starts a read of stream `s` unless one is pending or what waits for the sink is at its
  // bound (spec.output_window_bytes; stop-and-wait when 0: nothing of `s` queued or with the
  // sink). `draining` reads past the output cap regardless, so the child never blocks on us.
  void ReadMore(int s, bool draining = false) {
    if (eof[s] || reading[s] || !out[s].is_open()) return;
    if (!draining) {
      const uint64_t window = spec.output_window_bytes;
      const bool held = waiting[s] > 0 || (in_flight && in_flight_stream == s);
      if (window == 0 ? held : waiting[s] >= window) return;
    }
    reading[s] = true;
    char* into = ReadInto(s);
    asked[s] = buf[s].size();
    if (WindowedRead(s)) {
      asked[s] = kWindowReadBytes;
      // No more than the window has left (at most N bytes wait, as before) and than the chunk
      // it will join has room for. A read past the output cap (draining) is dropped: full size.
      if (!draining) {
        asked[s] = std::min<uint64_t>(asked[s], spec.output_window_bytes - waiting[s]);
        if (!queue.empty() && queue.back().stream == OutputStream::kStdout &&
            queue.back().data.size() < spec.output_window_bytes) {
          asked[s] = std::min(asked[s], spec.output_window_bytes - queue.back().data.size());
        }
      }
    }
    auto self = shared_from_this();
    out[s].async_read_some(
        asio::buffer(into, asked[s]),
        [self, s](const boost::system::error_code& ec, size_t n) { self->OnRead(s, ec, n); });
  }

  // Whether reads of stream `s` go to window_read (see there) rather than `buf`.
  bool WindowedRead(int s) const { return s == 0 && spec.output_window_bytes >= kWindowReadBytes; }
  // Where reads of stream `s` land.
  char* ReadInto(int s) {
    if (!WindowedRead(s)) return buf[s].data();
    if (!window_read) window_read = std::make_unique_for_overwrite<char[]>(kWindowReadBytes);
    return window_read.get();
  }

  void OnRead(int s, const boost::system::error_code& ec, size_t n) {
    reading[s] = false;
    ++progress;
    if (finished) return;
    if (ec) {
      eof[s] = true;
      Deliver();  // a chunk lingering for more of this stream waits no longer
      MaybeFinish();
      return;
    }
    uint64_t room = spec.max_output_bytes > total ? spec.max_output_bytes - total : 0;
    size_t take = static_cast<size_t>(std::min<uint64_t>(n, room));
    if (take < n) {
      result.output_truncated = true;
      if (spec.on_output_cap == OutputCapPolicy::kStop) Terminate();
    }
    if (take == 0) {
      ReadMore(s, true);  // past the cap: keep draining so the child never blocks on us
      return;
    }
    total += take;
    (s == 0 ? result.stdout_bytes : result.stderr_bytes) += take;
    const OutputStream stream = s == 0 ? OutputStream::kStdout : OutputStream::kStderr;
    // With a window, a read joins the queue's last chunk of the same stream while that stays
    // within the window: fewer, bigger chunks for a consumer that is behind.
    if (spec.output_window_bytes > 0 && !queue.empty() && queue.back().stream == stream &&
        queue.back().data.size() + take <= spec.output_window_bytes) {
      queue.back().data.append(ReadInto(s), take);
    } else {
      queue.push_back(OutputChunk{stream, {}});
      // A full read from a lingering producer will be joined up to the window: room for that
      // now, instead of a copy at every doubling. Only for a chunk that can linger (alone in
      // the queue: one that waits behind another goes as soon as the sink is free), and no
      // more than the output cap leaves.
      if (spec.output_linger.count() > 0 && n == asked[s] && queue.size() == 1) {
        const uint64_t left = spec.max_output_bytes - total;  // total <= max: take fitted
        queue.back().data.reserve(
            static_cast<size_t>(std::min<uint64_t>(spec.output_window_bytes, take + left)));
      }
      queue.back().data.append(ReadInto(s), take);
    }
    waiting[s] += take;
    Deliver();
    ReadMore(s);
  }

  // True while the front chunk should wait for more output (ProcessSpec::output_linger):
  // the next read would still fit into it (it is smaller than the window and nothing else is
  // queued behind it: a read that does not fit starts the next chunk), its stream
  // is still open (after an exit what is left in the pipe is read at once, and its end ends
  // the wait), and its linger has not run out. Arms the timer.
  bool Linger() {
    const auto& front = queue.front();
    const int s = front.stream == OutputStream::kStdout ? 0 : 1;
    const bool small = front.data.size() < spec.output_window_bytes;
    if (spec.output_linger.count() <= 0 || !small || queue.size() > 1 || eof[s] || linger_over) {
      return false;
    }
    if (!lingering) {
      lingering = true;
      auto self = shared_from_this();
      linger.expires_after(spec.output_linger);
      linger.async_wait([self](const boost::system::error_code& ec) {
        if (ec || !self->lingering) return;
        self->lingering = false;
        self->linger_over = true;
        self->Deliver();
      });
    }
    return true;
  }

  void Deliver() {
    if (in_flight || queue.empty() || finished) return;
    if (Linger()) return;
    if (lingering) {
      lingering = false;
      linger.cancel();
    }
    linger_over = false;
    OutputChunk chunk = std::move(queue.front());
    queue.pop_front();
    in_flight = true;
    int s = chunk.stream == OutputStream::kStdout ? 0 : 1;
    in_flight_stream = s;
    waiting[s] -= chunk.data.size();
    auto self = shared_from_this();
    auto once = std::make_shared<std::atomic<bool>>(false);
    auto ack = [self, once] {
      if (once->exchange(true)) return;
      asio::post(self->strand, [self] { self->OnAck(); });
    };
    if (!sink) {
      ack();
      return;
    }
    sink(std::move(chunk), std::move(ack));
  }

  void OnAck() {
    in_flight = false;
    ++progress;
    if (finished) return;
    ReadMore(0);
    ReadMore(1);
    Deliver();
    MaybeFinish();
  }

  void OnExit() {
    if (reaped.exchange(true)) return;  // the runner's destructor reaped it
    // Before the reap: no signal through the handle can reach a reused group id.
    if (spec.control) spec.control->Ended("its process ended");
    // The leader is a zombie, so its pid (= the group id) cannot be reused yet: kill what is
    // left of its group, then reap it.
    ::kill(-pid, SIGKILL);
    int status = 0;
    struct rusage ru {};
    pid_t r;
    do {
      r = ::wait4(pid, &status, 0, &ru);
    } while (r < 0 && errno == EINTR);
    exited = true;
    result.wall_time =
        std::chrono::duration_cast<std::chrono::milliseconds>(impl->clock.Monotonic() - started);
    if (r == pid) {
      if (WIFEXITED(status)) {
        result.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        result.signal = WTERMSIG(status);
      }
      result.peak_rss_kb = ru.ru_maxrss;
    }
    // Nothing left in the cgroup (the usual case) lets it go at once: the kill pass and the
    // removal after the drain are only for what escaped the process group (issue 14: two
    // kill passes per command, each probing files and reading cgroup.procs, were 4 % of the
    // agent's CPU at 600 commands a second).
    if (!cgroup_dir.empty()) {
      if (::rmdir(cgroup_dir.c_str()) == 0) {
        cgroup_dir.clear();
      } else {
        KillCgroupLogged();
      }
    }
    ForgetRecord();
    boost::system::error_code ignored;
    impl->timers.Cancel(deadline_timer);
    impl->timers.Cancel(grace_timer);
    pidfd.close(ignored);
    ArmDrain();
    MaybeFinish();
  }

  // Pipes still open after the leader exit are held by processes that left the group;
  // give them a moment, then stop reading: once 500 ms pass with nothing moving — no chunk
  // with the consumer or queued for it, and no read or ack since the last look. (The last
  // condition matters: right after an ack, the read of what is still in the pipe can be
  // queued on the strand behind this handler, and ending then would drop that output.)
  void ArmDrain() {
    auto self = shared_from_this();
    const uint64_t seen = progress;
    drain.expires_after(std::chrono::milliseconds(500));
    drain.async_wait([self, seen](const boost::system::error_code& ec) {
      if (ec || self->finished) return;
      if (self->in_flight || !self->queue.empty() || self->progress != seen) {
        self->ArmDrain();
        return;
      }
      self->drain_expired = true;
      self->MaybeFinish();
    });
  }

  void MaybeFinish() {
    if (finished || !exited) return;
    bool drained = eof[0] && eof[1] && !in_flight && queue.empty();
    if (!drained && !drain_expired) return;
    finished = true;
    boost::system::error_code ignored;
    drain.cancel();
    lingering = false;
    linger.cancel();
    for (auto& d : out)
      d.close(ignored);
    large_pipe = {};  // the pipe is ours no more: its share goes back before the result
    in.close(ignored);
    queue.clear();
    cancel_reg.Reset();
    ReleaseCgroupThenReport(0);
  }

  // Records the group of `leader`, its cgroup and the command's `label` on disk for
  // KillStaleGroups: in the runner's ledger, or in a file of its own when there is none or
  // the record does not fit a slot. Line 1: "pgid start-time cgroup-dir" (the dir may be
  // empty); line 2: the label.
  void Record(pid_t leader, std::string label) {
    std::erase(label, '\n');
    std::erase(label, '\0');
    const std::string record = std::to_string(leader) + " " +
                               std::to_string(ProcStartTime(leader)) + " " + cgroup_dir + "\n" +
                               label + "\n";
    if (impl->ledger) {
      auto slot = impl->ledger->Add(record);
      if (slot) {
        ledger_slot = *slot;
        return;
      }
      log::Get("sandbox")->warn("command pid {}: {}; recorded in a file of its own", leader,
                                slot.error().message);
    }
    ledger_file = impl->options.state_dir + "/pg-" + std::to_string(leader);
    std::ofstream(ledger_file, std::ios::trunc) << record;
  }
  void ForgetRecord() {
    if (ledger_slot) impl->ledger->Remove(*std::exchange(ledger_slot, std::nullopt));
    if (!ledger_file.empty()) ::unlink(std::exchange(ledger_file, {}).c_str());
  }

  void KillCgroupLogged() {
    if (auto st = KillCgroup(cgroup_dir); !st) {
      log::Get("sandbox")->warn("command pid {}: killing what is left in its cgroup: {}", pid,
                                st.error().message);
    }
  }

  // Processes left in the command's cgroup (also those that left its process group) are
  // killed; the cgroup can be removed only once they are gone (SIGKILL is not instant), so
  // the result is reported after that, so nothing of the command outlives its result.
  // Bounded: after ~1 s the leftover is logged, left to KillStaleGroups, and the result
  // reported anyway.
  void ReleaseCgroupThenReport(int attempt) {
    constexpr int kMaxAttempts = 200;
    constexpr auto kRetry = std::chrono::milliseconds(5);
    if (!cgroup_dir.empty()) {
      KillCgroupLogged();
      if (::rmdir(cgroup_dir.c_str()) != 0 && errno == EBUSY) {
        if (attempt >= kMaxAttempts) {
          log::Get("sandbox")->warn("command pid {}: cgroup {} still busy after {} attempts", pid,
                                    cgroup_dir, attempt);
          cgroup_dir.clear();
          return ReleaseCgroupThenReport(attempt);
        }
        auto self = shared_from_this();
        drain.expires_after(kRetry);
        drain.async_wait([self, attempt](const boost::system::error_code& ec) {
          self->ReleaseCgroupThenReport(ec ? kMaxAttempts : attempt + 1);
        });
        return;
      }
    }
    auto cb = std::move(done);
    ProcessResult r = result;
    // After the runner is destroyed its owner may be gone too: no callback then.
    if (impl->Forget(pid) && cb) cb(std::move(r));
  }
};

bool ProcessRunner::Impl::Forget(pid_t pid) {
  std::vector<std::function<void()>> waiters;
  {
    std::lock_guard lock(mu);
    if (destroyed) return false;
    live.erase(pid);
    if (shutting_down && live.empty()) waiters.swap(reaped_waiters);
  }
  for (auto& w : waiters)
    w();
  return true;
}

namespace {

// What a validated spec starts: the resolved program, its environment and its user.
struct LaunchPlan {
  std::string exe;
  std::vector<std::string> env;  // "NAME=value"
  std::optional<RunAs> run_as;
};

// Checks the spec and resolves program, environment (explicit map over allow-listed
// variables, PATH defaulted) and user; errors name the field.
Result<LaunchPlan> PlanLaunch(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "argv: must not be empty");
  }
  for (const auto& a : spec.argv) {
    if (HasNul(a)) return MakeError(ErrorCode::kInvalidArgument, "argv: contains a NUL byte");
  }
  if (spec.cwd.empty() || spec.cwd[0] != '/') {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cwd '" + spec.cwd + "': must be an absolute path");
  }
  struct stat st {};
  if (::stat(spec.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return MakeError(ErrorCode::kNotFound, "cwd '" + spec.cwd + "': not an existing directory");
  }
  if (spec.max_processes < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "max_processes " + std::to_string(spec.max_processes) + ": must be >= 0");
  }
  std::map<std::string, std::string> env;
  for (const auto& name : spec.env_allow) {
    if (const char* v = ::getenv(name.c_str())) env[name] = v;
  }
  for (const auto& [k, v] : spec.env) {
    if (k.empty() || k.find('=') != std::string::npos || HasNul(k) || HasNul(v)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "env name '" + k + "': must be non-empty without '=' or NUL");
    }
    env[k] = v;
  }
  if (!env.contains("PATH")) env["PATH"] = ProcessSpec::kDefaultPath;
  LaunchPlan plan;
  auto exe = ResolveExecutable(spec.argv[0], env["PATH"]);
  if (!exe) return std::unexpected(exe.error());
  plan.exe = std::move(*exe);
  auto run_as = ResolveRunAs(spec.run_as);
  if (!run_as) return std::unexpected(run_as.error());
  plan.run_as = std::move(*run_as);
  for (const auto& [k, v] : env)
    plan.env.push_back(k + "=" + v);
  return plan;
}

// The child's descriptors, all close-on-exec in the parent (the child dup2s what it needs):
// stdout, stderr, stdin (a pipe when there is stdin data, else /dev/null) and the status pipe
// through which the child reports a failure before execve. Closes what it still holds.
struct ChildPipes {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int in[2] = {-1, -1};
  int status[2] = {-1, -1};

  ChildPipes() = default;
  ChildPipes(const ChildPipes&) = delete;
  ChildPipes& operator=(const ChildPipes&) = delete;
  ~ChildPipes() {
    for (int* p : {out, err, in, status}) {
      Close(p[0]);
      Close(p[1]);
    }
  }
  static void Close(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  Status Open(bool with_stdin) {
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
        ::pipe2(status, O_CLOEXEC) != 0) {
      return MakeError(ErrorCode::kInternal, "pipe2: " + Errno(errno));
    }
    if (with_stdin) {
      if (::pipe2(in, O_CLOEXEC) != 0)
        return MakeError(ErrorCode::kInternal, "pipe2: " + Errno(errno));
    } else {
      in[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (in[0] < 0) return MakeError(ErrorCode::kInternal, "open /dev/null: " + Errno(errno));
    }
    return OkStatus();
  }
  // The parent's side after the clone: the child's ends closed.
  void CloseChildEnds() {
    Close(status[1]);
    Close(out[1]);
    Close(err[1]);
    Close(in[0]);
  }
};

// Everything the child needs, prepared before the clone. The child shares the agent's memory
// until execve (CLONE_VM | CLONE_VFORK, see SpawnChild), so it only reads this, writes only
// its own stack, and makes only async-signal-safe calls.
struct ChildSetup {
  const char* exe = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  pid_t parent = 0;
  int cgroup_fd = -1;
  const RunAs* user = nullptr;
  size_t ngroups = 0;  // user->groups, read in the parent
  const gid_t* groups = nullptr;
  bool set_nproc = false;
  rlim_t nproc = 0;
  const ChildPipes* pipes = nullptr;
};

// The child runs on a stack of its own in the agent's address space and never returns, so
// AddressSanitizer's bookkeeping (fake stack frames on the agent thread's lists) stays out.
#define EDGE_CHILD_CODE __attribute__((no_sanitize("address")))

// Reports {stage, errno} on the status pipe and exits (StageName says the stages).
[[noreturn]] EDGE_CHILD_CODE void ChildFailed(int status_fd, int stage) {
  int report[2] = {stage, errno};
  ssize_t w = ::write(status_fd, report, sizeof(report));
  (void)w;
  ::_exit(127);
}

// The child between clone and execve. Credentials change through raw syscalls: glibc's
// setuid/setgid/setgroups would broadcast the change to every thread it knows of, which with a
// shared address space are the agent's threads, not the child's.
[[noreturn]] EDGE_CHILD_CODE void ExecChild(const ChildSetup& c) {
  int status_fd = c.pipes->status[1];
  if (::setsid() < 0) ChildFailed(status_fd, 1);
  // "0" is the writing process itself, in cgroup v1 and v2 alike.
  if (c.cgroup_fd >= 0 && ::write(c.cgroup_fd, "0", 1) != 1) ChildFailed(status_fd, 3);
  if (::chdir(c.cwd) != 0) ChildFailed(status_fd, 4);
  if (c.set_nproc) {
    struct rlimit rl {
      c.nproc, c.nproc
    };
    if (::setrlimit(RLIMIT_NPROC, &rl) != 0) ChildFailed(status_fd, 5);
  }
  if (c.user != nullptr) {
    if (::syscall(SYS_setgroups, c.ngroups, c.groups) != 0) ChildFailed(status_fd, 6);
    if (::syscall(SYS_setgid, c.user->gid) != 0) ChildFailed(status_fd, 7);
    if (::syscall(SYS_setuid, c.user->uid) != 0) ChildFailed(status_fd, 8);
  }
  // After the credential change, which clears a parent-death signal set before it.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ChildFailed(status_fd, 2);
  if (::getppid() != c.parent) ::_exit(127);  // the agent is already gone
  if (::dup2(c.pipes->in[0], 0) < 0 || ::dup2(c.pipes->out[1], 1) < 0 ||
      ::dup2(c.pipes->err[1], 2) < 0) {
    ChildFailed(status_fd, 9);
  }
  if (status_fd != 3) {
    if (::dup3(status_fd, 3, O_CLOEXEC) < 0) ChildFailed(status_fd, 9);
    status_fd = 3;
  }
  ::syscall(SYS_close_range, 4u, ~0u, 0u);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(c.exe, c.argv, c.envp);
  ChildFailed(status_fd, 10);
}

EDGE_CHILD_CODE int ChildMain(void* setup) {
  ExecChild(*static_cast<const ChildSetup*>(setup));
}

// Starts the child the way posix_spawn does: clone(CLONE_VM | CLONE_VFORK) on a stack of its
// own, so the agent's page tables are not copied for a child that execs at once. fork's copy,
// its teardown at exec and the copy-on-write faults between were over half of the CPU the
// agent's io thread spent per command under load (perf; docs/performance.md, stop 29). The
// calling thread waits until the child has exec'd or exited. Every signal but SIGCHLD is
// blocked across the clone so none of the agent's handlers runs in the child before it resets
// them. SIGCHLD stays open while it has no handler (the agent observes exits through pidfds):
// a quick child can exit before this thread unblocks, and a SIGCHLD its parent thread blocks
// is not dropped but offered to another thread (at first the main thread), which wakes: a
// blocking call there can fail with EINTR (the agent's own clients wait in epoll, which asio
// restarts).
//
// A child that changes user is forked instead: the kernel marks the memory image of a task
// whose credentials change non-dumpable, and with CLONE_VM that image is the agent's own (no
// core dumps, /proc/<agent> root-owned, no ptrace without CAP_SYS_PTRACE).
// Returns the pid, or -1 with errno.
pid_t SpawnChild(ChildSetup& setup) {
  if (setup.user != nullptr) {
    pid_t pid = ::fork();
    if (pid == 0) ExecChild(setup);
    return pid;
  }
  constexpr size_t kStack = 256 * 1024;
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  sigset_t all, old;
  sigfillset(&all);
  struct sigaction chld {};
  if (::sigaction(SIGCHLD, nullptr, &chld) == 0 &&
      (chld.sa_handler == SIG_DFL || chld.sa_handler == SIG_IGN) &&
      (chld.sa_flags & SA_SIGINFO) == 0) {
    sigdelset(&all, SIGCHLD);
  }
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = ::clone(ChildMain, static_cast<char*>(stack) + kStack,
                      CLONE_VM | CLONE_VFORK | SIGCHLD, &setup);
  int e = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::munmap(stack, kStack);
  errno = e;
  return pid;
}

// The error for a child that reported `report` = {stage, errno} before execve.
Error ChildStartError(const int report[2], const std::string& program,
                      const std::string& cgroup_dir) {
  ErrorCode code = ErrorCode::kInternal;
  if (report[0] == 10 && (report[1] == ENOENT)) code = ErrorCode::kNotFound;
  if (report[1] == EACCES || report[1] == EPERM) code = ErrorCode::kPermissionDenied;
  if (report[1] == EAGAIN) code = ErrorCode::kResourceExhausted;
  std::string stage = StageName(report[0]);
  if (report[0] == 3) stage += " of " + cgroup_dir;
  return Error{code, "starting '" + program + "': " + stage + " failed: " + Errno(report[1])};
}

}  // namespace

LargePipeHold ProcessRunner::Impl::EnlargeStdoutPipe(int fd, uint64_t window) {
  if (window < kMinLargePipeWindow) return {};
  // The kernel rounds a pipe's size up to a power of two pages; the budget counts that.
  const uint64_t want = std::bit_ceil(std::min(window, kLargePipeBytes));
  uint64_t used = large_pipe_bytes.load();
  do {
    if (used + want > options.large_pipe_budget_bytes) return {};
  } while (!large_pipe_bytes.compare_exchange_weak(used, used + want));
  LargePipeHold hold(&large_pipe_bytes, want);
  if (::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(want)) < 0) {
    if (!large_pipe_refused.exchange(true)) {
      log::Get("sandbox")->info(
          "commands' stdout pipes stay at the kernel's default size: F_SETPIPE_SZ {} bytes: "
          "{} (fs.pipe-max-size, fs.pipe-user-pages-soft); output is streamed, with more "
          "wake-ups",
          want, Errno(errno));
    }
    return {};
  }
  return hold;
}

void ProcessRunner::Impl::Spawn(ProcessSpec spec, CancelToken cancel, OutputSink sink,
                                DoneCallback done) {
  auto fail = [&](Error e) { done(std::unexpected(std::move(e))); };
  {
    std::lock_guard lock(mu);
    if (shutting_down || destroyed) {
      return fail(Error{ErrorCode::kDraining, "process runner is shutting down"});
    }
  }
  auto plan = PlanLaunch(spec);
  if (!plan) return fail(plan.error());
  std::vector<char*> envp, argv;
  for (auto& s : plan->env)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : spec.argv)
    argv.push_back(s.data());
  argv.push_back(nullptr);

  if (spec.control && spec.stdin_data) {
    return fail(Error{ErrorCode::kInvalidArgument,
                      "stdin_data and control: an interactive command's stdin is its handle's"});
  }
  ChildPipes pipes;
  if (auto st = pipes.Open(spec.stdin_data.has_value() || spec.control != nullptr); !st) {
    return fail(st.error());
  }
  // Not for an interactive command: it may run for hours and would hold its share all along.
  LargePipeHold large_pipe = spec.control != nullptr
                                 ? LargePipeHold()
                                 : EnlargeStdoutPipe(pipes.out[0], spec.output_window_bytes);

  std::string cgroup_dir;
  int cgroup_fd = -1;
  if (const CgroupSetup& cg = Cgroups(); cg.kind != CgroupKind::kNone) {
    auto made = MakeCommandCgroup(cg, seq.fetch_add(1), CgroupInstanceTag(options.state_dir),
                                  spec.max_processes);
    if (made) {
      cgroup_dir = std::move(made->first);
      cgroup_fd = made->second;
    } else if (spec.max_processes > 0 && cg.pids) {
      // The limit cannot be applied: the command does not start without it.
      return fail(made.error());
    } else {
      log::Get("sandbox")->warn("'{}' runs without its own cgroup: {}", spec.argv[0],
                                made.error().message);
    }
  }

  ChildSetup setup;
  setup.exe = plan->exe.c_str();
  setup.argv = argv.data();
  setup.envp = envp.data();
  setup.cwd = spec.cwd.c_str();
  setup.parent = ::getpid();
  setup.cgroup_fd = cgroup_fd;
  setup.user = plan->run_as.has_value() ? &*plan->run_as : nullptr;
  if (setup.user != nullptr) {
    setup.ngroups = setup.user->groups.size();
    setup.groups = setup.user->groups.data();
  }
  setup.set_nproc = spec.max_processes > 0 && setup.user != nullptr && setup.user->uid != 0;
  setup.nproc = static_cast<rlim_t>(spec.max_processes);
  setup.pipes = &pipes;

  pid_t pid = SpawnChild(setup);
  if (pid < 0) {
    int e = errno;
    if (cgroup_fd >= 0) ::close(cgroup_fd);
    if (!cgroup_dir.empty()) ::rmdir(cgroup_dir.c_str());
    // As ChildStartError words a child's own failures.
    const char* how = setup.user != nullptr ? "fork" : "clone";
    return fail(Error{ErrorCode::kResourceExhausted,
                      "starting '" + spec.argv[0] + "': " + how + " failed: " + Errno(e)});
  }

  // Parent: a report on the status pipe means the child failed before execve.
  pipes.CloseChildEnds();
  if (cgroup_fd >= 0) ::close(cgroup_fd);
  int report[2] = {0, 0};
  ssize_t got;
  do {
    got = ::read(pipes.status[0], report, sizeof(report));
  } while (got < 0 && errno == EINTR);
  if (got > 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!cgroup_dir.empty()) ::rmdir(cgroup_dir.c_str());
    return fail(ChildStartError(report, spec.argv[0], cgroup_dir));
  }
  ChildPipes::Close(pipes.status[0]);

  auto child = std::make_shared<Child>(shared_from_this(), io);
  child->pid = pid;
  child->started = clock.Monotonic();
  child->result.pid = pid;
  int pfd = PidfdOpen(pid);
  if (pfd < 0) {
    int e = errno;
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    if (!cgroup_dir.empty()) KillAndRemoveCgroup(cgroup_dir);
    return fail(Error{ErrorCode::kInternal, "pidfd_open: " + Errno(e)});
  }
  child->pidfd.assign(pfd);
  child->out[0].assign(std::exchange(pipes.out[0], -1));
  child->out[1].assign(std::exchange(pipes.err[0], -1));
  if (pipes.in[1] >= 0) {
    child->in.assign(std::exchange(pipes.in[1], -1));
    if (spec.stdin_data) child->stdin_data = std::move(*spec.stdin_data);
  }
  child->cgroup_dir = std::move(cgroup_dir);
  child->large_pipe = std::move(large_pipe);
  if (!options.state_dir.empty()) child->Record(pid, spec.label);
  child->spec = std::move(spec);
  child->sink = std::move(sink);
  child->done = std::move(done);
  {
    std::lock_guard lock(mu);
    live[pid] = child;
  }
  std::weak_ptr<Child> weak = child;
  child->cancel_reg = cancel.OnCancel([weak](const std::string& reason) {
    if (auto c = weak.lock()) asio::post(c->strand, [c, reason] { c->OnCancel(reason); });
  });
  asio::post(child->strand, [child] { child->Start(); });
}

ProcessRunner::ProcessRunner(asio::io_context& io, Clock& clock, Options options,
                             TimerQueue* timers)
    : impl_(std::make_shared<Impl>(io, clock, std::move(options), timers)) {
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    ::signal(SIGPIPE, SIG_IGN);
  }
  if (!impl_->options.state_dir.empty()) {
    ::mkdir(impl_->options.state_dir.c_str(), 0700);
    auto ledger = ProcessLedger::Open(impl_->options.state_dir);
    if (ledger) {
      impl_->ledger = std::move(*ledger);
    } else {
      log::Get("sandbox")->warn("{}; each command's group is recorded in a file of its own",
                                ledger.error().message);
    }
  }
}

ProcessRunner::~ProcessRunner() {
  if (impl_->own_timers) impl_->own_timers->Stop();  // no deadline or grace fires from here on
  std::map<pid_t, std::shared_ptr<Impl::Child>> live;
  {
    std::lock_guard lock(impl_->mu);
    impl_->destroyed = true;
    live.swap(impl_->live);
  }
  for (auto& [pid, child] : live) {
    if (child->reaped.exchange(true)) continue;
    if (child->spec.control) child->spec.control->Ended("the agent is stopping");
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    if (!child->cgroup_dir.empty()) KillAndRemoveCgroup(child->cgroup_dir);
    child->ForgetRecord();
  }
}

void ProcessRunner::Run(ProcessSpec spec, CancelToken cancel, OutputSink sink, DoneCallback done) {
  auto impl = impl_;
  asio::post(impl->io, [impl, spec = std::move(spec), cancel = std::move(cancel),
                        sink = std::move(sink), done = std::move(done)]() mutable {
    impl->Spawn(std::move(spec), std::move(cancel), std::move(sink), std::move(done));
  });
}

void ProcessRunner::Shutdown(std::chrono::milliseconds grace, std::function<void()> all_reaped) {
  std::vector<std::shared_ptr<Impl::Child>> children;
  bool none = false;
  {
    std::lock_guard lock(impl_->mu);
    impl_->shutting_down = true;
    for (auto& [pid, c] : impl_->live)
      children.push_back(c);
    none = impl_->live.empty();
    if (!none && all_reaped) impl_->reaped_waiters.push_back(std::move(all_reaped));
  }
  if (none) {
    if (all_reaped) asio::post(impl_->io, std::move(all_reaped));
    return;
  }
  for (auto& c : children) {
    asio::post(c->strand, [c, grace] {
      if (c->terminating && !c->exited) {
        c->ArmKill(grace);  // already stopping: SIGKILL within `grace` at the latest
        return;
      }
      c->spec.kill_grace = grace;
      c->OnCancel("agent shutdown");
    });
  }
}

size_t ProcessRunner::running() const {
  std::lock_guard lock(impl_->mu);
  return impl_->live.size();
}

std::string ProcessRunner::Isolation() const {
  return impl_->Cgroups().description;
}

std::string ProcessRunner::CgroupTag(const std::string& state_dir) {
  return CgroupInstanceTag(state_dir);
}

std::string ProcessRunner::ProbeIsolation(const Options& options) {
  return ProbeCgroups(options).description;
}

namespace {

// One record of a group an earlier runner left (see Child::Record): kills the group when its
// leader is gone or is still the one recorded (same start time), and its cgroup.
void KillStaleGroup(const std::string& record, ProcessRunner::StaleReport& report) {
  std::istringstream in(record);
  long pgid = 0;
  uint64_t start = 0;
  std::string cgroup, first_line;
  std::getline(in, first_line);
  std::istringstream fields(first_line);
  fields >> pgid >> start;
  std::getline(fields >> std::ws, cgroup);
  ProcessRunner::StaleGroup group{.pgid = pgid, .label = {}, .signalled = false};
  std::getline(in, group.label);
  bool& signalled = group.signalled;
  if (pgid > 1) {
    uint64_t now_start = ProcStartTime(static_cast<pid_t>(pgid));
    // The leader is gone (0) or is still ours (same start time): the group is ours.
    if (now_start == 0 || now_start == start) {
      signalled = ::kill(static_cast<pid_t>(-pgid), SIGKILL) == 0;
    }
  }
  // The cgroup also holds what left the process group (setsid).
  if (!cgroup.empty() && Exists(cgroup)) signalled = KillAndRemoveCgroup(cgroup) || signalled;
  if (signalled) ++report.signalled;
  report.groups.push_back(std::move(group));
}

}  // namespace

Result<ProcessRunner::StaleReport> ProcessRunner::KillStaleGroups(const Options& options) {
  StaleReport report;
  if (!options.state_dir.empty()) {
    DIR* dir = ::opendir(options.state_dir.c_str());
    if (dir == nullptr && errno != ENOENT) {
      return MakeError(ErrorCode::kInternal,
                       "state_dir '" + options.state_dir + "': opendir: " + Errno(errno));
    }
    // The ledger, and the files of one group each (no ledger, or written by an older release).
    // A ledger that cannot be read is logged and left for the next start: the cgroup sweep
    // below still finds what ran in a cgroup.
    if (auto st = ProcessLedger::Drain(
            options.state_dir, [&](const std::string& record) { KillStaleGroup(record, report); });
        !st) {
      log::Get("sandbox")->warn("stale process groups: {}", st.error().message);
    }
    std::vector<std::string> files;
    if (dir != nullptr) {
      while (struct dirent* e = ::readdir(dir)) {
        std::string name = e->d_name;
        if (name.rfind("pg-", 0) == 0) files.push_back(options.state_dir + "/" + name);
      }
      ::closedir(dir);
    }
    for (const auto& file : files) {
      std::ifstream in(file);
      std::stringstream record;
      record << in.rdbuf();
      KillStaleGroup(record.str(), report);
      ::unlink(file.c_str());
    }
  }
  // Command cgroups of this instance's agents that are gone (also without a ledger), and
  // untagged ones of older releases: <agent pid>-<n>[-<tag>].
  const std::string tag = CgroupInstanceTag(options.state_dir);
  std::vector<std::string> bases;
  if (!options.pids_cgroup_root.empty()) bases.push_back(options.pids_cgroup_root + "/edge-agent");
  if (!options.cgroup2_root.empty()) {
    std::string why;
    std::string root = options.cgroup2_root == "auto" ? Cgroup2OwnDir(&why) : options.cgroup2_root;
    if (!root.empty()) bases.push_back(root + "/edge-agent");
  }
  for (const auto& base : bases) {
    DIR* dir = ::opendir(base.c_str());
    if (dir == nullptr) continue;
    std::vector<std::string> stale;
    while (struct dirent* e = ::readdir(dir)) {
      std::string name = e->d_name;
      long agent = SweepableCgroupAgent(name, tag);
      if (agent <= 0 || agent == ::getpid()) continue;
      if (::kill(static_cast<pid_t>(agent), 0) == 0 || errno != ESRCH) continue;  // alive
      stale.push_back(base + "/" + name);
    }
    ::closedir(dir);
    for (const auto& cg : stale) {
      if (KillAndRemoveCgroup(cg)) ++report.signalled;
    }
  }
  return report;
}

}  // namespace edge::sandbox
