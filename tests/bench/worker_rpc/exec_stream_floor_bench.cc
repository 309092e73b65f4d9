// exec_stream_floor_bench: the least any implementation of the worker door's NDJSON
// `exec_stream` can spend on a byte of command output, run end to end on this machine (issue
// 14, target 5: `exec_stream` at >= 2x ssh's throughput on the same command).
//
// The same command as worker_rpc_bench (`yes ... | head -c SIZE`, spawned through sh), and
// only the work the contract makes unavoidable, with none of the product's framework:
//   - one "door" thread reads the command's stdout pipe (1 MiB, as the executor's) straight
//     into a 1 MiB chunk, writes it as one NDJSON line (NdjsonChunkLine: the UTF-8 check and
//     the JSON escaping, wire.md's `{"id","worker_id","result":{"stream","data"}}`) in HTTP/1.1
//     chunked framing, and sends it on a loopback TCP connection (TCP_NODELAY) with one
//     writev; a last line and the end of the body when the command ends;
//   - one "client" thread reads that connection 1 MiB at a time and discards it (no HTTP
//     parsing: the least a client does).
// No executor, no event loop, no locks or hand-offs between threads. Each run is made in four
// ways, interleaved:
//   - as above ("floor");
//   - with the door thread also appending every chunk to a file that starts again every 16 MiB
//     (the sandbox console log's work, sandbox/log_buffer.h: the product's choice, not the
//     contract's), to show what that costs;
//   - pipelined: the door's reading and escaping on one thread and its sending on another, one
//     line handed over at a time (the product's window), so that reading the next chunk
//     overlaps sending the last, the most a door's structure can overlap of the same work;
//   - the pipe alone: the door thread reads the command's output and drops it, with no
//     escaping, no socket and no client: what the command delivers to the cheapest reader in
//     this process, the ceiling of any transport of it (`ssh_baseline.sh`'s `| cat` is the
//     same with a process).
//
// Per run: the throughput (MiB of command output a second, from the spawn to the client's
// last byte) and each part's CPU-seconds per GiB: the door (both threads when pipelined), the
// client thread, and the
// command itself (sh, yes and head: RUSAGE_CHILDREN). With `--ssh-mibs X` (ssh's rate on the
// same command, tests/bench/worker_rpc/ssh_baseline.sh) it prints the floor's ratio to ssh and
// the CPU per GiB that 2x ssh leaves on `--cores` cores beside what the floor spends. The CPU
// is the bound: above the budget, no implementation reaches 2x ssh here. The throughput is
// one door thread's, which reads, encodes and sends in turn; a door that overlaps them may go
// faster on the same CPU.
//
// Usage: exec_stream_floor_bench [--mib M] [--runs R] [--ssh-mibs X] [--cores C]
//                                [--json PATH]
// Prints figures; asserts nothing (design.md §8). The run fails (exit 1) when the client does
// not receive every byte the door sent, or the command fails.
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/worker_rpc/rpc_envelope.h"
#include "tests/bench/bench_os.h"
#include "tests/bench/bench_report.h"

extern char** environ;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr size_t kChunkBytes = 1 << 20;         // the door's streaming window
constexpr size_t kConsoleFileBytes = 16 << 20;  // LogBuffer's default max_file_bytes

// A failed system call (errno says why), or with `sys` false a wrong result.
[[noreturn]] void Die(const std::string& what, bool sys = true) {
  std::fprintf(stderr, "exec_stream_floor_bench: %s%s%s\n", what.c_str(), sys ? ": " : "",
               sys ? std::strerror(errno) : "");
  std::exit(1);
}

double ThreadCpuSeconds() {
  return edge::bench::CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
}
using edge::bench::ChildrenCpuSeconds;

void WriteAll(int fd, iovec* iov, int count) {
  while (count > 0) {
    ssize_t n = ::writev(fd, iov, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      Die("send");
    }
    while (count > 0 && static_cast<size_t>(n) >= iov->iov_len) {
      n -= static_cast<ssize_t>(iov->iov_len);
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + n;
      iov->iov_len -= static_cast<size_t>(n);
    }
  }
}

// Sends `body` as one chunk of a chunked HTTP body (its size line, the bytes, CRLF), then
// `after` (the end of the body, for the last one), in one writev; returns the bytes sent.
size_t SendChunk(int fd, std::string_view body, std::string_view after = {}) {
  char size[32];
  const int sn = std::snprintf(size, sizeof size, "%zx\r\n", body.size());
  const std::string end = "\r\n" + std::string(after);
  iovec iov[3] = {{size, static_cast<size_t>(sn)},
                  {const_cast<char*>(body.data()), body.size()},
                  {const_cast<char*>(end.data()), end.size()}};
  WriteAll(fd, iov, 3);
  return static_cast<size_t>(sn) + body.size() + end.size();
}

