#include "tests/integration/harness.h"

#include "tests/support/processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace edge::testing {
namespace fs = std::filesystem;

std::string AgentBin() {
  return BinDir() + "/edge-agent";
}
std::string ControllerBin() {
  return BinDir() + "/edge-controller";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

namespace {

// The child makes only async-signal-safe calls between fork and exec: the test process has
// gRPC's threads (and the fixtures' own), and one that held a lock at the fork (the
// allocator's, under ASan for good) would hang a child that allocates. So the argument and
// environment arrays are made here, before the fork.
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            int in_fd, int out_fd, int err_fd) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string name(entry.substr(0, entry.find('=')));
    if (!env.contains(name)) env_strings.emplace_back(entry);
  }
  for (const auto& [k, v] : env)
    env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  if (in_fd >= 0) ::dup2(in_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(args[0], args.data(), envp.data());
  ::_exit(127);
}

std::optional<int> WaitPid(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The command cgroups named after `pid` that were made since `started` (CLOCK_REALTIME
// seconds; a second of slack for the kernel's coarse clock): older ones are another, earlier
// process's of the same pid, not ours to remove.
std::vector<fs::path> CommandCgroupsOf(pid_t pid, time_t started) {
  std::vector<fs::path> found;
  for (const auto& dir : CommandCgroupsNamedAfter(pid)) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0 && st.st_ctim.tv_sec + 1 >= started) found.push_back(dir);
  }
  return found;
}

// The command cgroups of the agents this test process started and saw end (an agent killed
// while commands ran leaves theirs; the hierarchy outlives the test, which must leave nothing
// there). They are removed, their members killed, only when the test binary exits: a test
// that kills an agent and starts it again checks that the agent itself cleans up after its
// predecessor.
class LeftCgroups {
 public:
  static LeftCgroups& Get() {
    static LeftCgroups left;
    return left;
  }
  void Add(std::vector<fs::path> dirs) {
    std::lock_guard lock(mu_);
    for (auto& d : dirs)
      dirs_.push_back(std::move(d));
  }
  ~LeftCgroups() {
    std::lock_guard lock(mu_);
    for (const auto& dir : dirs_) {
      for (int attempt = 0; attempt < 100; ++attempt) {
        std::ifstream procs(dir / "cgroup.procs");
        for (pid_t member; procs >> member;)
          ::kill(member, SIGKILL);
        if (::rmdir(dir.c_str()) == 0 || errno != EBUSY) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

 private:
  std::mutex mu_;
  std::vector<fs::path> dirs_;
};

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env,
                         std::chrono::milliseconds timeout, const std::string& stdin_data) {
  TempDir io;
  const std::string in_path = io / "in", out_path = io / "out", err_path = io / "err";
  WriteText(in_path, stdin_data);
  int in_fd = ::open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
  int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  pid_t pid = Spawn(argv, env, in_fd, out_fd, err_fd);
  ::close(in_fd);
  ::close(out_fd);
  ::close(err_fd);
  CommandResult r;
  auto status = WaitPid(pid, timeout);
  if (!status) {
    r.timed_out = true;
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
  } else if (WIFEXITED(*status)) {
    r.exit_code = WEXITSTATUS(*status);
  } else if (WIFSIGNALED(*status)) {
    r.signal = WTERMSIG(*status);
  }
  r.out = ReadText(out_path);
  r.err = ReadText(err_path);
  return r;
}

ChildProcess::ChildProcess(std::vector<std::string> argv, std::string log_dir,
                           std::map<std::string, std::string> env) {
  static int counter = 0;
  const std::string base = log_dir + "/" + fs::path(argv[0]).filename().string() + "." +
                           std::to_string(::getpid()) + "." + std::to_string(counter++);
  out_path_ = base + ".out";
  err_path_ = base + ".err";
  int out_fd = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int err_fd = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  started_ = ::time(nullptr);
  pid_ = Spawn(argv, env, null_fd, out_fd, err_fd);
  ::close(out_fd);
  ::close(err_fd);
  ::close(null_fd);
}

ChildProcess::~ChildProcess() {
  if (Running()) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
}

bool ChildProcess::Running() {
  if (status_ || pid_ <= 0) return false;
  siginfo_t info{};
  if (::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
  if (info.si_pid != pid_) return true;
  // Ended, not yet reaped: its pid is still its own, so the cgroups named after it are.
  LeftCgroups::Get().Add(CommandCgroupsOf(pid_, started_));
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
  return false;
}

void ChildProcess::Signal(int sig) {
  if (Running()) ::kill(pid_, sig);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!status_) return std::nullopt;
  if (WIFEXITED(*status_)) return WEXITSTATUS(*status_);
  return -WTERMSIG(*status_);
}

std::string ChildProcess::Stdout() const {
  return ReadText(out_path_);
}
std::string ChildProcess::Stderr() const {
  return ReadText(err_path_);
}

}  // namespace edge::testing
