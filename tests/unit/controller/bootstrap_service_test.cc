#include "controller/bootstrap_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "agent/identity/pkcs12.h"
#include "common/log.h"
#include "controller/join_token_issuer.h"
#include "controller/sqlite_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace edge::controller {
namespace {

namespace pb = me::prexorjustin::prexorcloud::protocol;

class BootstrapServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*SqliteStore::Open(dir_ + "/c.db"));
    ca_.emplace(*identity::CertificateAuthority::Create("ca", clock_.Now()));
    key_.emplace(*identity::EcSigningKey::Generate());
    issuer_ = std::make_unique<JoinTokenIssuer>(
        *store_, *key_, clock_,
        JoinTokenSettings{.issuer = "t", .endpoint = "127.0.0.1:1", .ca_pin = ca_->Pin()});
    service_ = std::make_unique<BootstrapServiceImpl>(*store_, *ca_, clock_);
  }
  Status Redeem(const std::string& token, const std::string& node,
                pb::ExchangeJoinTokenResponse* resp = nullptr) {
    pb::ExchangeJoinTokenRequest req;
    req.set_join_token(token);
    req.set_node_id(node);
    pb::ExchangeJoinTokenResponse scratch;
    return service_->Redeem(req, resp ? resp : &scratch);
  }
  edge::testing::TempDir tmp_{"bs"};
  std::string dir_ = tmp_.path();
  ManualClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::optional<identity::CertificateAuthority> ca_;
  std::optional<identity::EcSigningKey> key_;
  std::unique_ptr<JoinTokenIssuer> issuer_;
  std::unique_ptr<BootstrapServiceImpl> service_;
};

TEST_F(BootstrapServiceTest, MissingOrInvalidFieldsAreInvalidArgument) {
  auto t = issuer_->Create("", "", {});
  for (auto [token, node, words] :
       {std::tuple{std::string(), std::string("n"), "join_token is required"},
        std::tuple{t->token, std::string(), "node_id is required"},
        std::tuple{t->token, std::string("a/b"), "\"a/b\" must match"},
        std::tuple{t->token, std::string(65, 'x'), "must match"}}) {
    auto st = Redeem(token, node);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(st.error().message.find(words), std::string::npos) << st.error().message;
  }
  EXPECT_TRUE(Redeem(t->token, "n")) << "the refused calls did not spend the token";
}

TEST_F(BootstrapServiceTest, RedeemsOnceAndMintsAKeystoreForTheNode) {
  auto t = issuer_->Create("edge-01", "tenant-a", std::chrono::minutes(5));
  ASSERT_TRUE(t);
  pb::ExchangeJoinTokenResponse resp;
  ASSERT_TRUE(Redeem(t->token, "edge-01", &resp));
  EXPECT_EQ(resp.pkcs12_password().size(), 32u);
  EXPECT_EQ(resp.ca_certificate_pem(), ca_->cert_pem());
  EXPECT_TRUE(identity::ParsePkcs12(resp.pkcs12(), resp.pkcs12_password()));
  auto node = store_->GetNode("edge-01");
  ASSERT_TRUE(node && node->has_value());
  EXPECT_EQ((*node)->tenant_id, "tenant-a");
  auto replay = Redeem(t->token, "edge-01");
  ASSERT_FALSE(replay);
  EXPECT_EQ(replay.error().code, ErrorCode::kFailedPrecondition);
  clock_.Advance(std::chrono::minutes(6));
  auto late = issuer_->Create("", "", std::chrono::minutes(5));
  clock_.Advance(std::chrono::minutes(6));
  auto expired = Redeem(late->token, "x");
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.error().code, ErrorCode::kFailedPrecondition);
}

