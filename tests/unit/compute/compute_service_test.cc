// The daemon's compute service: the bearer token file (trimmed, re-read on every call, errors
// naming compute.token_file) and the channel compute.tls asks for (errors naming the key).
#include "agent/daemon/compute_service.h"

#include <gtest/gtest.h>

#include "common/atomic_file.h"
#include "tests/support/temp_dir.h"

namespace edge::daemon {
namespace {

TEST(ComputeService, TokenFileIsTrimmedAndReadEachTime) {
  testing::TempDir dir("compute-token");
  const std::string path = dir / "token";
  ASSERT_TRUE(WriteFileAtomic(path, "  tok-1\n", {.mode = 0600}));
  auto t = ComputeService::ReadToken(path);
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_EQ(*t, "tok-1");
  ASSERT_TRUE(WriteFileAtomic(path, "tok-2", {.mode = 0600}));
  EXPECT_EQ(ComputeService::ReadToken(path).value(), "tok-2");
  ASSERT_TRUE(WriteFileAtomic(path, " \n", {.mode = 0600}));
  auto empty = ComputeService::ReadToken(path);
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("compute.token_file"), std::string::npos);
  auto missing = ComputeService::ReadToken(dir / "nope");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("compute.token_file '" + (dir / "nope") + "'"),
            std::string::npos);
  EXPECT_FALSE(ComputeService::ReadToken(""));
}

TEST(ComputeService, ChannelPerTlsMode) {
  testing::TempDir dir("compute-channel");
  config::AgentConfig c;
  c.data_dir = dir.path();
  c.compute.address = "127.0.0.1:1";
  c.compute.tls_mode = "plaintext";
  EXPECT_TRUE(ComputeService::MakeChannel(c));
  c.compute.tls_mode = "tls";
  EXPECT_TRUE(ComputeService::MakeChannel(c));  // the system roots
  c.compute.tls_ca_file = dir / "missing-ca.pem";
  auto no_ca = ComputeService::MakeChannel(c);
  ASSERT_FALSE(no_ca);
  EXPECT_NE(no_ca.error().message.find("compute.tls.ca_file"), std::string::npos);
  c.compute.tls_ca_file.clear();
  c.compute.tls_mode = "mtls";
  auto no_keystore = ComputeService::MakeChannel(c);
  ASSERT_FALSE(no_keystore);
  EXPECT_NE(no_keystore.error().message.find("keystore"), std::string::npos);
}

}  // namespace
}  // namespace edge::daemon
