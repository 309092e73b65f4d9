// A fixture base for SqliteStore tests: a fresh temp dir per test (removed after it) and
// OpenStore() on data_dir/controller.db, null (with a test failure) when it cannot open.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

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

  edge::testing::TempDir tmp_{"store"};
  std::string dir_ = tmp_.path(), path_;
};

}  // namespace edge::controller
