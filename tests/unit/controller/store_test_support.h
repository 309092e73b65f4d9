// A fixture base for SqliteStore tests: a fresh temp dir per test (removed after it) and
// OpenStore() on data_dir/controller.db, null (with a test failure) when it cannot open;
// RawExec() runs SQL on that file past the store.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controller/sqlite_store.h"
#include "tests/support/temp_dir.h"

namespace edge::controller {

class StoreTestBase : public ::testing::Test {
 protected:
  void SetUp() override { path_ = dir_ + "/controller.db"; }

  std::unique_ptr<SqliteStore> OpenStore() {
    auto s = SqliteStore::Open(path_);
    EXPECT_TRUE(s) << s.error().ToString();
    return s ? std::move(*s) : nullptr;
  }

  // Runs `sql` on the file with a plain connection (as an older store, or damage, would).
  void RawExec(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << msg;
  }

  // Runs body(i, store_i) for i in [0, n) on n threads, each with its own connection to the
  // database (as separate controller processes would have), released at the same moment.
  template <typename Body>
  void Race(int n, Body body) {
    std::vector<std::unique_ptr<SqliteStore>> stores;
    for (int i = 0; i < n; ++i)
      stores.push_back(OpenStore());
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        while (!go)
          std::this_thread::yield();
        body(i, *stores[i]);
      });
    }
    go = true;
    for (auto& t : threads)
      t.join();
  }

  edge::testing::TempDir tmp_{"store"};
  std::string dir_ = tmp_.path(), path_;
};

}  // namespace edge::controller
