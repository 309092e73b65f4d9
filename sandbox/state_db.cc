#include "sandbox/state_db.h"

namespace edge::sandbox {

Result<std::unique_ptr<StateDb>> StateDb::Open(const std::string& data_dir, Options options) {
  if (data_dir.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "data_dir is empty; the state database needs one");
  }
  const std::string dir = data_dir + "/state";
  if (auto st = MakePrivateDir(dir, "state directory"); !st) return std::unexpected(st.error());
  return OpenFile(dir + "/agent.db", options);
}

Result<std::unique_ptr<StateDb>> StateDb::OpenFile(const std::string& db_path, Options options) {
  std::unique_ptr<StateDb> db(new StateDb());
  if (auto st = db->Connect(db_path, {.busy_timeout = options.busy_timeout,
                                      .name = "state database",
                                      .owner = "agent",
                                      .fdatasync = options.fdatasync});
      !st) {
    return std::unexpected(st.error());
  }
  return db;
}

}  // namespace edge::sandbox
