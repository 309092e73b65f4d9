// EnrollmentFiles: certs/join_token.pending is written 0600 (certs/ 0700), read back and
// removed; certs/controller.address round-trips and stands in for controller.address once the
// join token is gone from the config. Temp dirs only.
#include "agent/edge/enrollment_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/unit/edge/test_support.h"

namespace edge::agentedge::testing {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

void Spit(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

class EnrollmentFilesTest : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string data_ = dir_ / "data";
};

TEST_F(EnrollmentFilesTest, PathsAreNextToTheKeystore) {
  EXPECT_EQ(EnrollmentFiles::PendingTokenPath(data_), data_ + "/certs/join_token.pending");
  EXPECT_EQ(EnrollmentFiles::ControllerAddressPath(data_), data_ + "/certs/controller.address");
}

TEST_F(EnrollmentFilesTest, PendingTokenIsWritten0600ReadAndRemoved) {
  auto none = EnrollmentFiles::ReadPendingToken(data_);
  ASSERT_TRUE(none) << none.error().ToString();
  EXPECT_FALSE(none->has_value());

  const std::string token = "eyJhbGciOiJFUzI1NiJ9.eyJqdGkiOiJqLTEifQ.c2ln";
  ASSERT_TRUE(EnrollmentFiles::WritePendingToken(data_, token));
  const std::string path = EnrollmentFiles::PendingTokenPath(data_);
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(ModeOf(path), 0600);
  EXPECT_EQ(ModeOf(data_ + "/certs"), 0700);

  auto read = EnrollmentFiles::ReadPendingToken(data_);
  ASSERT_TRUE(read) << read.error().ToString();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, token);

  // A second write replaces it (a re-enrollment with a new token).
  ASSERT_TRUE(EnrollmentFiles::WritePendingToken(data_, token + "x"));
  EXPECT_EQ(EnrollmentFiles::ReadPendingToken(data_).value().value(), token + "x");
  EXPECT_EQ(ModeOf(path), 0600);

  ASSERT_TRUE(EnrollmentFiles::RemovePendingToken(data_));
  EXPECT_FALSE(std::filesystem::exists(path));
  auto gone = EnrollmentFiles::ReadPendingToken(data_);
  ASSERT_TRUE(gone) << gone.error().ToString();
  EXPECT_FALSE(gone->has_value());
  // Removing what is already gone is not an error (a retried first attestation).
  EXPECT_TRUE(EnrollmentFiles::RemovePendingToken(data_));
}

TEST_F(EnrollmentFilesTest, EmptyPendingTokenIsRefused) {
  auto st = EnrollmentFiles::WritePendingToken(data_, "");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(EnrollmentFiles::PendingTokenPath(data_)));
}

TEST_F(EnrollmentFilesTest, HandEditedPendingTokenIsTrimmed) {
  Spit(EnrollmentFiles::PendingTokenPath(data_), "a.b.c\n");
  EXPECT_EQ(EnrollmentFiles::ReadPendingToken(data_).value().value(), "a.b.c");
  Spit(EnrollmentFiles::PendingTokenPath(data_), "\n");
  auto blank = EnrollmentFiles::ReadPendingToken(data_);
  ASSERT_TRUE(blank);
  EXPECT_FALSE(blank->has_value());
}

TEST_F(EnrollmentFilesTest, UnreadablePendingTokenIsAnErrorNotMissing) {
  // A directory where the file should be: an error naming the path, not "no token".
  std::filesystem::create_directories(EnrollmentFiles::PendingTokenPath(data_));
  auto read = EnrollmentFiles::ReadPendingToken(data_);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message.find(EnrollmentFiles::PendingTokenPath(data_)), std::string::npos)
      << read.error().message;
}

TEST_F(EnrollmentFilesTest, ControllerAddressRoundTrip) {
  EXPECT_FALSE(EnrollmentFiles::ReadControllerAddress(data_).has_value());
  ASSERT_TRUE(EnrollmentFiles::WriteControllerAddress(data_, "ctl.example.com:50056"));
  const std::string path = EnrollmentFiles::ControllerAddressPath(data_);
  EXPECT_EQ(ModeOf(path), 0644);
  EXPECT_EQ(EnrollmentFiles::ReadControllerAddress(data_), "ctl.example.com:50056");

  ASSERT_TRUE(EnrollmentFiles::WriteControllerAddress(data_, "[::1]:7000"));
  EXPECT_EQ(EnrollmentFiles::ReadControllerAddress(data_), "[::1]:7000");
}

TEST_F(EnrollmentFilesTest, ResolvePrefersTheConfigThenTheRecordedAddress) {
  config::AgentConfig cfg;
  cfg.data_dir = data_;

  auto neither = EnrollmentFiles::ResolveControllerAddress(cfg);
  ASSERT_FALSE(neither);
  EXPECT_EQ(neither.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(neither.error().message.find("controller.address"), std::string::npos)
      << neither.error().message;
  EXPECT_NE(neither.error().message.find(EnrollmentFiles::ControllerAddressPath(data_)),
            std::string::npos)
      << neither.error().message;

  ASSERT_TRUE(EnrollmentFiles::WriteControllerAddress(data_, "recorded:1"));
  EXPECT_EQ(EnrollmentFiles::ResolveControllerAddress(cfg).value_or(""), "recorded:1");

  cfg.controller.address = "configured:2";
  EXPECT_EQ(EnrollmentFiles::ResolveControllerAddress(cfg).value_or(""), "configured:2");
}

}  // namespace
}  // namespace edge::agentedge::testing
