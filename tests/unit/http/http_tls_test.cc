// edge_http over TLS and mutual TLS, with certificates made by the openssl command line in a
// temp dir: TLS works and the client verifies the server; with a client CA the server
// requires a client certificate and refuses one from another CA.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <thread>

#include "http/client.h"
#include "http/server.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace edge::http {
namespace {

using edge::testing::WaitUntil;
using namespace std::chrono_literals;

class Echo : public Handler {
 public:
  void Handle(std::shared_ptr<Exchange> ex) override {
    if (ex->request().target == "/stream") {  // the body back in two chunks
      const std::string& b = ex->request().body;
      ex->BeginStream(200, {}, "application/octet-stream");
      ex->WriteChunk(b.substr(0, b.size() / 3), nullptr);
      ex->WriteChunk(b.substr(b.size() / 3), nullptr);
      return ex->EndStream();
    }
    ex->Respond({.body = "tls:" + ex->request().body, .content_type = "text/plain"});
  }
};

// A CA and a certificate it signs for `name` (server: SAN 127.0.0.1 / localhost).
void MakeCa(const std::string& dir, const std::string& ca) {
  const std::string cmd = "cd '" + dir +
                          "' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                          "-nodes -keyout " +
                          ca + ".key -out " + ca + ".pem -days 2 -subj /CN=" + ca +
                          " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}
void MakeCert(const std::string& dir, const std::string& ca, const std::string& name) {
  const std::string cmd =
      "cd '" + dir + "' && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes " +
      "-keyout " + name + ".key -out " + name + ".csr -subj /CN=" + name +
      " >/dev/null 2>&1 && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > " + name +
      ".ext && openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
      ".key -CAcreateserial -out " + name + ".pem -days 2 -extfile " + name +
      ".ext >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

class HttpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MakeCa(dir_.path(), "ca");
    MakeCa(dir_.path(), "otherca");
    MakeCert(dir_.path(), "ca", "server");
    MakeCert(dir_.path(), "ca", "client");
    MakeCert(dir_.path(), "otherca", "stranger");
  }
  void Start(bool mutual) {
    ServerOptions o;
    o.tls = TlsFiles{dir_ / "server.pem", dir_ / "server.key", mutual ? dir_ / "ca.pem" : ""};
    server_ = std::make_unique<Server>(io_, o, handler_);
    auto st = server_->Listen("127.0.0.1:0");
    ASSERT_TRUE(st) << st.error().message;
    work_.emplace(io_.get_executor());
    for (int i = 0; i < 2; ++i)
      threads_.emplace_back([this] { io_.run(); });
  }
  void TearDown() override {
    if (server_) server_->Stop();
    work_.reset();
    WaitUntil([&] { return !server_ || server_->connections() == 0; }, 5s);
    io_.stop();
    for (auto& t : threads_)
      t.join();
  }
  Result<Response> Call(ClientTls tls) {
    auto c = Client::Connect("127.0.0.1", server_->port(), {.timeout = 10s, .tls = tls});
    if (!c) return std::unexpected(c.error());
    return (*c)->Send({.method = "POST", .target = "/", .body = "hi"});
  }

  edge::testing::TempDir dir_{"http-tls"};
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  Echo handler_;
  std::unique_ptr<Server> server_;
};

TEST_F(HttpTlsTest, TlsAndTheClientVerifiesTheServer) {
  Start(false);
  auto r = Call({.ca_file = dir_ / "ca.pem", .server_name = "localhost"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->body, "tls:hi");
  // A client trusting another CA refuses the server.
  EXPECT_FALSE(Call({.ca_file = dir_ / "otherca.pem", .server_name = "localhost"}));
  // Plain HTTP to a TLS port gets no answer.
  auto plain = Client::Connect("127.0.0.1", server_->port(), {.timeout = 5s});
  ASSERT_TRUE(plain);
  EXPECT_FALSE((*plain)->Send({.method = "GET", .target = "/"}));
}

TEST_F(HttpTlsTest, MutualTlsRequiresAClientCertificateFromTheClientCa) {
  Start(true);
  auto ok = Call({.ca_file = dir_ / "ca.pem",
                  .cert_file = dir_ / "client.pem",
                  .key_file = dir_ / "client.key",
                  .server_name = "localhost"});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->body, "tls:hi");
  EXPECT_FALSE(Call({.ca_file = dir_ / "ca.pem", .server_name = "localhost"}));
  EXPECT_FALSE(Call({.ca_file = dir_ / "ca.pem",
                     .cert_file = dir_ / "stranger.pem",
                     .key_file = dir_ / "stranger.key",
                     .server_name = "localhost"}));
}

// Over TLS a write of any size goes out a record at a time: megabytes each way arrive whole,
// as one answer and as a chunked stream.
TEST_F(HttpTlsTest, MegabytesEachWayArriveWhole) {
  Start(false);
  std::string body((5u << 20) + 3, '\0');
  for (size_t i = 0; i < body.size(); ++i)
    body[i] = static_cast<char>(i % 251);
  auto c = Client::Connect(
      "127.0.0.1", server_->port(),
      {.timeout = 10s, .tls = ClientTls{.ca_file = dir_ / "ca.pem", .server_name = "localhost"}});
  ASSERT_TRUE(c) << c.error().message;
  auto r = (*c)->Send({.method = "POST", .target = "/", .body = body});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->body == "tls:" + body) << "the answer's " << r->body.size() << " bytes differ";
  // And as a streamed answer: each chunk's size line, bytes and CRLF in one gather write.
  std::string streamed;
  auto s = (*c)->SendStreaming({.method = "POST", .target = "/stream", .body = body},
                               [&](std::string_view d) {
                                 streamed.append(d);
                                 return true;
                               });
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(streamed == body) << "the stream's " << streamed.size() << " bytes differ";
}

