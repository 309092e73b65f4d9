// WebSockets on the edge_http Server, against a Boost.Beast client on loopback (ports picked
// at run time): upgrade and echo in order, refusals before the upgrade as HTTP statuses, bad
// upgrade requests, binary (1003), oversize (1009) and invalid UTF-8 (1007) messages, pings
// keeping a responsive client open and an idle client closed (1001), SendText from many
// threads, a slow reader growing the queue without blocking the sender, a stalled write
// dropping the connection, Server::Stop (1001), max_connections, and TLS. The WebSocket
// timers run on a ManualClock the tests advance; no test sleeps to make time pass.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"
#include "http/client.h"
#include "http/server.h"
#include "http/websocket.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace edge::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace bws = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using edge::testing::WaitUntil;
using namespace std::chrono_literals;

// ---- the server side: a handler that records what its socket saw ----
class Recorder final : public WebSocketHandler {
 public:
  explicit Recorder(bool echo) : echo_(echo) {}
  void OnText(std::string text) override {
    std::shared_ptr<WebSocket> ws;
    {
      std::lock_guard lock(mu_);
      texts_.push_back(text);
      ws = ws_;
    }
    if (echo_ && ws) {
      EXPECT_TRUE(ws->SendText(std::move(text)));
    }
  }
  void OnClosed(uint16_t code, std::string reason) override {
    std::lock_guard lock(mu_);
    ++closes_;
    code_ = code;
    reason_ = std::move(reason);
  }
  void set_socket(std::shared_ptr<WebSocket> ws) {
    std::lock_guard lock(mu_);
    ws_ = std::move(ws);
  }
  std::shared_ptr<WebSocket> socket() const {
    std::lock_guard lock(mu_);
    return ws_;
  }
  std::vector<std::string> texts() const {
    std::lock_guard lock(mu_);
    return texts_;
  }
  int closes() const {
    std::lock_guard lock(mu_);
    return closes_;
  }
  uint16_t code() const {
    std::lock_guard lock(mu_);
    return code_;
  }
  std::string reason() const {
    std::lock_guard lock(mu_);
    return reason_;
  }

 private:
  const bool echo_;
  mutable std::mutex mu_;
  std::shared_ptr<WebSocket> ws_;
  std::vector<std::string> texts_;
  int closes_ = 0;
  uint16_t code_ = 0;
  std::string reason_;
};

// ---- the client side: a Beast WebSocket client whose every wait is bounded ----
template <class Next>
class BasicWsClient {
 public:
  template <class... Args>
  explicit BasicWsClient(Args&&... args) : ws_(io_, std::forward<Args>(args)...) {}

  // Connects the TCP socket (with a small receive buffer when asked: a reader that stops
  // reading then stalls the server's writes quickly).
  void ConnectTcp(uint16_t port, int rcvbuf = 0) {
    auto& sock = beast::get_lowest_layer(ws_).socket();
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    if (rcvbuf > 0)
      ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  }
  // The WebSocket handshake; `response` gets the server's answer (101, or a refusal).
  beast::error_code Handshake(const std::string& target, bws::response_type* response = nullptr) {
    bws::response_type ignored;
    auto& res = response ? *response : ignored;
    return Await([&](auto handler) { ws_.async_handshake(res, "127.0.0.1", target, handler); });
  }
  beast::error_code Write(const std::string& text, bool binary = false) {
    ws_.binary(binary);
    return Await([&](auto handler) { ws_.async_write(net::buffer(text), handler); });
  }
  // The next message, or the error that ended the read (bws::error::closed: see reason()).
  Result<std::string> Read(std::chrono::seconds limit = 30s) {
    beast::flat_buffer buf;
    auto ec = Await([&](auto handler) { ws_.async_read(buf, handler); }, limit);
    if (ec) return MakeError(ErrorCode::kUnavailable, ec.message());
    return beast::buffers_to_string(buf.data());
  }
  // Reads until the connection ends; true when it ended with the peer's close frame.
  bool ReadUntilClosed() {
    while (true) {
      beast::flat_buffer buf;
      auto ec = Await([&](auto handler) { ws_.async_read(buf, handler); });
      if (ec) return ec == bws::error::closed;
    }
  }
  beast::error_code Close(uint16_t code, const std::string& reason) {
    return Await([&](auto handler) {
      ws_.async_close(bws::close_reason(static_cast<bws::close_code>(code), reason), handler);
    });
  }
  uint16_t close_code() const { return static_cast<uint16_t>(ws_.reason().code); }
  std::string close_reason() const {
    return std::string(ws_.reason().reason.data(), ws_.reason().reason.size());
  }
  bws::stream<Next>& ws() { return ws_; }
  tcp::socket& socket() { return beast::get_lowest_layer(ws_).socket(); }

