// OperatorFixture: an EdgeFixture whose controller serves the operator API on a loopback
// HTTP port picked at run time, with user tokens minted by `edge-controller user token
// create` and a plain HTTP client; plus WsClient, a blocking WebSocket client (Boost.Beast)
// for the session relay. Test code only.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "http/client.h"
#include "tests/integration/edge_fixture.h"

namespace edge::testing {

class OperatorFixture : public EdgeFixture {
 protected:
  void SetUp() override { StartControllerWithHttp(""); }
  // Replaces the controller with one whose http section is "listen: 127.0.0.1:0" plus
  // `extra_http` (indented YAML lines), and waits for its port.
  void StartControllerWithHttp(const std::string& extra_http, const std::string& extra = "") {
    ctl_ = std::make_unique<ControllerFixture>(
        dir_, "ctl", "http:\n  listen: 127.0.0.1:0\n" + extra_http + extra);
    http_port_ = ctl_->WaitForHttpPort();
    ASSERT_NE(http_port_, 0) << ctl_->process().Stderr();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "controller stderr:\n" << ctl_->process().Stderr() << "\n";
    EdgeFixture::TearDown();
  }

  // `user token create --format json`: the token.
  std::string UserToken(const std::string& user, const std::string& tenant,
                        const std::string& ttl = "1h") {
    auto r = Ctl({"user", "token", "create", "--user", user, "--tenant", tenant, "--ttl", ttl,
                  "--format", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out;
    return j.is_object() ? j.value("token", "") : "";
  }
  // One request on a fresh connection; `token` "" = no Authorization header.
  http::Response Http(const std::string& method, const std::string& target,
                      const std::string& token, const std::string& body = "",
                      http::Headers headers = {}) {
    auto c = http::Client::Connect("127.0.0.1", http_port_, {.timeout = 30s});
    EXPECT_TRUE(c) << (c ? "" : c.error().message);
    if (!c) return {.status = 0};
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
    auto r = (*c)->Send({.method = method, .target = target, .headers = headers, .body = body});
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? *r : http::Response{.status = 0};
  }
  static nlohmann::json Body(const http::Response& r) {
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    return j.is_discarded() ? nlohmann::json() : j;
  }

  uint16_t http_port_ = 0;
};

// A blocking WebSocket client on loopback: Open answers the HTTP status of a refused upgrade
// (101 when it was accepted); Read waits at most `timeout` for the next text frame.
class WsClient {
 public:
  // `rcvbuf` > 0: the socket's SO_RCVBUF, set before it connects (a reader that stalls
  // then backs up into the server sooner).
  unsigned Open(uint16_t port, const std::string& target, const std::string& origin = "",
                int rcvbuf = 0) {
    namespace beast = boost::beast;
    boost::beast::error_code ec;
    auto& sock = ws_.next_layer();
    sock.open(boost::asio::ip::tcp::v4(), ec);
    if (ec) return 0;
    if (rcvbuf > 0) setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
    if (ec) return 0;
    ws_.set_option(
        beast::websocket::stream_base::decorator([origin](beast::websocket::request_type& req) {
          if (!origin.empty()) req.set(beast::http::field::origin, origin);
        }));
    // The asynchronous handshake fills `res` with a refusal too (the blocking one does not).
    beast::websocket::response_type res;
    ws_.async_handshake(res, "127.0.0.1:" + std::to_string(port), target,
                        [&ec](beast::error_code e) { ec = e; });
    io_.restart();
    io_.run();
    if (ec) return res.result_int() == 101 ? 0 : res.result_int();
    return 101;
  }
  void Send(const std::string& text) {
    boost::beast::error_code ec;
    ws_.text(true);
    ws_.write(boost::asio::buffer(text), ec);
  }
  // The next frame as JSON; nullopt on timeout or close (then close_code() says which).
  std::optional<nlohmann::json> Read(std::chrono::milliseconds timeout = 30s) {
    timeval tv{.tv_sec = static_cast<time_t>(timeout.count() / 1000),
               .tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
    setsockopt(ws_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    boost::beast::flat_buffer buf;
    boost::beast::error_code ec;
    ws_.read(buf, ec);
    if (ec) {
      close_code_ = ws_.reason().code;
      return std::nullopt;
    }
    auto j = nlohmann::json::parse(boost::beast::buffers_to_string(buf.data()), nullptr, false);
    return j.is_discarded() ? std::nullopt : std::optional(j);
  }
  // Reads until a frame for which `pred` is true (nullopt after `timeout` in all).
  template <typename Pred>
  std::optional<nlohmann::json> ReadUntil(Pred pred, std::chrono::milliseconds timeout = 30s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      auto f = Read(std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now() + 1ms));
      if (!f) return std::nullopt;
      seen.push_back(*f);
      if (pred(*f)) return f;
    }
    return std::nullopt;
  }
  int close_code() const { return close_code_; }

  std::vector<nlohmann::json> seen;  // every frame ReadUntil read

 private:
  boost::asio::io_context io_;
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket> ws_{io_};
  int close_code_ = 0;
};

}  // namespace edge::testing
