// A running edge-controller for integration tests: its own temp dir, gRPC on an ephemeral
// loopback port, the admin CLI wrapped for tests (status, token create/revoke/list).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/integration/harness.h"

namespace edge::testing {

class ControllerFixture {
 public:
  // Starts `edge-controller serve` and waits until its status answers.
  // `extra_yaml` is appended to the generated config (top-level keys other than data_dir
  // and grpc).
  explicit ControllerFixture(const TempDir& dir, const std::string& name = "ctl",
                             const std::string& extra_yaml = "");
  ~ControllerFixture();

  const std::string& config_path() const { return config_path_; }
  const std::string& data_dir() const { return data_dir_; }
  // host:port the agents enroll with, and the CA pin.
  const std::string& advertise() const { return advertise_; }
  const std::string& ca_pin() const { return ca_pin_; }
  ChildProcess& process() { return *proc_; }
  // The port of its HTTP server (config `http.listen` with port 0), read from its log line
  // "HTTP on … (port N"; 0 when that line did not appear within `timeout`.
  uint16_t WaitForHttpPort(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // SIGKILLs the controller (no clean shutdown) and waits for it to be gone.
  void Kill();
  // Starts it again on the same data dir and the same gRPC port (agents keep their address).
  void Restart();

  // Runs `edge-controller <args> --config <ours>`, killed after `timeout` (exit -1).
  CommandResult Cli(std::vector<std::string> args,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // token create; returns {token_id, join_token}.
  std::pair<std::string, std::string> CreateToken(const std::string& node = "",
                                                  const std::string& ttl = "");
  nlohmann::json ListTokens();

 private:
  void Start();

  std::string log_dir_, extra_yaml_;
  std::string config_path_, data_dir_, advertise_, ca_pin_;
  std::unique_ptr<ChildProcess> proc_;
};

}  // namespace edge::testing