  // Runs one asynchronous operation on the client's own io_context, at most `limit`.
  template <class Start>
  beast::error_code Await(Start start, std::chrono::seconds limit = 30s) {
    std::optional<beast::error_code> result;
    start([&](beast::error_code ec, auto&&...) { result = ec; });
    io_.restart();
    io_.run_for(limit);
    if (!result) {
      beast::error_code ignored;
      socket().close(ignored);
      io_.restart();
      io_.run();
      return net::error::timed_out;
    }
    return *result;
  }

 protected:
  net::io_context io_;
  bws::stream<Next> ws_;
};
using WsClient = BasicWsClient<beast::tcp_stream>;

// The frames a server sent (unmasked; payloads below 126 bytes), read raw from the socket of
// a client that never read them: "ping", "close <code> <reason>", ...
std::vector<std::string> RawServerFrames(tcp::socket& sock) {
  std::string bytes;
  char buf[4096];
  beast::error_code ec;
  while (true) {
    size_t n = sock.read_some(net::buffer(buf), ec);
    if (ec) break;
    bytes.append(buf, n);
  }
  std::vector<std::string> frames;
  size_t i = 0;
  while (i + 2 <= bytes.size()) {
    const int opcode = bytes[i] & 0x0f;
    const size_t len = static_cast<unsigned char>(bytes[i + 1]) & 0x7f;
    if (len >= 126 || i + 2 + len > bytes.size()) break;
    const std::string payload = bytes.substr(i + 2, len);
    if (opcode == 0x9) {
      frames.push_back("ping");
    } else if (opcode == 0x8 && len >= 2) {
      const int code =
          (static_cast<unsigned char>(payload[0]) << 8) | static_cast<unsigned char>(payload[1]);
      frames.push_back("close " + std::to_string(code) + " " + payload.substr(2));
    } else {
      frames.push_back("opcode " + std::to_string(opcode));
    }
    i += 2 + len;
  }
  return frames;
}

class FnHandler : public Handler {
 public:
  std::function<void(std::shared_ptr<Exchange>)> fn;
  void Handle(std::shared_ptr<Exchange> ex) override { fn(std::move(ex)); }
};

class WebSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handler_.fn = [this](std::shared_ptr<Exchange> ex) { Route(std::move(ex)); };
  }
  void Route(std::shared_ptr<Exchange> ex) {
    const std::string path(ex->request().Path());
    if (path == "/refuse") {
      ex->Respond({.status = 401,
                   .headers = {{"WWW-Authenticate", "Bearer"}},
                   .body = R"({"code":"UNAUTHENTICATED","message":"bad ticket"})"});
      return;
    }
    if (path == "/answered") {
      ex->Respond({.status = 200, .body = "{}"});
      auto r = ex->AcceptWebSocket(ws_options_, std::make_shared<Recorder>(true));
      std::lock_guard lock(mu_);
      accept_errors_.push_back(r ? Error{} : r.error());
      return;
    }
    auto rec = std::make_shared<Recorder>(/*echo=*/path == "/echo");
    auto ws = ex->AcceptWebSocket(ws_options_, rec);
    std::lock_guard lock(mu_);
    if (!ws) {
      accept_errors_.push_back(ws.error());
      return;
    }
    rec->set_socket(*ws);
    accepted_.push_back(rec);
  }

  void Start(ServerOptions options = {}) {
    options.clock = &clock_;
    server_ = std::make_unique<Server>(io_, options, handler_);
    auto st = server_->Listen("127.0.0.1:0");
    ASSERT_TRUE(st) << st.error().message;
    work_.emplace(io_.get_executor());
    for (int i = 0; i < 2; ++i)
      threads_.emplace_back([this] { io_.run(); });
  }
  void TearDown() override {
    if (server_) server_->Stop();
    work_.reset();
    WaitUntil([&] { return !server_ || server_->connections() == 0; }, 10s);
    io_.stop();
    for (auto& t : threads_)
      t.join();
  }

  // The n-th socket accepted (0-based), once the handler has it.
  std::shared_ptr<Recorder> Accepted(size_t n) {
    EXPECT_TRUE(WaitUntil([&] {
      std::lock_guard lock(mu_);
      return accepted_.size() > n;
    }));
    std::lock_guard lock(mu_);
    return accepted_.size() > n ? accepted_[n] : nullptr;
  }
  std::vector<Error> accept_errors() {
    std::lock_guard lock(mu_);
    return accept_errors_;
  }
  // A client connected and upgraded on `target`.
  std::unique_ptr<WsClient> Open(const std::string& target = "/echo", int rcvbuf = 0) {
    auto c = std::make_unique<WsClient>();
    c->ConnectTcp(server_->port(), rcvbuf);
    auto ec = c->Handshake(target);
    EXPECT_FALSE(ec) << ec.message();
    return c;
  }
  // Until the server's writes to a reader that stopped make no progress.
  static void WaitStalled(const std::shared_ptr<WebSocket>& ws) {
    ASSERT_TRUE(WaitUntil([&] {
      const size_t before = ws->queued_bytes();
      std::this_thread::sleep_for(200ms);
      return ws->queued_bytes() == before;
    }));
  }

  ManualClock clock_;  // first: outlives the io_context's handlers
  net::io_context io_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  FnHandler handler_;
  std::unique_ptr<Server> server_;
  WebSocketOptions ws_options_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Recorder>> accepted_;
  std::vector<Error> accept_errors_;
};

TEST_F(WebSocketTest, UpgradesAndEchoesManyMessagesInOrder) {
  Start();
  auto client = Open("/echo");
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  EXPECT_TRUE(WaitUntil([&] { return server_->connections() == 1; }));
  EXPECT_EQ(rec->socket()->remote().rfind("127.0.0.1:", 0), 0u);
  const int kCount = 300;
  for (int i = 0; i < kCount; ++i) {
    // Sizes from 0 bytes to ~70 KiB (several frames, several reads).
    ASSERT_FALSE(client->Write("m" + std::to_string(i) + std::string(i * 233 % 70'000, 'x')));
  }
  for (int i = 0; i < kCount; ++i) {
    auto m = client->Read();
    ASSERT_TRUE(m) << i << ": " << m.error().message;
    ASSERT_EQ(*m, "m" + std::to_string(i) + std::string(i * 233 % 70'000, 'x'));
  }
  EXPECT_EQ(rec->texts().size(), static_cast<size_t>(kCount));
  EXPECT_TRUE(WaitUntil([&] { return rec->socket()->queued_messages() == 0; }));
  EXPECT_EQ(rec->socket()->queued_bytes(), 0u);
  // The client closes: the handler learns its code and reason, once.
  ASSERT_FALSE(client->Close(1000, "bye"));
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), 1000);
  EXPECT_EQ(rec->reason(), "bye");
  EXPECT_TRUE(rec->socket()->closed());
  auto late = rec->socket()->SendText("late");
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(WaitUntil([&] { return server_->connections() == 0; }));
}

TEST_F(WebSocketTest, ServerCloseWithItsCodeAndInvalidUtf8IsRefusedBySendText) {
  Start();
  auto client = Open("/quiet");
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  auto bad = rec->socket()->SendText(std::string("ok\xff", 3));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message,
            "a WebSocket text message must be valid UTF-8; byte 2 of 3 is not");
  // Close (kFlush) sends what is queued first, then the close frame.
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(rec->socket()->SendText("m" + std::to_string(i)));
  rec->socket()->Close(4000, "session ended");
  rec->socket()->Close(4001, "ignored: the first Close wins");
  rec->socket()->Close(close_code::kAbnormal, "ignored too");
  EXPECT_FALSE(rec->socket()->SendText("after Close"));
  for (int i = 0; i < 100; ++i) {
    auto m = client->Read();
    ASSERT_TRUE(m) << i << ": " << m.error().message;
    EXPECT_EQ(*m, "m" + std::to_string(i));
  }
  EXPECT_TRUE(client->ReadUntilClosed());
  EXPECT_EQ(client->close_code(), 4000);
  EXPECT_EQ(client->close_reason(), "session ended");
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), 4000);
}

