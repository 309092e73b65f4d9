// Issue 15 #8: peer-supplied strings (the unauthenticated node_id, the peer address, a Hello's
// stream_id, a node's capabilities) reached the controller's log raw, newlines and ESC
// sequences included. Every such site now goes through log::Escape: one record, one line.
#include "common/log.h"
#include "tests/unit/controller/edge_test_support.h"

namespace edge::controller::testing {
namespace {

class LogInjectionTest : public ControllerHarness {
 protected:
  void SetUp() override {
    log::Init({.level = spdlog::level::debug, .writer = [this](std::string_view l) {
                 std::lock_guard lock(mu_);
                 lines_.emplace_back(l);
               }});
    ControllerHarness::SetUp();
  }
  void TearDown() override {
    ControllerHarness::TearDown();
    log::Init({});
  }
  std::vector<std::string> Lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  // The captured line containing `needle`, or "".
  std::string LineWith(const std::string& needle) {
    for (const auto& l : Lines())
      if (l.find(needle) != std::string::npos) return l;
    return "";
  }
  // Every record is exactly one line and carries no control character but its final \n.
  void ExpectNoRawControlCharacters() {
    for (const auto& l : Lines()) {
      ASSERT_FALSE(l.empty());
      EXPECT_EQ(l.back(), '\n');
      for (size_t i = 0; i + 1 < l.size(); ++i) {
        const auto c = static_cast<unsigned char>(l[i]);
        EXPECT_FALSE(c < 0x20 || c == 0x7f) << "raw control byte " << int(c) << " in: " << l;
      }
    }
  }

  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(LogInjectionTest, AnUnauthenticatedNodeIdCannotForgeLogLines) {
  // (Invalid UTF-8 cannot arrive here: a proto3 string field that is not UTF-8 fails to parse
  // before any handler runs.)
  const std::string evil = "x\n2030-01-01T00:00:00Z info  [audit] node n1 enrolled\x1b[2K\r\x7f";
  me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse resp;
  auto st = Exchange("not-a-token", evil, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(WaitFor([&] { return !LineWith("ExchangeJoinToken for node").empty(); }));
  const std::string line = LineWith("ExchangeJoinToken for node");
  EXPECT_NE(line.find(R"(x\n2030-01-01T00:00:00Z info  [audit] node n1 enrolled\e[2K\r\x7f)"),
            std::string::npos)
      << line;
  ExpectNoRawControlCharacters();
}

TEST_F(LogInjectionTest, ANodesStreamIdAndCapabilitiesAreEscaped) {
  auto node = EnrolledNode("edge-01");
  auto stream = node->Open(node->token);
  pb::EdgeEvent hello;
  hello.mutable_hello()->set_stream_id("sid\n\x1b]0;pwned\x07");
  auto* caps = hello.mutable_hello()->mutable_capabilities();
  caps->set_os("linux\r\nERROR forged");
  caps->set_arch("x86_64");
  ASSERT_TRUE(stream->Write(node->Sealed(hello, "sid\n\x1b]0;pwned\x07")));
  ASSERT_TRUE(WaitConnected("edge-01"));
  ASSERT_TRUE(WaitFor([&] { return !LineWith("node edge-01 connected").empty(); }));
  const std::string line = LineWith("node edge-01 connected");
  EXPECT_NE(line.find(R"((stream sid\n\e]0;pwned\x07, linux\r\nERROR forged/x86_64)"),
            std::string::npos)
      << line;
  ExpectNoRawControlCharacters();
}

}  // namespace
}  // namespace edge::controller::testing
