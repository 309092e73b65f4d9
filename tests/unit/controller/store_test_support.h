// A fixture base for SqliteStore tests: a fresh temp dir per test (removed after it) and
// OpenStore() on data_dir/controller.db, null (with a test failure) when it cannot open.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "controller/sqlite_store.h"

namespace edge::controller {

class StoreTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/edge-store-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/controller.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<SqliteStore> OpenStore() {
    auto s = SqliteStore::Open(path_);
    EXPECT_TRUE(s) << s.error().ToString();
    return s ? std::move(*s) : nullptr;
  }

  std::string dir_, path_;
};

}  // namespace edge::controller