TEST_F(WebSocketTest, ACloseCodeThatMayNotBeSentIsSentAs1011) {
  Start();
  auto client = Open("/quiet");
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  rec->socket()->Close(close_code::kAbnormal, "1006 is for reporting only");
  EXPECT_TRUE(client->ReadUntilClosed());
  EXPECT_EQ(client->close_code(), close_code::kInternalError);
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), close_code::kInternalError);
}

TEST_F(WebSocketTest, TheUpgradeIsLoggedWithoutItsQueryWhereATicketTravels) {
  std::mutex mu;
  std::vector<std::string> lines;
  log::Init({.level = spdlog::level::debug, .writer = [&](std::string_view l) {
               std::lock_guard lock(mu);
               lines.emplace_back(l);
             }});
  Start();
  auto client = Open("/echo?ticket=s3cr3t-t1cket-value&session_id=s-1");
  ASSERT_TRUE(client);
  const bool logged = WaitUntil([&] {
    std::lock_guard lock(mu);
    for (const auto& l : lines)
      if (l.find("upgrading to a WebSocket") != std::string::npos) return true;
    return false;
  });
  std::vector<std::string> seen;
  {
    std::lock_guard lock(mu);
    seen = lines;
  }
  log::Init({});
  EXPECT_TRUE(logged);
  for (const auto& l : seen) {
    EXPECT_EQ(l.find("s3cr3t-t1cket-value"), std::string::npos) << l;
    if (l.find("upgrading") != std::string::npos) {
      EXPECT_NE(l.find("GET /echo from"), std::string::npos) << l;
    }
  }
}

TEST_F(WebSocketTest, ARefusalBeforeTheUpgradeIsAnHttpStatus) {
  Start();
  WsClient client;
  client.ConnectTcp(server_->port());
  bws::response_type res;
  auto ec = client.Handshake("/refuse?ticket=used", &res);
  EXPECT_EQ(ec, bws::error::upgrade_declined);
  EXPECT_EQ(res.result_int(), 401u);
  EXPECT_EQ(res[bhttp::field::www_authenticate], "Bearer");
  EXPECT_NE(res.body().find("UNAUTHENTICATED"), std::string::npos);
  EXPECT_TRUE(accept_errors().empty());
}

