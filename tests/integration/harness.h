// Test harness for integration tests: runs the real edge-agent / edge-controller binaries
// as child processes on loopback, in a private temp directory, and collects their output.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace edge::testing {

// The built binaries (in BinDir(), tests/support/build_paths.h).
std::string AgentBin();
std::string ControllerBin();

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv to completion (killing it after `timeout`), with `env` added to the environment.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds(60),
                         const std::string& stdin_data = "");

// A long-running child (a daemon) whose stdout/stderr go to files in `log_dir`.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, std::string log_dir,
               std::map<std::string, std::string> env = {});
  ~ChildProcess();  // SIGKILLs the child if it is still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  void Signal(int sig);
  // Waits for exit; returns the exit code (or -signal), nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  std::string Stdout() const;
  std::string Stderr() const;

 private:
  pid_t pid_ = -1;
  time_t started_ = 0;  // CLOCK_REALTIME seconds, just before the fork
  std::optional<int> status_;
  std::string out_path_;
  std::string err_path_;
};

std::string ReadText(const std::string& path);
void WriteText(const std::string& path, const std::string& text);

}  // namespace edge::testing