// The stream's last line, then the end of the body, and the door's end of the connection;
// returns the bytes sent.
size_t EndBody(int fd) {
  const size_t n = SendChunk(
      fd, "{\"id\":\"s\",\"result\":{\"done\":true,\"exit_code\":0},\"worker_id\":\"worker-1\"}\n",
      "0\r\n\r\n");
  ::shutdown(fd, SHUT_WR);
  return n;
}

struct RunFigures {
  double mibs = 0, door = 0, client = 0, command = 0;  // MiB/s; CPU-s per GiB of output
};

// How a run's door works (the four ways in the header).
enum class Door { kSerial, kSerialWithConsoleLog, kPipelined, kPipeAlone };

// The pipelined door's sending thread: takes one line at a time from Hand and sends it as a
// chunk; Finish sends the last line and the end of the body, then joins. Its CPU is the door's.
class LineSender {
 public:
  explicit LineSender(int fd) : fd_(fd), thread_([this] { Run(); }) {}
  // Waits until the line before has been taken, then hands `line` over.
  void Hand(std::string line) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !slot_; });
    slot_ = std::move(line);
    cv_.notify_all();
  }
  // Returns the bytes sent and the thread's CPU-seconds.
  std::pair<size_t, double> Finish() {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !slot_; });
      done_ = true;
      cv_.notify_all();
    }
    thread_.join();
    return {sent_, cpu_};
  }

 private:
  void Run() {
    const double t0 = ThreadCpuSeconds();
    for (;;) {
      std::string line;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return slot_ || done_; });
        if (!slot_) break;
        line = std::move(*slot_);
        slot_.reset();
        cv_.notify_all();
      }
      sent_ += SendChunk(fd_, line);
    }
    sent_ += EndBody(fd_);
    cpu_ = ThreadCpuSeconds() - t0;
  }

  const int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> slot_;
  bool done_ = false;
  size_t sent_ = 0;
  double cpu_ = 0;
  std::thread thread_;  // last: starts once the rest is made
};