TEST_F(WebSocketTest, ARequestThatIsNotAnUpgradeGets400AndTheHandlerAnError) {
  Start();
  auto c = Client::Connect("127.0.0.1", server_->port(), {.timeout = 20s});
  ASSERT_TRUE(c);
  auto r = (*c)->Send({.method = "GET", .target = "/echo"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 400u);
  EXPECT_NE(r->body.find("not a valid WebSocket upgrade request: no \\\"Upgrade: websocket\\\" "
                         "header"),
            std::string::npos)
      << r->body;
  EXPECT_EQ(FindHeader(r->headers, "Sec-WebSocket-Version").value_or(""), "13");
  auto c2 = Client::Connect("127.0.0.1", server_->port(), {.timeout = 20s});
  ASSERT_TRUE(c2);
  auto post = (*c2)->Send({.method = "POST",
                           .target = "/echo",
                           .headers = {{"Upgrade", "websocket"},
                                       {"Connection", "Upgrade"},
                                       {"Sec-WebSocket-Version", "13"},
                                       {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}}});
  ASSERT_TRUE(post) << post.error().message;
  EXPECT_EQ(post->status, 400u);
  EXPECT_NE(post->body.find("the method is POST, not GET"), std::string::npos) << post->body;
  auto errors = accept_errors();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(errors[1].code, ErrorCode::kInvalidArgument);
}

TEST_F(WebSocketTest, AnExchangeAnsweredAlreadyCannotBecomeAWebSocket) {
  Start();
  WsClient client;
  client.ConnectTcp(server_->port());
  bws::response_type res;
  EXPECT_EQ(client.Handshake("/answered", &res), bws::error::upgrade_declined);
  EXPECT_EQ(res.result_int(), 200u);
  ASSERT_TRUE(WaitUntil([&] { return accept_errors().size() == 1; }));
  EXPECT_EQ(accept_errors()[0].code, ErrorCode::kFailedPrecondition);
}

TEST_F(WebSocketTest, BytesBeforeTheHandshakeAnswerAre400) {
  Start();
  net::io_context io;
  tcp::socket s(io);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()));
  // A frame pipelined behind the upgrade request (RFC 6455 §4.1 forbids it).
  net::write(s, net::buffer(std::string("GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                                        "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                                        "\x81\x80xxxx")));
  std::string out;
  char buf[4096];
  beast::error_code ec;
  while (true) {
    size_t n = s.read_some(net::buffer(buf), ec);
    if (ec) break;
    out.append(buf, n);
  }
  EXPECT_TRUE(out.starts_with("HTTP/1.1 400 ")) << out;
  EXPECT_NE(out.find("data arrived after the upgrade request"), std::string::npos) << out;
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), close_code::kAbnormal);
}

TEST_F(WebSocketTest, ABinaryMessageClosesWith1003) {
  Start();
  auto client = Open("/echo");
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  ASSERT_FALSE(client->Write("\x01\x02", /*binary=*/true));
  EXPECT_TRUE(client->ReadUntilClosed());
  EXPECT_EQ(client->close_code(), 1003);
  EXPECT_EQ(client->close_reason(), "binary messages are not accepted");
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), close_code::kUnsupportedData);
  EXPECT_TRUE(rec->texts().empty());
}

TEST_F(WebSocketTest, AMessageAboveMaxFrameSizeClosesWith1009) {
  ws_options_.max_frame_size = 1000;
  Start();
  auto client = Open("/echo");
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  ASSERT_FALSE(client->Write(std::string(1000, 'a')));  // at the limit: fine
  auto echoed = client->Read();
  ASSERT_TRUE(echoed);
  EXPECT_EQ(echoed->size(), 1000u);
  // 1001 bytes in frames of 256: the limit is on the whole message.
  client->ws().auto_fragment(true);
  client->ws().write_buffer_bytes(256);
  ASSERT_FALSE(client->Write(std::string(1001, 'b')));
  EXPECT_TRUE(client->ReadUntilClosed());
  EXPECT_EQ(client->close_code(), 1009);
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), close_code::kTooBig);
  EXPECT_EQ(rec->texts().size(), 1u);
}

TEST_F(WebSocketTest, InvalidUtf8InATextMessageClosesWith1007) {
  Start();
  auto client = Open("/echo");
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  ASSERT_FALSE(client->Write(std::string("bad \xc3\x28", 6)));
  EXPECT_TRUE(client->ReadUntilClosed());
  EXPECT_EQ(client->close_code(), 1007);
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), close_code::kInvalidPayload);
  EXPECT_TRUE(rec->texts().empty());
}

TEST_F(WebSocketTest, PingsKeepAResponsiveClientOpen) {
  ws_options_.ping_interval = 10s;
  ws_options_.idle_timeout = 30s;
  Start();
  auto client = Open("/quiet");
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  auto ws = rec->socket();
  // The client reads all along: Beast answers each ping with a pong while it reads.
  std::vector<std::string> got;
  std::thread reader([&] {
    while (auto m = client->Read(60s))
      got.push_back(*m);
  });
  // 100 s of silence but for pongs, well past the 30 s idle timeout.
  for (uint64_t i = 1; i <= 10; ++i) {
    clock_.Advance(10s);
    if (!WaitUntil([&] { return ws->pongs_received() >= i; })) {
      ADD_FAILURE() << "no pong for ping " << i;
      break;
    }
  }
  EXPECT_FALSE(ws->closed());
  EXPECT_EQ(rec->closes(), 0);
  ASSERT_TRUE(ws->SendText("still here"));
  ws->Close(1000, "done");
  reader.join();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "still here");
  EXPECT_EQ(client->close_code(), 1000);
}

