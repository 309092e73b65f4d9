#include "agent/edge/enrollment_files.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/identity/keystore_files.h"
#include "common/atomic_file.h"
#include "common/log.h"

namespace edge::agentedge {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.pop_back();
  return s;
}

}  // namespace

std::string EnrollmentFiles::PendingTokenPath(const std::string& data_dir) {
  return identity::KeystoreFiles::CertsDir(data_dir) + "/join_token.pending";
}

std::string EnrollmentFiles::ControllerAddressPath(const std::string& data_dir) {
  return identity::KeystoreFiles::CertsDir(data_dir) + "/controller.address";
}

Status EnrollmentFiles::WritePendingToken(const std::string& data_dir, const std::string& token) {
  if (token.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "pending join token: empty");
  }
  log::RegisterSecret(token);
  const std::string path = PendingTokenPath(data_dir);
  if (auto st = WriteFileAtomic(path, token, {.mode = 0600, .create_parents_mode = 0700}); !st) {
    return MakeError(st.error().code, "cannot write " + path + ": " + st.error().message);
  }
  return OkStatus();
}

Result<std::optional<std::string>> EnrollmentFiles::ReadPendingToken(const std::string& data_dir) {
  const std::string path = PendingTokenPath(data_dir);
  auto text = ReadFile(path, 64 << 10);
  if (!text) {
    if (text.error().code == ErrorCode::kNotFound) return std::optional<std::string>();
    return MakeError(text.error().code, "cannot read " + path + ": " + text.error().message);
  }
  std::string token = Trim(std::move(*text));
  if (token.empty()) return std::optional<std::string>();
  log::RegisterSecret(token);
  return std::optional<std::string>(std::move(token));
}

Status EnrollmentFiles::RemovePendingToken(const std::string& data_dir) {
  const std::string path = PendingTokenPath(data_dir);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return MakeError(ErrorCode::kInternal, "cannot remove " + path + ": " + std::strerror(errno));
  }
  return SyncDirectory(identity::KeystoreFiles::CertsDir(data_dir));
}

Status EnrollmentFiles::WriteControllerAddress(const std::string& data_dir,
                                               const std::string& address) {
  const std::string path = ControllerAddressPath(data_dir);
  if (auto st = WriteFileAtomic(path, address + "\n", {.mode = 0644, .create_parents_mode = 0700});
      !st) {
    return MakeError(st.error().code, "cannot write " + path + ": " + st.error().message);
  }
  return OkStatus();
}

std::optional<std::string> EnrollmentFiles::ReadControllerAddress(const std::string& data_dir) {
  auto text = ReadFile(ControllerAddressPath(data_dir), 4096);
  if (!text) return std::nullopt;
  std::string address = Trim(std::move(*text));
  if (address.empty()) return std::nullopt;
  return address;
}

Result<std::string> EnrollmentFiles::ResolveControllerAddress(const config::AgentConfig& config) {
  if (!config.controller.address.empty()) return config.controller.address;
  if (auto recorded = ReadControllerAddress(config.data_dir)) return *recorded;
  return MakeError(ErrorCode::kInvalidArgument,
                   "no controller address: controller.address is not set and enrollment "
                   "recorded none in " +
                       ControllerAddressPath(config.data_dir));
}

}  // namespace edge::agentedge