RunFigures RunOnce(size_t mib, Door door, const std::string& console_dir) {
  const std::string cmd =
      "yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c " + std::to_string(mib << 20);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) Die("pipe");
  ::fcntl(out[0], F_SETPIPE_SZ, static_cast<int>(kChunkBytes));  // as the executor's
  auto [door_fd, client_fd] = edge::bench::LoopbackTcpPair();
  if (door_fd < 0) Die("loopback TCP pair");

  size_t received = 0;
  double client_cpu = 0;
  std::thread client;
  if (door != Door::kPipeAlone)
    client = std::thread([&, fd = client_fd] {
      std::vector<char> buf(kChunkBytes);
      const double t0 = ThreadCpuSeconds();
      for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) Die("client read");
        if (n == 0) break;
        received += static_cast<size_t>(n);
      }
      client_cpu = ThreadCpuSeconds() - t0;
    });

  const double children0 = ChildrenCpuSeconds();
  const auto wall0 = std::chrono::steady_clock::now();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", &fa, nullptr, const_cast<char* const*>(argv), environ) != 0) {
    Die("spawn");
  }
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);

  const double door0 = ThreadCpuSeconds();
  std::optional<LineSender> sender;
  if (door == Door::kPipelined) sender.emplace(door_fd);
  std::string chunk(kChunkBytes, '\0');
  size_t sent = 0, output = 0, console_bytes = 0;
  int console_fd = -1;
  const std::string console_path = console_dir + "/console.log";
  for (bool eof = false; !eof;) {
    size_t len = 0;
    while (len < kChunkBytes) {
      const ssize_t n = ::read(out[0], chunk.data() + len, kChunkBytes - len);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) Die("pipe read");
      if (n == 0) {
        eof = true;
        break;
      }
      len += static_cast<size_t>(n);
    }
    if (len == 0) break;
    output += len;
    const std::string_view data(chunk.data(), len);
    if (door == Door::kPipeAlone) continue;
    if (door == Door::kSerialWithConsoleLog) {
      if (console_fd < 0 || console_bytes + len > kConsoleFileBytes) {
        if (console_fd >= 0) ::close(console_fd);
        ::unlink(console_path.c_str());
        console_fd = ::open(console_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (console_fd < 0) Die("console log open");
        console_bytes = 0;
      }
      if (::write(console_fd, data.data(), len) != static_cast<ssize_t>(len)) Die("console log");
      console_bytes += len;
    }
    auto line = edge::workerrpc::NdjsonChunkLine("s", "worker-1", "stdout", data);
    if (!line) Die("the command's output is not UTF-8 text", false);
    if (sender) {
      sender->Hand(std::move(*line));
    } else {
      sent += SendChunk(door_fd, *line);
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("the command failed", false);
  double door_cpu = 0;
  if (sender) {
    const auto [bytes, cpu] = sender->Finish();
    sent = bytes;
    door_cpu = cpu;
  } else if (door != Door::kPipeAlone) {
    sent += EndBody(door_fd);
  }
  door_cpu += ThreadCpuSeconds() - door0;
  if (client.joinable()) client.join();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  ::close(door_fd);
  ::close(client_fd);
  ::close(out[0]);
  if (console_fd >= 0) ::close(console_fd);
  if (output != (mib << 20)) Die("the command wrote " + std::to_string(output) + " bytes", false);
  if (received != sent) {
    Die("the client received " + std::to_string(received) + " of " + std::to_string(sent), false);
  }
  const double gib = static_cast<double>(output) / kGiB;
  return {static_cast<double>(mib) / wall, door_cpu / gib, client_cpu / gib,
          (ChildrenCpuSeconds() - children0) / gib};
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  int runs = 3, cores = 2;
  double ssh_mibs = 0;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--mib" && has_value) {
      mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--runs" && has_value) {
      runs = std::atoi(argv[++i]);
    } else if (a == "--ssh-mibs" && has_value) {
      ssh_mibs = std::strtod(argv[++i], nullptr);
    } else if (a == "--cores" && has_value) {
      cores = std::atoi(argv[++i]);
    } else if (a == "--json" && has_value) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: exec_stream_floor_bench [--mib M>0] [--runs R>0] [--ssh-mibs X] "
                   "[--cores C>0] [--json PATH]; got '%s'\n",
                   a.c_str());
      return 2;
    }
  }
  if (mib < 1 || runs < 1 || cores < 1 || ssh_mibs < 0) {
    std::fprintf(stderr,
                 "exec_stream_floor_bench: --mib, --runs and --cores must be whole numbers > 0 "
                 "and --ssh-mibs a number >= 0; got --mib %zu --runs %d --cores %d --ssh-mibs "
                 "%g\n",
                 mib, runs, cores, ssh_mibs);
    return 2;
  }
  char tmpl[] = "/tmp/edge-floor-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) Die("mkdtemp");
  const std::string console_dir = tmpl;

  // The four ways of the header, their runs interleaved.
  struct Variant {
    const char* name;
    Door door;
    std::vector<double> mibs, door_cpu, client, command, total;
  };
  std::vector<Variant> variants = {
      {"exec_stream floor", Door::kSerial},
      {"exec_stream floor with the console log file", Door::kSerialWithConsoleLog},
      {"exec_stream floor, pipelined (read and escape | send)", Door::kPipelined},
      {"the pipe alone (read and drop: no escaping, socket or client)", Door::kPipeAlone}};
  for (int r = 0; r < runs; ++r) {
    for (auto& v : variants) {
      const RunFigures f = RunOnce(mib, v.door, console_dir);
      v.mibs.push_back(f.mibs);
      v.door_cpu.push_back(f.door);
      v.client.push_back(f.client);
      v.command.push_back(f.command);
      v.total.push_back(f.door + f.client + f.command);
    }
  }
  std::filesystem::remove_all(console_dir);

  namespace eb = edge::bench;
  nlohmann::json figures = nlohmann::json::array();
  for (const auto& v : variants) {
    const auto m = eb::Summarize(v.mibs), d = eb::Summarize(v.door_cpu),
               c = eb::Summarize(v.client), k = eb::Summarize(v.command),
               t = eb::Summarize(v.total);
    std::printf(
        "%s, %zu MiB x%d: median %.0f MiB/s (min %.0f, max %.0f) | CPU-s per GiB of output, "
        "medians: door %.2f, client thread %.2f, the command (sh, yes, head) %.2f, all "
        "%.2f\n",
        v.name, mib, runs, m.median, m.min, m.max, d.median, c.median, k.median, t.median);
    const std::string name = v.name;
    figures.push_back(eb::FigureJson(name, "MiB/s", m));
    figures.push_back(eb::FigureJson(name + ": door thread", "CPU-s/GiB", d));
    figures.push_back(eb::FigureJson(name + ": client thread", "CPU-s/GiB", c));
    figures.push_back(eb::FigureJson(name + ": the command", "CPU-s/GiB", k));
    if (ssh_mibs > 0) {
      // 2x ssh moves a GiB in 1024 / (2 X) seconds: `cores` times that in CPU-seconds for all.
      const double budget = cores * 1024.0 / (2 * ssh_mibs);
      std::printf(
          "  ssh on the same command: %.0f MiB/s -> %.2fx ssh (target 2x); 2x ssh leaves %.2f "
          "CPU-s per GiB on %d cores, this spends %.2f (%.2fx), of which the command %.2f\n",
          ssh_mibs, m.median / ssh_mibs, budget, cores, t.median, t.median / budget, k.median);
      figures.push_back(
          {{"name", name + " / ssh"}, {"unit", "ratio"}, {"median", m.median / ssh_mibs}});
    }
  }
  if (!eb::WriteFigures(json_path, figures)) return 1;
  return 0;
}