TEST_F(WebSocketTest, AClientThatStopsAnsweringIsClosedAfterTheIdleTimeout) {
  ws_options_.ping_interval = 10s;
  ws_options_.idle_timeout = 30s;
  ws_options_.close_timeout = 5s;
  Start();
  auto client = Open("/quiet");  // never reads again: no pongs
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  auto& sock = client->socket();
  // A ping at 10 s and at 20 s (2 bytes each), still open at 20 s.
  clock_.Advance(10s);
  ASSERT_TRUE(WaitUntil([&] { return sock.available() >= 2; }));
  clock_.Advance(10s);
  ASSERT_TRUE(WaitUntil([&] { return sock.available() >= 4; }));
  EXPECT_EQ(rec->closes(), 0);
  // 30 s: the close frame (1001 "idle timeout": 2 + 2 + 12 bytes).
  clock_.Advance(10s);
  ASSERT_TRUE(WaitUntil([&] { return sock.available() >= 20; }));
  EXPECT_EQ(rec->closes(), 0);  // waiting for the close handshake
  // No answer within close_timeout: the connection is dropped, with our code.
  clock_.Advance(5s);
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), close_code::kGoingAway);
  EXPECT_EQ(rec->reason(), "idle timeout");
  EXPECT_EQ(RawServerFrames(sock),
            (std::vector<std::string>{"ping", "ping", "close 1001 idle timeout"}));
  EXPECT_TRUE(WaitUntil([&] { return server_->connections() == 0; }));
}

TEST_F(WebSocketTest, SendTextFromManyThreadsKeepsEachThreadsOrder) {
  Start();
  auto client = Open("/quiet");
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  auto ws = rec->socket();
  const int kThreads = 4, kEach = 200;
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([ws, t] {
      for (int i = 0; i < kEach; ++i)
        EXPECT_TRUE(ws->SendText(std::to_string(t) + ":" + std::to_string(i)));
    });
  }
  std::vector<int> next(kThreads, 0);
  for (int n = 0; n < kThreads * kEach; ++n) {
    auto m = client->Read();
    ASSERT_TRUE(m) << m.error().message;
    const int t = std::stoi(m->substr(0, m->find(':')));
    const int i = std::stoi(m->substr(m->find(':') + 1));
    ASSERT_EQ(i, next[t]) << "thread " << t;
    ++next[t];
  }
  for (auto& s : senders)
    s.join();
  EXPECT_EQ(next, std::vector<int>(kThreads, kEach));
}

TEST_F(WebSocketTest, ASlowReaderGrowsTheQueueWithoutBlockingSendText) {
  Start();
  auto client = Open("/quiet", /*rcvbuf=*/64 << 10);
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  auto ws = rec->socket();
  // 8 MiB: more than the kernel buffers of this connection hold (4 MiB + 64 KiB).
  const std::string chunk(256 << 10, 'z');
  for (int i = 0; i < 32; ++i)
    ASSERT_TRUE(ws->SendText(std::to_string(i) + chunk));
  WaitStalled(ws);
  EXPECT_GE(ws->queued_bytes(), 2u << 20);
  EXPECT_GE(ws->queued_messages(), 8u);
  // Still accepted at once while the writes are stalled.
  ASSERT_TRUE(ws->SendText("last"));
  // The reader catches up: everything arrives, in order, and the queue drains.
  for (int i = 0; i < 32; ++i) {
    auto m = client->Read();
    ASSERT_TRUE(m) << m.error().message;
    ASSERT_EQ(*m, std::to_string(i) + chunk);
  }
  auto last = client->Read();
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, "last");
  EXPECT_TRUE(WaitUntil([&] { return ws->queued_bytes() == 0 && ws->queued_messages() == 0; }));
}

