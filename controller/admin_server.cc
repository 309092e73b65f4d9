#include "controller/admin_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/atomic_file.h"
#include "common/log.h"

namespace edge::controller {

Status AdminServer::Start(const std::string& socket_path,
                          const std::vector<grpc::Service*>& services, size_t max_message_bytes) {
  if (socket_path.empty()) return MakeError(ErrorCode::kInvalidArgument, "admin.socket is empty");
  const std::string dir = std::filesystem::path(socket_path).parent_path().string();
  if (!dir.empty()) {
    if (auto st = MakeDirs(dir, 0700); !st) return st;
    struct stat dst {};
    if (::stat(dir.c_str(), &dst) == 0 && (dst.st_mode & S_IWOTH) && !(dst.st_mode & S_ISVTX)) {
      return MakeError(ErrorCode::kPermissionDenied,
                       "admin socket directory " + dir +
                           " is writable by everyone: anyone could replace the socket");
    }
  }
  struct stat st {};
  if (::lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return MakeError(ErrorCode::kAlreadyExists,
                       "admin.socket " + socket_path + " exists and is not a socket");
    }
    ::unlink(socket_path.c_str());  // stale socket from a previous run
  }

  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  if (max_message_bytes > 0) builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  for (auto* s : services)
    builder.RegisterService(s);
  mode_t old = ::umask(077);
  server_ = builder.BuildAndStart();
  ::umask(old);
  if (!server_) {
    return MakeError(ErrorCode::kUnavailable, "cannot listen on admin socket " + socket_path);
  }
  if (::chmod(socket_path.c_str(), 0600) != 0) {
    int err = errno;
    Stop();
    return MakeError(ErrorCode::kInternal, "chmod 0600 " + socket_path + ": " + std::strerror(err));
  }
  socket_path_ = socket_path;
  log::Get("admin")->info("admin API listening on unix:{}", socket_path);
  return OkStatus();
}

void AdminServer::Stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
  if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
}

std::shared_ptr<grpc::Channel> AdminChannel(const std::string& socket_path) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
}

}  // namespace edge::controller
