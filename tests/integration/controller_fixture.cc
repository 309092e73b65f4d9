#include "tests/integration/controller_fixture.h"

#include <signal.h>

#include <regex>
#include <stdexcept>

#include "tests/support/wait_until.h"

namespace edge::testing {

using namespace std::chrono_literals;

ControllerFixture::ControllerFixture(const TempDir& dir, const std::string& name,
                                     const std::string& extra_yaml)
    : log_dir_(dir.path()), extra_yaml_(extra_yaml) {
  data_dir_ = dir / name;
  config_path_ = dir / (name + ".yaml");
  WriteText(config_path_,
            "data_dir: " + data_dir_ + "\ngrpc:\n  listen: 127.0.0.1:0\n" + extra_yaml_);
  Start();
}

void ControllerFixture::Start() {
  proc_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{ControllerBin(), "--config", config_path_, "serve"}, log_dir_);
  CommandResult st;
  bool up = WaitUntil(
      [&] {
        if (!proc_->Running()) return true;  // exited: no point waiting
        st = Cli({"status", "--format", "json"});
        return st.exit_code == 0;
      },
      30s);
  if (!up || !proc_->Running())
    throw std::runtime_error("controller did not start: " + proc_->Stderr());
  auto j = nlohmann::json::parse(st.out);
  advertise_ = j["advertise"];
  ca_pin_ = j["ca_pin"];
}

void ControllerFixture::Kill() {
  proc_->Signal(SIGKILL);
  proc_->Wait(10s);
}

void ControllerFixture::Restart() {
  if (proc_->Running()) Kill();
  // The same port as before, so that agents reconnect to the address they know.
  const std::string port = advertise_.substr(advertise_.rfind(':') + 1);
  WriteText(config_path_,
            "data_dir: " + data_dir_ + "\ngrpc:\n  listen: 127.0.0.1:" + port + "\n" + extra_yaml_);
  // The port may linger for a moment after the kill; keep trying for a while.
  for (int attempt = 0;; ++attempt) {
    try {
      Start();
      return;
    } catch (const std::runtime_error&) {
      if (attempt >= 5) throw;
      if (proc_->Running()) Kill();
    }
  }
}

ControllerFixture::~ControllerFixture() {
  proc_->Signal(SIGTERM);
  proc_->Wait(10s);
}

uint16_t ControllerFixture::WaitForHttpPort(std::chrono::milliseconds timeout) {
  static const std::regex re("HTTP on \\S+ \\(port (\\d+)");
  uint16_t port = 0;
  WaitUntil(
      [&] {
        std::smatch m;
        const std::string err = proc_->Stderr();
        if (!std::regex_search(err, m, re)) return false;
        port = static_cast<uint16_t>(std::stoi(m[1]));
        return true;
      },
      timeout);
  return port;
}

CommandResult ControllerFixture::Cli(std::vector<std::string> args,
                                     std::chrono::milliseconds timeout) {
  // --config first: a command's trailing `-- ARGS…` (sandbox exec) must stay last.
  std::vector<std::string> argv = {ControllerBin(), "--config", config_path_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, {}, timeout);
}

std::pair<std::string, std::string> ControllerFixture::CreateToken(const std::string& node,
                                                                   const std::string& ttl) {
  std::vector<std::string> args = {"token", "create", "--format", "json"};
  if (!node.empty()) args.insert(args.end(), {"--node", node});
  if (!ttl.empty()) args.insert(args.end(), {"--ttl", ttl});
  auto r = Cli(args);
  if (r.exit_code != 0) throw std::runtime_error("token create failed: " + r.err);
  auto j = nlohmann::json::parse(r.out);
  return {j["token_id"], j["join_token"]};
}

nlohmann::json ControllerFixture::ListTokens() {
  auto r = Cli({"token", "list", "--all", "--format", "json"});
  if (r.exit_code != 0) throw std::runtime_error("token list failed: " + r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace edge::testing
