// http::Client against peers that stop answering: a listener that never accepts (the kernel
// completes the TCP handshake, nothing reads or writes), and one that sends part of a chunked
// answer and then holds the connection. Every wait must end at the client's timeout with
// UNAVAILABLE saying so — the worker's heartbeat and lease renewal run on this client, and a
// control plane that stalls must not stall them (or the agent's shutdown, which joins them).
// And a streamed answer that is already there is read in large pieces, not 512 bytes at a
// time (issue 14: `worker exec-stream` ran at 40 % of its speed). One watchdog timer bounds
// every wait, re-armed only when it fires (not set and cancelled per read): a stream that keeps
// moving outlasts the timeout, and a connection left idle longer than it is still usable. A
// streamed chunked answer goes to the callback a chunk's bytes at a time, however long it is.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <string_view>
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
  // Accepts the client's connection and reads its request. Returns the connection, or -1 with
  // the test failed.
  int AcceptRequest() {
    const int fd = Accept();
    EXPECT_GE(fd, 0) << "accept: " << std::strerror(errno);
    return fd >= 0 && ReadRequest(fd) ? fd : -1;
  }
  // On a thread of its own: accepts the client's connection, reads its request and hands the
  // connection to `answer` (not called, with the test failed, when no request came).
  std::thread AnswerOnce(std::function<void(int fd)> answer) {
    return std::thread([this, answer = std::move(answer)] {
      const int fd = AcceptRequest();
      if (fd >= 0) answer(fd);
    });
  }
  // Reads one request (one read: the tests' requests are small and come whole).
  static bool ReadRequest(int fd) {
    char buf[4096];
    const bool came = ::read(fd, buf, sizeof buf) > 0;
    EXPECT_TRUE(came) << "no request came";
    return came;
  }
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