TEST_F(WebSocketTest, CloseWithDropSkipsTheBacklogOfASlowReader) {
  Start();
  auto client = Open("/quiet", /*rcvbuf=*/64 << 10);
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  auto ws = rec->socket();
  const std::string chunk(256 << 10, 'z');
  for (int i = 0; i < 32; ++i)
    ASSERT_TRUE(ws->SendText(chunk));
  WaitStalled(ws);
  ws->Close(close_code::kTryAgainLater, "too slow", WebSocket::Pending::kDrop);
  EXPECT_LE(ws->queued_messages(), 1u);  // the one being written, at most
  // The reader wakes up: what the kernel held and the message in flight, then 1013.
  int received = 0;
  while (auto m = client->Read())
    ++received;
  EXPECT_LT(received, 32);
  EXPECT_EQ(client->close_code(), close_code::kTryAgainLater);
  EXPECT_EQ(client->close_reason(), "too slow");
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), close_code::kTryAgainLater);
  EXPECT_EQ(ws->queued_bytes(), 0u);
}

TEST_F(WebSocketTest, AWriteWithoutProgressForWriteTimeoutDropsTheConnection) {
  ws_options_.ping_interval = 1h;
  ws_options_.idle_timeout = 2h;
  ServerOptions o;
  o.write_timeout = 5s;  // on the manual clock for WebSockets
  Start(o);
  auto client = Open("/quiet", /*rcvbuf=*/64 << 10);
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  auto ws = rec->socket();
  const std::string chunk(256 << 10, 'z');
  for (int i = 0; i < 32; ++i)
    ASSERT_TRUE(ws->SendText(chunk));
  WaitStalled(ws);
  EXPECT_EQ(rec->closes(), 0);
  ASSERT_TRUE(WaitUntil([&] {
    clock_.Advance(6s);
    return rec->closes() == 1;
  }));
  EXPECT_EQ(rec->code(), close_code::kAbnormal);
  EXPECT_TRUE(ws->closed());
  EXPECT_FALSE(ws->SendText("x"));
  EXPECT_TRUE(WaitUntil([&] { return ws->queued_bytes() == 0 && server_->connections() == 0; }));
}

TEST_F(WebSocketTest, StopClosesWebSocketsWith1001AndCallsNoHandlerAfterwards) {
  Start();
  auto a = Open("/echo");
  auto b = Open("/quiet");
  auto ra = Accepted(0), rb = Accepted(1);
  ASSERT_TRUE(ra && rb);
  EXPECT_EQ(server_->connections(), 2u);
  server_->Stop();
  EXPECT_TRUE(a->ReadUntilClosed());
  EXPECT_EQ(a->close_code(), 1001);
  EXPECT_EQ(a->close_reason(), "server stopping");
  EXPECT_TRUE(b->ReadUntilClosed());
  EXPECT_EQ(b->close_code(), 1001);
  EXPECT_TRUE(WaitUntil([&] { return server_->connections() == 0; }));
  EXPECT_EQ(ra->closes(), 0);
  EXPECT_EQ(rb->closes(), 0);
  EXPECT_TRUE(ra->socket()->closed());
}

TEST_F(WebSocketTest, WebSocketsCountTowardMaxConnections) {
  ServerOptions o;
  o.max_connections = 2;
  Start(o);
  auto a = Open("/echo");
  auto b = Open("/echo");
  ASSERT_TRUE(Accepted(1));
  EXPECT_EQ(server_->connections(), 2u);
  // A third connection is closed at once.
  WsClient c;
  c.ConnectTcp(server_->port());
  EXPECT_TRUE(c.Handshake("/echo"));
  // One WebSocket ends: there is room again.
  ASSERT_FALSE(a->Close(1000, ""));
  ASSERT_TRUE(WaitUntil([&] { return server_->connections() == 1; }));
  auto d = Open("/echo");
  ASSERT_FALSE(d->Write("hi"));
  auto m = d->Read();
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, "hi");
}

