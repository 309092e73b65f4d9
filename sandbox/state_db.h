// StateDb: the agent's one SQLite connection to data_dir/state/agent.db (design.md §5), a
// common/sqlite_db.h SqliteDb opened in a 0700 directory whose messages name it "state
// database" and the "agent". Each store (leases, sandbox registry, idempotency, command
// journal, outbox) records the versions of its own tables under its component name. The
// daemon owns the StateDb; the stores borrow it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/error.h"
#include "common/sqlite_db.h"

namespace edge::sandbox {

using edge::SqlBlob;
using edge::SqlParam;
using edge::SqlRow;

class StateDb final : public SqliteDb {
 public:
  struct Options {
    std::chrono::milliseconds busy_timeout{5000};
    // The WAL's sync (SqliteDb::Options::fdatasync; tests count or fail it).
    int (*fdatasync)(int fd) = ::fdatasync;
  };

  // Opens (creating) `data_dir`/state/agent.db.
  static Result<std::unique_ptr<StateDb>> Open(const std::string& data_dir, Options options);
  static Result<std::unique_ptr<StateDb>> Open(const std::string& data_dir) {
    return Open(data_dir, Options{});
  }
  // Opens (creating) the database at exactly `db_path`; its directory must exist.
  static Result<std::unique_ptr<StateDb>> OpenFile(const std::string& db_path, Options options);

 private:
  StateDb() = default;
};

}  // namespace edge::sandbox