// A SendStreaming callback that appends every piece to `got` and asks for more.
std::function<bool(std::string_view)> AppendTo(std::string& got) {
  return [&got](std::string_view d) {
    got += d;
    return true;
  };
}

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
  std::thread server = peer.AnswerOnce([&](int fd) {
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
    return (*c)->SendStreaming({.method = "POST", .target = "/rpc", .body = "{}"}, AppendTo(got));
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

// Writes `s` whole, or until the client has closed (false then; MSG_NOSIGNAL: no SIGPIPE).
bool WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string ChunkHeader(size_t n) {
  char b[32];
  std::snprintf(b, sizeof b, "%zx\r\n", n);
  return b;
}

// Each wait is bounded, not the call: a stream whose pieces come 100 ms apart goes on for four
// times the 300 ms timeout and is read to its end.
TEST(HttpClientTest, AStreamThatKeepsMovingOutlastsTheTimeout) {
  SilentPeer peer;
  auto c = Client::Connect("127.0.0.1", peer.port(), {.timeout = 300ms});
  ASSERT_TRUE(c) << c.error().ToString();
  std::thread server = peer.AnswerOnce([&](int fd) {
    ASSERT_TRUE(WriteAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"));
    for (int i = 0; i < 12; ++i) {
      std::this_thread::sleep_for(100ms);
      ASSERT_TRUE(WriteAll(fd, "2\r\n" + std::to_string(i % 10) + "\n\r\n"));
    }
    ASSERT_TRUE(WriteAll(fd, "0\r\n\r\n"));
  });
  std::string got;
  const auto t0 = std::chrono::steady_clock::now();
  auto f = std::async(std::launch::async, [&] {
    return (*c)->SendStreaming({.method = "GET", .target = "/slow"}, AppendTo(got));
  });
  auto r = Bounded(f, peer);
  server.join();
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(got, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n0\n1\n");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1200ms);
}

// A keep-alive connection left idle for longer than the timeout between two calls is still
// usable: the timeout counts only while a call waits.
TEST(HttpClientTest, AConnectionIdleLongerThanTheTimeoutBetweenCallsStillWorks) {
  SilentPeer peer;
  auto c = Client::Connect("127.0.0.1", peer.port(), {.timeout = 200ms});
  ASSERT_TRUE(c) << c.error().ToString();
  std::thread server([&] {
    const int fd = peer.Accept();
    ASSERT_GE(fd, 0);
    for (const char* body : {"one", "two"}) {
      ASSERT_TRUE(SilentPeer::ReadRequest(fd));
      ASSERT_TRUE(WriteAll(fd, std::string("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n") + body));
    }
  });
  auto first = (*c)->Send({.method = "GET", .target = "/1"});
  ASSERT_TRUE(first) << first.error().ToString();
  EXPECT_EQ(first->body, "one");
  std::this_thread::sleep_for(500ms);  // idle: no call waits
  auto f =
      std::async(std::launch::async, [&] { return (*c)->Send({.method = "GET", .target = "/2"}); });
  auto second = Bounded(f, peer);
  server.join();
  ASSERT_TRUE(second) << second.error().ToString();
  EXPECT_EQ(second->body, "two");
}

// A streamed answer is handed over, not held: a chunked one far past `max_response_bytes` is
// read whole, in order, through chunks of many sizes (one byte, across a read, a megabyte),
// while the same answer asked for with Send is refused at the limit.
TEST(HttpClientTest, AStreamedAnswerPastTheResponseLimitIsHandedOverWhole) {
  std::string body;
  std::string answer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t n :
       {size_t{1}, size_t{4095}, size_t{65536}, size_t{70001}, size_t{1} << 20, size_t{3}}) {
    std::string chunk(n, '\0');
    for (size_t i = 0; i < n; ++i)
      chunk[i] = static_cast<char>('a' + (body.size() + i) % 23);
    body += chunk;
    answer += ChunkHeader(n) + chunk + "\r\n";
  }
  answer += "0\r\n\r\n";
  SilentPeer peer;
  auto c =
      Client::Connect("127.0.0.1", peer.port(), {.timeout = 10s, .max_response_bytes = 64 * 1024});
  ASSERT_TRUE(c) << c.error().ToString();
  std::thread server([&] {
    const int fd = peer.Accept();
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(SilentPeer::ReadRequest(fd));
      // The second answer is cut short: the client closes at the limit.
      if (!WriteAll(fd, answer)) break;
    }
  });
  std::string got;
  auto f = std::async(std::launch::async, [&] {
    auto streamed = (*c)->SendStreaming({.method = "GET", .target = "/stream"}, AppendTo(got));
    if (!streamed) return streamed;
    return (*c)->Send({.method = "GET", .target = "/whole"});
  });
  auto r = Bounded(f, peer);
  server.join();
  EXPECT_EQ(got.size(), body.size());
  EXPECT_TRUE(got == body) << "the stream's " << got.size() << " bytes differ";
  ASSERT_FALSE(r) << "Send held " << r->body.size() << " bytes past the 64 KiB limit";
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("is longer than the 65536 bytes a held answer may have "
                                   "(max_response_bytes): body limit exceeded"),
            std::string::npos)
      << r.error().message;
}

// The callback saying stop in the middle of a chunk ends the call at once, with the answer's
// status, and closes the connection (the rest of the chunk never comes).
TEST(HttpClientTest, StoppingInTheMiddleOfAChunkEndsTheCallAndClosesTheConnection) {
  SilentPeer peer;
  auto c = Client::Connect("127.0.0.1", peer.port(), {.timeout = 10s});
  ASSERT_TRUE(c) << c.error().ToString();
  std::thread server = peer.AnswerOnce([&](int fd) {
    // A chunk of 1000 bytes of which 10 are sent; the connection then stays open.
    ASSERT_TRUE(WriteAll(
        fd, "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n0123456789"));
  });
  std::string got;
  auto f = std::async(std::launch::async, [&] {
    return (*c)->SendStreaming({.method = "GET", .target = "/stream"}, [&](std::string_view d) {
      got += d;
      return false;
    });
  });
  auto r = Bounded(f, peer);
  server.join();
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(got, "0123456789");
  auto again = (*c)->Send({.method = "GET", .target = "/"});
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("closed"), std::string::npos) << again.error().message;
}