// Captures every log line for the life of the object.
class LogLines {
 public:
  LogLines() {
    log::Init({.level = spdlog::level::debug, .writer = [this](std::string_view l) {
                 std::lock_guard lock(mu_);
                 text_ += l;
               }});
  }
  ~LogLines() { log::Init({}); }
  std::string text() {
    std::lock_guard lock(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::string text_;
};

std::string SerialOf(Store& store, const std::string& node) {
  auto n = store.GetNode(node);
  return n && *n ? (*n)->cert_serial_hex : "";
}

// Issue 15 #3: an unbound token enrolled a second agent as the existing node n2.
TEST_F(BootstrapServiceTest, AnUnboundTokenCannotTakeOverAnExistingNode) {
  LogLines logs;
  auto first = issuer_->Create("n2", "", {});
  ASSERT_TRUE(Redeem(first->token, "n2"));
  const std::string serial = SerialOf(*store_, "n2");
  ASSERT_FALSE(serial.empty());
  ASSERT_TRUE(store_->SetNodeState("n2", kNodeHealthy));

  auto unbound = issuer_->Create("", "", {});
  pb::ExchangeJoinTokenResponse resp;
  auto st = Redeem(unbound->token, "n2", &resp);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(st.error().message.find("node \"n2\" is already enrolled"), std::string::npos)
      << st.error().message;
  EXPECT_NE(st.error().message.find("token create --node n2 --replace"), std::string::npos);
  EXPECT_TRUE(resp.pkcs12().empty()) << "no keystore for the intruder";
  EXPECT_EQ(SerialOf(*store_, "n2"), serial) << "the real n2 keeps its certificate";
  EXPECT_EQ((*store_->GetNode("n2"))->state, kNodeHealthy);

  auto bound = issuer_->Create("n2", "", {});
  st = Redeem(bound->token, "n2");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);

  // The explicit operator step: a token bound to n2 created with replace.
  EXPECT_EQ(issuer_->Create("", "", {}, true).error().code, ErrorCode::kInvalidArgument)
      << "replace needs a node";
  auto rep = issuer_->Create("n2", "", {}, true);
  ASSERT_TRUE(rep);
  ASSERT_TRUE(Redeem(rep->token, "n2", &resp));
  EXPECT_FALSE(resp.pkcs12().empty());
  EXPECT_NE(SerialOf(*store_, "n2"), serial) << "a new identity";
  EXPECT_EQ((*store_->GetNode("n2"))->state, kNodeEnrolled);

  const std::string text = logs.text();
  EXPECT_NE(text.find("[audit] ExchangeJoinToken: node n2 (was healthy) re-enrolled with join "
                      "token " +
                      rep->token_id),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[audit] ExchangeJoinToken: new node n2"), std::string::npos) << text;
}

TEST_F(BootstrapServiceTest, ARevokedNodeIsNotRevivedByAnUnboundToken) {
  auto first = issuer_->Create("", "", {});
  ASSERT_TRUE(Redeem(first->token, "n1"));
  ASSERT_TRUE(store_->RevokeNode("n1", ToEpochMillis(clock_.Now())));
  auto unbound = issuer_->Create("", "", {});
  auto st = Redeem(unbound->token, "n1");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(st.error().message.find("state revoked"), std::string::npos) << st.error().message;
  EXPECT_EQ((*store_->GetNode("n1"))->state, kNodeRevoked);
  auto rep = issuer_->Create("n1", "", {}, true);
  ASSERT_TRUE(Redeem(rep->token, "n1"));
  EXPECT_EQ((*store_->GetNode("n1"))->state, kNodeEnrolled) << "lifted by the replace token";
}

TEST_F(BootstrapServiceTest, IssuerValidatesItsInputs) {
  EXPECT_EQ(issuer_->Create("bad id", "", {}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(issuer_->Create("", "bad tenant!", {}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(issuer_->Create("", "", std::chrono::hours(24 * 365)).error().code,
            ErrorCode::kInvalidArgument);
  auto t = issuer_->Create("", "", {});
  ASSERT_TRUE(t);
  auto stored = store_->FindJoinTokenByHash(JoinTokenIssuer::HashToken(t->token));
  ASSERT_TRUE(stored && stored->has_value());
  EXPECT_NE((*stored)->token_hash, t->token) << "only the hash is stored";
  EXPECT_EQ((*stored)->expires_at_ms - (*stored)->created_at_ms, 3'600'000) << "default ttl 1h";
}

}  // namespace
}  // namespace edge::controller
