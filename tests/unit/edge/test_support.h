// Helpers shared by the edge unit tests: a temp dir, a deterministic Random, waiting on a
// condition with a deadline (never sleeping for timing), and InvokeTool builders.
#pragma once

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/random.h"
#include "node_cluster.pb.h"

namespace edge::agentedge::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/edge-edge-XXXXXX";
    path_ = ::mkdtemp(tmpl);
    path_ = std::filesystem::canonical(path_).string();
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

// Uniform(bound) returns the top of the range (bound - 1) or 0, as set.
class FixedRandom final : public Random {
 public:
  enum class Mode { kMax, kMin };
  explicit FixedRandom(Mode mode = Mode::kMax) : mode_(mode) {}
  uint64_t Uniform(uint64_t bound) override {
    if (bound == 0) return 0;
    return mode_ == Mode::kMax ? bound - 1 : 0;
  }
  void set_mode(Mode mode) { mode_ = mode; }

 private:
  std::atomic<Mode> mode_;
};

// Polls `pred` until it holds or `timeout` passes (real time: it waits for threads, it does not
// measure time).
inline bool WaitUntil(const std::function<bool()>& pred,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

inline google::protobuf::Struct ToStruct(const nlohmann::json& j) {
  google::protobuf::Struct s;
  (void)google::protobuf::util::JsonStringToMessage(j.dump(), &s);
  return s;
}

inline nlohmann::json PayloadJson(const aegis::cluster::v1::EdgeResult& r) {
  google::protobuf::Struct s;
  if (!r.ok().payload().UnpackTo(&s)) return nullptr;
  std::string text;
  (void)google::protobuf::util::MessageToJsonString(s, &text);
  return nlohmann::json::parse(text);
}

// A well-formed InvokeTool for `tenant` (inner envelope consistent with the outer one).
inline aegis::cluster::v1::EdgeCommand Invoke(const std::string& id, const std::string& tool,
                                              const nlohmann::json& args,
                                              const std::string& tenant = "tenant-a",
                                              const std::string& context = "") {
  aegis::cluster::v1::EdgeCommand c;
  auto* t = c.mutable_invoke_tool();
  t->set_command_id(id);
  t->set_tool_name(tool);
  t->set_security_context_name(context);
  *t->mutable_args() = ToStruct(args);
  auto* env = t->mutable_seal_envelope();
  env->set_user_security_token("aGVhZGVy.Y2xhaW1z.c2ln");
  env->set_tenant_id(tenant);
  env->set_security_context_name(context);
  return c;
}

inline aegis::cluster::v1::EdgeCommand Exec(const std::string& id, const std::string& command) {
  return Invoke(id, "exec", {{"command", command}});
}

}  // namespace edge::agentedge::testing