// Bad input from the peer: every malformed, oversized or cut answer ends the call with
// UNAVAILABLE saying what was wrong and naming the peer, hands over nothing past the last
// valid byte, and closes the connection (nothing of it is taken for the next call's answer).
TEST(HttpClientTest, EveryMalformedAnswerIsRefusedWithWhatWasWrongAndTheConnectionClosed) {
  // After the answer the connection stays open, is closed, or is reset (SO_LINGER 0).
  enum End { kOpen, kClose, kReset };
  struct Case {
    const char* name;
    std::string answer;  // written whole, then the connection ends as `end` says
    End end;
    bool streamed;  // SendStreaming (else Send)
    std::string want;
    std::string handed_over;  // what SendStreaming's callback must have had
    size_t max_response_bytes = 1024;
  };
  // A body of a megabyte or more is read straight into place, not through beast's parser: cut
  // short or reset, it is refused as the parser's are.
  const std::string megabyte_cut =
      "HTTP/1.1 200 OK\r\nContent-Length: 2097152\r\n\r\n" + std::string(1 << 20, 'm');
  const std::string big_header =
      "HTTP/1.1 200 OK\r\nX-Big: " + std::string(70 * 1024, 'a') + "\r\n\r\n";
  const std::vector<Case> cases = {
      {"not HTTP", "GARBAGE\r\n\r\n", kOpen, false, "is not valid HTTP: bad version", ""},
      {"a status that is not a number", "HTTP/1.1 2x0 OK\r\n\r\n", kOpen, false,
       "is not valid HTTP: bad status", ""},
      {"two different lengths",
       "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", kOpen, false,
       "is not valid HTTP: bad Content-Length", ""},
      {"a length past 64 bits",
       "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", kOpen, false,
       "is not valid HTTP: bad Content-Length", ""},
      {"a chunk size that is not hex",
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n", kOpen, true,
       "is not valid HTTP: bad chunk", "abc"},
      {"a chunk size past 64 bits",
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n", kOpen,
       true, "is not valid HTTP: bad chunk", ""},
      {"a header over 64 KiB", big_header, kOpen, false,
       "has a header longer than 65536 bytes: header limit exceeded", ""},
      {"a body cut short", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", kClose, false,
       "closed the connection before the whole answer came: partial message", ""},
      {"a streamed body cut short",
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nshort\r\n8\r\nhal", kClose, true,
       "closed the connection before the whole answer came: partial message", "shorthal"},
      {"no answer at all", "", kClose, false,
       "closed the connection before the whole answer came: end of stream", ""},
      {"a held answer past max_response_bytes", "HTTP/1.1 200 OK\r\nContent-Length: 2048\r\n\r\n",
       kOpen, false, "is longer than the 1024 bytes a held answer may have (max_response_bytes)",
       ""},
      {"a connection reset in the middle of the body",
       "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", kReset, false,
       "the connection to 127.0.0.1:", ""},
      {"a megabyte body cut short", megabyte_cut, kClose, false,
       "closed the connection before the whole answer came: partial message", "", 4u << 20},
      {"a megabyte body past max_response_bytes", megabyte_cut, kOpen, false,
       "is longer than the 1048576 bytes a held answer may have (max_response_bytes)", "",
       1u << 20},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    SilentPeer peer;
    auto c = Client::Connect("127.0.0.1", peer.port(),
                             {.timeout = 10s, .max_response_bytes = k.max_response_bytes});
    ASSERT_TRUE(c) << c.error().ToString();
    std::thread server = peer.AnswerOnce([&](int fd) {
      WriteAll(fd, k.answer);
      if (k.end == kClose) ::shutdown(fd, SHUT_WR);
      if (k.end == kReset) {
        const linger now{.l_onoff = 1, .l_linger = 0};
        ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now), 0);
        peer.CloseAll();  // with SO_LINGER 0, a reset instead of an end of stream
      }
    });
    std::string got;
    auto f = std::async(std::launch::async, [&] {
      const Request req{.method = "GET", .target = "/"};
      if (!k.streamed) return (*c)->Send(req);
      return (*c)->SendStreaming(req, AppendTo(got));
    });
    auto r = Bounded(f, peer);
    server.join();
    ASSERT_FALSE(r) << "answered " << r->status;
    EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
    EXPECT_NE(r.error().message.find(k.want), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("127.0.0.1:" + std::to_string(peer.port())), std::string::npos)
        << r.error().message;
    EXPECT_EQ(got, k.handed_over);
    auto again = (*c)->Send({.method = "GET", .target = "/"});
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().message, "the connection is closed");
  }
}

