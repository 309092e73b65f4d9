// Helpers shared by the edge unit tests: a deterministic Random and InvokeTool builders (the
// temp dir and WaitUntil are the test-support library's).
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
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace edge::agentedge::testing {

using edge::testing::TempDir;
using edge::testing::WaitUntil;

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
