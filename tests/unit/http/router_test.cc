// http::Router: pattern matching with {name} segments (percent-decoded), 404 for unknown
// paths, 405 with Allow for a known path and another method, 400 for a malformed escape —
// driven through a fake Exchange, no sockets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "http/router.h"

namespace edge::http {
namespace {

class FakeExchange final : public Exchange {
 public:
  explicit FakeExchange(Request r) : req_(std::move(r)) {}
  const Request& request() const override { return req_; }
  void Respond(Response r) override { response = std::move(r); }
  void BeginStream(unsigned, Headers, std::string) override {}
  void WriteChunk(std::string, std::function<void(bool)> written) override { written(false); }
  void EndStream() override {}
  void OnClientGone(std::function<void()>) override {}
  bool client_gone() const override { return false; }
  std::optional<Response> response;

 private:
  Request req_;
};

struct Fixture {
  Router router;
  std::string hit;
  PathParams params;
  Fixture() {
    router.Add("POST", "/api/v1/worker/{id}/heartbeat",
               [this](std::shared_ptr<Exchange> ex, const PathParams& p) {
                 hit = "heartbeat";
                 params = p;
                 ex->Respond({.status = 200});
               });
    router.Add("POST", "/api/v1/worker/{id}/leases/{resource_id}/renew",
               [this](std::shared_ptr<Exchange> ex, const PathParams& p) {
                 hit = "renew";
                 params = p;
                 ex->Respond({.status = 200});
               });
  }
  std::shared_ptr<FakeExchange> Send(std::string method, std::string target) {
    auto ex = std::make_shared<FakeExchange>(
        Request{.method = std::move(method), .target = std::move(target)});
    router.Handle(ex);
    return ex;
  }
};

TEST(Router, MatchesPatternsAndDecodesParameters) {
  Fixture f;
  auto ex = f.Send("POST", "/api/v1/worker/w-1/heartbeat?x=1");
  ASSERT_TRUE(ex->response);
  EXPECT_EQ(ex->response->status, 200u);
  EXPECT_EQ(f.hit, "heartbeat");
  EXPECT_EQ(f.params.at("id"), "w-1");
  f.Send("POST", "/api/v1/worker/w-1/leases/sb%201/renew");
  EXPECT_EQ(f.hit, "renew");
  EXPECT_EQ(f.params.at("id"), "w-1");
  EXPECT_EQ(f.params.at("resource_id"), "sb 1");
}

TEST(Router, UnknownPathIs404AndOtherMethodIs405WithAllow) {
  Fixture f;
  for (const char* target : {"/", "/api/v1/worker/w/heartbeat/extra", "/api/v1/worker//heartbeat",
                             "/api/v1/worker/w/leases/r/renew/x", "/nothing"}) {
    auto ex = f.Send("POST", target);
    ASSERT_TRUE(ex->response) << target;
    EXPECT_EQ(ex->response->status, 404u) << target;
    EXPECT_EQ(nlohmann::json::parse(ex->response->body)["code"], "NOT_FOUND");
  }
  auto ex = f.Send("DELETE", "/api/v1/worker/w/heartbeat");
  ASSERT_TRUE(ex->response);
  EXPECT_EQ(ex->response->status, 405u);
  EXPECT_EQ(std::string(FindHeader(ex->response->headers, "Allow").value_or("")), "POST");
  EXPECT_EQ(f.hit, "");
}

TEST(Router, MalformedOrSlashEscapesAreRefused) {
  Fixture f;
  for (const char* target : {"/api/v1/worker/%zz/heartbeat", "/api/v1/worker/%2/heartbeat",
                             "/api/v1/worker/a%2Fb/heartbeat", "/api/v1/worker/a%00/heartbeat"}) {
    auto ex = f.Send("POST", target);
    ASSERT_TRUE(ex->response) << target;
    EXPECT_EQ(ex->response->status, 400u) << target;
  }
  EXPECT_EQ(f.hit, "");
  PathParams p;
  EXPECT_EQ(f.router.Match("POST", "/api/v1/worker/a%2Fb/heartbeat", p), nullptr);
  EXPECT_NE(f.router.Match("POST", "/api/v1/worker/a%2Db/heartbeat", p), nullptr);
  EXPECT_EQ(p.at("id"), "a-b");
}

}  // namespace
}  // namespace edge::http