// A TLS peer that closes its connection in the middle of an answer without TLS's close_notify
// (a worker that dies): the call says the answer was cut short and names the peer — for a short
// body, which beast's parser reads, and for one of megabytes, read straight into place.
TEST_F(HttpTlsTest, AnAnswerCutShortWithoutCloseNotifySaysSo) {
  namespace net = boost::asio;
  namespace ssl = net::ssl;
  ssl::context ctx(ssl::context::tls_server);
  ctx.use_certificate_chain_file(dir_ / "server.pem");
  ctx.use_private_key_file(dir_ / "server.key", ssl::context::pem);
  const std::vector<std::string> parts = {
      "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
      "HTTP/1.1 200 OK\r\nContent-Length: 4194304\r\n\r\n" + std::string(1 << 20, 'm')};
  for (const auto& part : parts) {
    SCOPED_TRACE(part.substr(0, 60));
    net::io_context io;
    net::ip::tcp::acceptor acceptor(io, {net::ip::make_address("127.0.0.1"), 0});
    const uint16_t port = acceptor.local_endpoint().port();
    std::thread peer([&] {
      ssl::stream<net::ip::tcp::socket> s(io, ctx);
      boost::system::error_code ec;
      acceptor.accept(s.next_layer(), ec);
      ASSERT_FALSE(ec) << ec.message();
      s.handshake(ssl::stream_base::server, ec);
      ASSERT_FALSE(ec) << ec.message();
      char buf[4096];
      s.read_some(net::buffer(buf), ec);  // the request
      ASSERT_FALSE(ec) << ec.message();
      net::write(s, net::buffer(part), ec);
      ASSERT_FALSE(ec) << ec.message();
      s.next_layer().shutdown(net::ip::tcp::socket::shutdown_both, ec);  // no close_notify
      s.next_layer().close(ec);
    });
    auto c =
        Client::Connect("127.0.0.1", port,
                        {.timeout = 10s,
                         .tls = ClientTls{.ca_file = dir_ / "ca.pem", .server_name = "localhost"},
                         .max_response_bytes = 8u << 20});
    ASSERT_TRUE(c) << c.error().message;
    auto r = (*c)->Send({.method = "GET", .target = "/"});
    peer.join();
    ASSERT_FALSE(r) << "answered " << r->status;
    EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
    EXPECT_NE(r.error().message.find("read failed: 127.0.0.1:" + std::to_string(port) +
                                     " closed the connection before the whole answer came"),
              std::string::npos)
        << r.error().message;
  }
}

TEST_F(HttpTlsTest, UnreadableCertificateIsAnError) {
  ServerOptions o;
  o.tls = TlsFiles{dir_ / "missing.pem", dir_ / "missing.key", ""};
  Server s(io_, o, handler_);
  auto st = s.Listen("127.0.0.1:0");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(st.error().message.find("missing.pem"), std::string::npos);
}

}  // namespace
}  // namespace edge::http