// Interim answers (100 Continue, 103 Early Hints) before the final one are dropped: the call
// gets the final answer, and the next call on the same connection gets its own. A peer that
// sends nothing but interim answers is refused after eight of them.
TEST(HttpClientTest, InterimAnswersAreSkippedAndTheFinalOneIsTheAnswer) {
  SilentPeer peer;
  auto c = Client::Connect("127.0.0.1", peer.port(), {.timeout = 10s});
  ASSERT_TRUE(c) << c.error().ToString();
  std::string endless;
  for (int i = 0; i < 9; ++i)
    endless += "HTTP/1.1 100 Continue\r\n\r\n";
  std::thread server([&] {
    const int fd = peer.Accept();
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SilentPeer::ReadRequest(fd));
    ASSERT_TRUE(WriteAll(fd,
                         "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n"
                         "\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none"));
    ASSERT_TRUE(SilentPeer::ReadRequest(fd));
    ASSERT_TRUE(WriteAll(fd, "HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\ntwo"));
    ASSERT_TRUE(SilentPeer::ReadRequest(fd));
    WriteAll(fd, endless);
  });
  auto f = std::async(std::launch::async, [&] {
    std::vector<Result<Response>> out;
    for (const char* t : {"/1", "/2", "/3"})
      out.push_back((*c)->Send({.method = "POST", .target = t, .body = "{}"}));
    return out;
  });
  auto r = Bounded(f, peer);
  (*c)->Close();  // a server thread still waiting for a request (a failing client) returns
  server.join();
  ASSERT_EQ(r.size(), 3u);
  ASSERT_TRUE(r[0]) << r[0].error().ToString();
  EXPECT_EQ(r[0]->status, 200);
  EXPECT_EQ(r[0]->body, "one");
  ASSERT_TRUE(r[1]) << r[1].error().ToString();
  EXPECT_EQ(r[1]->status, 201);
  EXPECT_EQ(r[1]->body, "two");
  ASSERT_FALSE(r[2]) << "answered " << r[2]->status;
  EXPECT_NE(r[2].error().message.find("sent more than 8 interim (1xx) answers and no final one"),
            std::string::npos)
      << r[2].error().message;
}

// A 101 Switching Protocols that this client never asked for is the call's answer, and the
// connection is closed after it: what follows is another protocol's, not the next answer.
TEST(HttpClientTest, AnUnaskedSwitchOfProtocolsClosesTheConnection) {
  SilentPeer peer;
  auto c = Client::Connect("127.0.0.1", peer.port(), {.timeout = 10s});
  ASSERT_TRUE(c) << c.error().ToString();
  std::thread server = peer.AnswerOnce([&](int fd) {
    ASSERT_TRUE(WriteAll(fd,
                         "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "
                         "other\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"));
  });
  auto f = std::async(std::launch::async, [&] {
    auto first = (*c)->Send({.method = "GET", .target = "/"});
    auto second = (*c)->Send({.method = "GET", .target = "/"});
    return std::make_pair(std::move(first), std::move(second));
  });
  auto [first, second] = Bounded(f, peer);
  server.join();
  ASSERT_TRUE(first) << first.error().ToString();
  EXPECT_EQ(first->status, 101);
  ASSERT_FALSE(second) << "the next call got " << second->status << " " << second->body;
  EXPECT_EQ(second.error().message, "the connection is closed");
}

// The answer to HEAD has a Content-Length and no body: the call returns at its header (not at
// the timeout, waiting for bytes that never come), and the next call's answer is its own.
TEST(HttpClientTest, TheAnswerToHeadHasNoBody) {
  SilentPeer peer;
  auto c = Client::Connect("127.0.0.1", peer.port(), {.timeout = 10s});
  ASSERT_TRUE(c) << c.error().ToString();
  std::thread server([&] {
    const int fd = peer.Accept();
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SilentPeer::ReadRequest(fd));
    ASSERT_TRUE(WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"));
    ASSERT_TRUE(SilentPeer::ReadRequest(fd));
    ASSERT_TRUE(WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo"));
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto f = std::async(std::launch::async, [&] {
    auto head = (*c)->Send({.method = "HEAD", .target = "/file"});
    auto get = (*c)->Send({.method = "GET", .target = "/next"});
    return std::make_pair(std::move(head), std::move(get));
  });
  auto [head, get] = Bounded(f, peer);
  (*c)->Close();
  server.join();
  ASSERT_TRUE(head) << head.error().ToString();
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  ASSERT_TRUE(get) << get.error().ToString();
  EXPECT_EQ(get->body, "two");
}

}  // namespace
}  // namespace edge::http