TEST(CheckWebSocketUpgradeTest, ValidAndEveryWayToBeInvalid) {
  const Request good{.method = "GET",
                     .target = "/ws",
                     .headers = {{"Host", "x"},
                                 {"upgrade", "WebSocket"},
                                 {"Connection", "keep-alive, Upgrade"},
                                 {"Sec-WebSocket-Version", "13"},
                                 {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}}};
  EXPECT_TRUE(CheckWebSocketUpgrade(good));
  auto with = [&](std::string name, std::string value) {
    Request r = good;
    for (auto& [k, v] : r.headers) {
      if (k == name) v = value;
    }
    return r;
  };
  auto message = [](const Request& r) {
    auto st = CheckWebSocketUpgrade(r);
    EXPECT_FALSE(st);
    if (st) return std::string();
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    return st.error().message;
  };
  Request post = good;
  post.method = "POST";
  EXPECT_EQ(message(post), "not a valid WebSocket upgrade request: the method is POST, not GET");
  Request http10 = good;
  http10.version = 10;
  EXPECT_EQ(message(http10), "not a valid WebSocket upgrade request: it needs HTTP/1.1");
  EXPECT_EQ(message(with("upgrade", "h2c")),
            "not a valid WebSocket upgrade request: no \"Upgrade: websocket\" header");
  EXPECT_EQ(message(with("Connection", "keep-alive")),
            "not a valid WebSocket upgrade request: the Connection header does not list "
            "\"upgrade\"");
  EXPECT_EQ(message(with("Sec-WebSocket-Version", "8")),
            "not a valid WebSocket upgrade request: Sec-WebSocket-Version is \"8\"; only 13 is "
            "spoken");
  EXPECT_EQ(message(with("Sec-WebSocket-Key", "short==")),
            "not a valid WebSocket upgrade request: Sec-WebSocket-Key \"short==\" is not 16 bytes "
            "in base64 (24 characters ending in \"==\")");
  EXPECT_EQ(message(with("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZ$==")),
            "not a valid WebSocket upgrade request: Sec-WebSocket-Key "
            "\"dGhlIHNhbXBsZSBub25jZ$==\" is not 16 bytes in base64 (24 characters ending in "
            "\"==\")");
  Request no_key = good;
  no_key.headers.pop_back();
  EXPECT_EQ(message(no_key), "not a valid WebSocket upgrade request: no Sec-WebSocket-Key header");
}

// ---- TLS ----
class WebSocketTlsTest : public WebSocketTest {
 protected:
  void SetUp() override {
    WebSocketTest::SetUp();
    const std::string cmd =
        "cd '" + dir_.path() +
        "' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout key.pem -out cert.pem -days 2 -subj /CN=localhost "
        "-addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  edge::testing::TempDir dir_{"ws-tls"};
};

TEST_F(WebSocketTlsTest, UpgradeAndEchoOverTls) {
  ServerOptions o;
  o.tls = TlsFiles{dir_ / "cert.pem", dir_ / "key.pem", ""};
  Start(o);
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(dir_ / "cert.pem");
  ctx.set_verify_mode(ssl::verify_peer);
  BasicWsClient<beast::ssl_stream<beast::tcp_stream>> client(ctx);
  client.ConnectTcp(server_->port());
  auto& tls = client.ws().next_layer();
  tls.set_verify_callback(ssl::host_name_verification("localhost"));
  ASSERT_TRUE(SSL_set_tlsext_host_name(tls.native_handle(), "localhost"));
  auto ec = client.Await([&](auto h) { tls.async_handshake(ssl::stream_base::client, h); });
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_FALSE(client.Handshake("/echo"));
  auto rec = Accepted(0);
  ASSERT_TRUE(rec);
  for (int i = 0; i < 50; ++i)
    ASSERT_FALSE(client.Write("tls " + std::to_string(i)));
  for (int i = 0; i < 50; ++i) {
    auto m = client.Read();
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_EQ(*m, "tls " + std::to_string(i));
  }
  // A binary message is refused over TLS too, and the close handshake completes.
  ASSERT_FALSE(client.Write("b", /*binary=*/true));
  EXPECT_TRUE(client.ReadUntilClosed());
  EXPECT_EQ(client.close_code(), 1003);
  ASSERT_TRUE(WaitUntil([&] { return rec->closes() == 1; }));
  EXPECT_EQ(rec->code(), close_code::kUnsupportedData);
}

}  // namespace
}  // namespace edge::http
