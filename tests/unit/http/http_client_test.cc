// http::Client against peers that stop answering: a listener that never accepts (the kernel
// completes the TCP handshake, nothing reads or writes), and one that sends part of a chunked
// answer and then holds the connection. Every wait must end at the client's timeout with
// UNAVAILABLE saying so — the worker's heartbeat and lease renewal run on this client, and a
// control plane that stalls must not stall them (or the agent's shutdown, which joins them).
// And a streamed answer that is already there is read in large pieces, not 512 bytes at a
// time (issue 14: `worker exec-stream` ran at 40 % of its speed).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "http/client.h"

namespace edge::http {
namespace {

using namespace std::chrono_literals;

// A loopback listener on a port the kernel picks; it accepts only when asked.
class SilentPeer {
 public:
  SilentPeer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
  }
  ~SilentPeer() { CloseAll(); }
  uint16_t port() const { return port_; }
  int Accept() { return accepted_ = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC); }
  // Ends every connection: a client still waiting (the defect this file is about) then sees a
  // reset or an end of stream and returns, so a failing test does not hang.
  void CloseAll() {
    if (accepted_ >= 0) ::close(accepted_);
    if (fd_ >= 0) ::close(fd_);
    accepted_ = fd_ = -1;
  }

 private:
  int fd_ = -1;
  int accepted_ = -1;
  uint16_t port_ = 0;
};

// Waits up to 20 s for `f`; past that the peer is closed (so the client returns) and the
// result is still taken, with the test failed.
template <class T>
T Bounded(std::future<T>& f, SilentPeer& peer) {
  if (f.wait_for(20s) != std::future_status::ready) {
    ADD_FAILURE() << "the client was still waiting after 20 s";
    peer.CloseAll();
  }
  return f.get();
}

TEST(HttpClientTest, AnAnswerThatNeverComesEndsAtTheTimeout) {
  SilentPeer peer;
  auto c = Client::Connect("127.0.0.1", peer.port(), {.timeout = 300ms});
  ASSERT_TRUE(c) << c.error().ToString();  // the kernel completed the handshake
  const auto t0 = std::chrono::steady_clock::now();
  auto f =
      std::async(std::launch::async, [&] { return (*c)->Send({.method = "GET", .target = "/"}); });
  auto r = Bounded(f, peer);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("read failed: timed out after 300 ms"), std::string::npos)
      << r.error().message;
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  // The connection is closed: the next call says so instead of waiting again.
  auto again = (*c)->Send({.method = "GET", .target = "/"});
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("closed"), std::string::npos) << again.error().message;
}

TEST(HttpClientTest, ATlsHandshakeThatNeverCompletesEndsAtTheTimeout) {
  SilentPeer peer;
  auto f = std::async(std::launch::async, [&] {
    return Client::Connect("127.0.0.1", peer.port(),
                           {.timeout = 300ms, .tls = ClientTls{.insecure_skip_verify = true}});
  });
  auto c = Bounded(f, peer);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(c.error().message.find("TLS handshake with 127.0.0.1:" + std::to_string(peer.port()) +
                                   " failed: timed out"),
            std::string::npos)
      << c.error().message;
}

TEST(HttpClientTest, AStreamedBodyThatStopsEndsAtTheTimeoutAfterWhatCame) {
  SilentPeer peer;
  std::thread server([&] {
    const int fd = peer.Accept();
    ASSERT_GE(fd, 0);
    char buf[4096];
    ASSERT_GT(::read(fd, buf, sizeof buf), 0);  // the request
    const std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
        "Transfer-Encoding: chunked\r\n\r\n6\r\nhello\n\r\n";
    ASSERT_EQ(::write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
    // ... and nothing more: the connection stays open.
  });
  auto c = Client::Connect("127.0.0.1", peer.port(), {.timeout = 300ms});
  ASSERT_TRUE(c) << c.error().ToString();
  std::string got;
  auto f = std::async(std::launch::async, [&] {
    return (*c)->SendStreaming({.method = "POST", .target = "/rpc", .body = "{}"},
                               [&](std::string_view d) {
                                 got += d;
                                 return true;
                               });
  });
  auto r = Bounded(f, peer);
  server.join();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("timed out after 300 ms"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(got, "hello\n");
}

TEST(HttpClientTest, AStreamedBodyAlreadyReceivedIsHandedOverInLargePieces) {
  SilentPeer peer;
  constexpr size_t kBody = 128 * 1024;
  std::string body(kBody, '\0');
  for (size_t i = 0; i < kBody; ++i)
    body[i] = static_cast<char>('a' + i % 26);
  // Connected before the server thread starts: the kernel completes the handshake from the
  // backlog, and a failed ASSERT here leaves no joinable thread behind.
  auto c = Client::Connect("127.0.0.1", peer.port(), {.timeout = 10s});
  ASSERT_TRUE(c) << c.error().ToString();
  std::promise<void> written;
  std::thread server([&] {
    const int fd = peer.Accept();
    ASSERT_GE(fd, 0);
    // Room for the whole answer in the kernel, so it is all there before the client reads on.
    const int sndbuf = 1 << 20;
    ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
    char buf[4096];
    ASSERT_GT(::read(fd, buf, sizeof buf), 0);  // the request
    const std::string answer =
        "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kBody) + "\r\n\r\n" + body;
    for (size_t off = 0; off < answer.size();) {
      const ssize_t n = ::write(fd, answer.data() + off, answer.size() - off);
      ASSERT_GT(n, 0);
      off += static_cast<size_t>(n);
    }
    written.set_value();
  });
  auto all_written = written.get_future();
  std::string got;
  std::vector<size_t> pieces;
  auto f = std::async(std::launch::async, [&] {
    return (*c)->SendStreaming({.method = "GET", .target = "/stream"}, [&](std::string_view d) {
      // After the first piece, wait until the rest is in the kernel: every later read finds
      // as much as the client's buffer has room for.
      if (pieces.empty()) all_written.wait_for(5s);
      pieces.push_back(d.size());
      got += d;
      return true;
    });
  });
  auto r = Bounded(f, peer);
  server.join();
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(got == body) << "got " << got.size() << " of " << kBody << " bytes";
  // 64 KiB a read: three or four pieces. A client that reads 512 bytes at a time hands over
  // more than 200 pieces of at most a KiB or two.
  ASSERT_FALSE(pieces.empty());
  EXPECT_LE(pieces.size(), 16u);
  EXPECT_GE(*std::max_element(pieces.begin(), pieces.end()), 32u * 1024);
}

}  // namespace
}  // namespace edge::http
