#include "http/server.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/string_fill.h"
#include "http/server_impl.h"
#include "http/websocket_connection.h"

namespace edge::http {

namespace detail {

std::string HeaderSafe(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c != '\r' && c != '\n' && c != '\0') out.push_back(c);
  }
  return out;
}

}  // namespace detail

namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace bws = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clean = beast::error_code;
using detail::HeaderSafe;

// net::async_write's completion condition without Asio's 64 KiB cap on each write_some
// (transfer_all's default_max_transfer_size): a megabyte of a streamed answer goes to the
// kernel in one sendmsg when the socket takes it, not sixteen, each its own trip through the
// event loop. Over TLS each write_some is one record whatever this says.
struct WholeWrites {
  size_t operator()(const Clean& ec, size_t) const {
    return ec ? 0 : std::numeric_limits<size_t>::max();
  }
};

constexpr auto kGonePollInterval = std::chrono::milliseconds(200);

std::string Head(unsigned status, const Headers& headers, const std::string& content_type,
                 std::optional<size_t> content_length, bool chunked, bool close,
                 bool http10_keep_alive) {
  std::string h =
      "HTTP/1.1 " + std::to_string(status) + " " + std::string(ReasonPhrase(status)) + "\r\n";
  if (!content_type.empty()) h += "Content-Type: " + HeaderSafe(content_type) + "\r\n";
  for (const auto& [k, v] : headers) {
    h += HeaderSafe(k) + ": " + HeaderSafe(v) + "\r\n";
  }
  if (content_length) h += "Content-Length: " + std::to_string(*content_length) + "\r\n";
  if (chunked) h += "Transfer-Encoding: chunked\r\n";
  if (close) {
    h += "Connection: close\r\n";
  } else if (http10_keep_alive) {
    h += "Connection: keep-alive\r\n";
  }
  h += "\r\n";
  return h;
}

std::string ErrorBody(std::string_view code, std::string_view message) {
  nlohmann::json j = {{"code", code}, {"message", message}};
  return j.dump();
}

Result<std::shared_ptr<ssl::context>> LoadTls(const TlsFiles& files) {
  try {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                     ssl::context::single_dh_use);
    ctx->use_certificate_chain_file(files.cert_file);
    ctx->use_private_key_file(files.key_file, ssl::context::pem);
    if (!files.client_ca_file.empty()) {
      ctx->load_verify_file(files.client_ca_file);
      ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    } else {
      ctx->set_verify_mode(ssl::verify_none);
    }
    return ctx;
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("TLS certificate, key or client CA could not be loaded (") +
                         files.cert_file + ", " + files.key_file +
                         (files.client_ca_file.empty() ? "" : ", " + files.client_ca_file) +
                         "): " + e.what());
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
Server::Impl::Impl(net::io_context& io_, ServerOptions options_, Handler& handler_)
    : io(io_),
      options(std::move(options_)),
      handler(handler_),
      clock(options.clock ? *options.clock : SystemClock::Instance()),
      acceptor(net::make_strand(io_)),
      accept_retry(acceptor.get_executor()),
      log(log::Get(options.name)) {}

Server::Impl::~Impl() {
  StopTimers();
}

TimerQueue& Server::Impl::Timers() {
  std::lock_guard lock(mu);
  if (!timers) {
    timers = std::make_unique<TimerQueue>(clock);
    if (timers_stopped) timers->Stop();
  }
  return *timers;
}

void Server::Impl::StopTimers() {
  TimerQueue* t = nullptr;
  {
    std::lock_guard lock(mu);
    timers_stopped = true;
    t = timers.get();
  }
  if (t) t->Stop();
}

// The connection side an Exchange talks to; every Do* runs on the connection's strand.
class SessionBase : public Connection {
 public:
  virtual void Post(std::function<void()> fn) = 0;
  virtual void DoRespond(uint64_t gen, Response r) = 0;
  virtual void DoBeginStream(uint64_t gen, unsigned status, Headers h, std::string ctype) = 0;
  virtual void DoWriteChunk(uint64_t gen, std::string data, std::function<void(bool)> cb) = 0;
  virtual void DoEndStream(uint64_t gen) = 0;
  // Any thread: makes the WebSocket and posts the upgrade of exchange `gen` to the strand.
  virtual std::shared_ptr<WebSocket> Upgrade(uint64_t gen, const WebSocketOptions& options,
                                             std::shared_ptr<WebSocketHandler> handler) = 0;
  virtual void Close() = 0;
};

namespace {

class ExchangeImpl final : public Exchange {
 public:
  ExchangeImpl(Request request, std::shared_ptr<SessionBase> session, uint64_t gen)
      : request_(std::move(request)), session_(std::move(session)), gen_(gen) {}

  Result<std::shared_ptr<WebSocket>> AcceptWebSocket(
      const WebSocketOptions& options, std::shared_ptr<WebSocketHandler> handler) override {
    if (answered_) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "the exchange was answered already; it cannot become a WebSocket");
    }
    if (!handler) {
      Respond({.status = 500, .body = ErrorBody("INTERNAL", "internal error")});
      return MakeError(ErrorCode::kInvalidArgument, "AcceptWebSocket needs a handler");
    }
    if (auto st = CheckWebSocketUpgrade(request_); !st) {
      // Sec-WebSocket-Version tells a client of another version which one we speak.
      Respond({.status = 400,
               .headers = {{"Sec-WebSocket-Version", "13"}},
               .body = ErrorBody("BAD_REQUEST", st.error().message)});
      return std::unexpected(st.error());
    }
    if (answered_.exchange(true)) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "the exchange was answered already; it cannot become a WebSocket");
    }
    return session_->Upgrade(gen_, options, std::move(handler));
  }

  const Request& request() const override { return request_; }
  std::string TakeBody() override { return std::exchange(request_.body, std::string()); }

  void Respond(Response response) override {
    if (answered_.exchange(true)) return;
    auto s = session_;
    s->Post(
        [s, gen = gen_, r = std::move(response)]() mutable { s->DoRespond(gen, std::move(r)); });
  }
  void BeginStream(unsigned status, Headers headers, std::string content_type) override {
    if (answered_.exchange(true)) return;
    auto s = session_;
    s->Post([s, gen = gen_, status, h = std::move(headers), c = std::move(content_type)]() mutable {
      s->DoBeginStream(gen, status, std::move(h), std::move(c));
    });
  }
  void WriteChunk(std::string data, std::function<void(bool)> written) override {
    auto s = session_;
    s->Post([s, gen = gen_, d = std::move(data), w = std::move(written)]() mutable {
      s->DoWriteChunk(gen, std::move(d), std::move(w));
    });
  }
  void EndStream() override {
    auto s = session_;
    s->Post([s, gen = gen_] { s->DoEndStream(gen); });
  }
  void OnClientGone(std::function<void()> gone) override {
    {
      std::lock_guard lock(mu_);
      if (!gone_) {
        on_gone_.push_back(std::move(gone));
        return;
      }
    }
    gone();
  }
  bool client_gone() const override {
    std::lock_guard lock(mu_);
    return gone_;
  }

  // Called by the connection (on its strand).
  void MarkGone() {
    std::vector<std::function<void()>> cbs;
    {
      std::lock_guard lock(mu_);
      if (gone_) return;
      gone_ = true;
      cbs.swap(on_gone_);
    }
    for (auto& cb : cbs)
      cb();
  }
  void Completed() {
    std::lock_guard lock(mu_);
    on_gone_.clear();
  }

 private:
  Request request_;
  std::shared_ptr<SessionBase> session_;
  uint64_t gen_;
  std::atomic<bool> answered_{false};
  mutable std::mutex mu_;
  bool gone_ = false;
  std::vector<std::function<void()>> on_gone_;
};

template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(std::shared_ptr<Server::Impl> server, Stream stream, std::string remote,
          std::shared_ptr<ssl::context> tls = nullptr)
      : server_(std::move(server)),
        tls_(std::move(tls)),
        stream_(std::move(stream)),
        remote_(std::move(remote)),
        id_(server_->next_id++),
        executor_(stream_.get_executor()),
        gone_timer_(stream_.get_executor()) {
    ++server_->connections;
  }
  ~Session() override {
    if (counted_) --server_->connections;
    server_->Unregister(id_);
  }

  void Start() {
    server_->Register(id_, this->weak_from_this());
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      ReadNext();
    } else {
      beast::get_lowest_layer(stream_).expires_after(server_->options.read_timeout);
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](Clean ec) {
                                if (ec) {
                                  self->server_->log->debug("TLS handshake with {} failed: {}",
                                                            self->remote_, ec.message());
                                  return self->Close();
                                }
                                self->ReadNext();
                              });
    }
  }

  void Post(std::function<void()> fn) override { net::post(executor_, std::move(fn)); }

  void Shutdown() override {
    Post([self = this->shared_from_this()] { self->Close(); });
  }

  std::shared_ptr<WebSocket> Upgrade(uint64_t gen, const WebSocketOptions& options,
                                     std::shared_ptr<WebSocketHandler> handler) override {
    auto ws = std::make_shared<detail::WsConnection<Stream>>(server_, executor_, options,
                                                             std::move(handler), remote_);
    Post([self = this->shared_from_this(), gen, ws] { self->DoUpgrade(gen, ws); });
    return ws;
  }

  void Close() override {
    if (closed_) return;
    closed_ = true;
    gone_timer_.cancel();
    if (exchange_) exchange_->MarkGone();
    exchange_.reset();
    for (auto& w : writes_) {
      if (w.cb) w.cb(false);
      w.cb = nullptr;
    }
    // The front is the write in flight: its bytes stay until the session goes. Over TLS the
    // write may still go on after the socket is closed (a completion already queued), and
    // Asio's SSL write copies from them as it goes.
    if (!writes_.empty()) writes_.erase(writes_.begin() + 1, writes_.end());
    auto& sock = beast::get_lowest_layer(stream_).socket();
    Clean ignored;
    sock.shutdown(tcp::socket::shutdown_both, ignored);
    sock.close(ignored);
  }

  // ---- the upgrade to a WebSocket (strand) ----
  void DoUpgrade(uint64_t gen, const std::shared_ptr<detail::WsConnection<Stream>>& ws) {
    if (closed_ || gen != gen_ || !exchange_) {
      return ws->Abort("the client went away before the WebSocket handshake");
    }
    if (!upgrade_request_) {
      ws->Abort("not a WebSocket upgrade request");
      return Refuse(400, "BAD_REQUEST", "not a WebSocket upgrade request");
    }
    if (buffer_.size() > 0) {
      // RFC 6455 §4.1: a client sends nothing more before the server's handshake answer.
      ws->Abort("data arrived before the WebSocket handshake");
      return Refuse(400, "BAD_REQUEST",
                    "data arrived after the upgrade request, before the handshake answer");
    }
    // The stream moves to the WebSocket: nothing of this session may touch it again.
    gone_timer_.cancel();
    Clean ignored;
    tcp().socket().cancel(ignored);  // the client watch
    tcp().expires_never();
    exchange_->Completed();
    exchange_.reset();
    ++gen_;
    closed_ = true;
    // The WebSocket counts the connection from now on (this session may live on for a while
    // in an Exchange its handler keeps).
    counted_ = false;
    --server_->connections;
    server_->Unregister(id_);
    // The path only: the query may carry a credential (the operator API's one-time ticket).
    std::string_view target(upgrade_request_->target().data(), upgrade_request_->target().size());
    target = target.substr(0, target.find('?'));
    server_->log->debug("GET {} from {}: upgrading to a WebSocket", log::Escape(target, 200),
                        remote_);
    ws->Begin(std::move(stream_), std::move(*upgrade_request_), tls_);
    upgrade_request_.reset();
  }

  // ---- responses (strand) ----
  void DoRespond(uint64_t gen, Response r) override {
    if (closed_ || gen != gen_ || !exchange_) return;
    bool close = !keep_alive_;
    // HEAD: the headers a GET would get (its Content-Length too), never the body (RFC 9110
    // §9.3.2), so the connection stays in step.
    const bool head = exchange_->request().method == "HEAD";
    std::string bytes =
        Head(r.status, r.headers, r.content_type, r.BodySize(), false, close, http10_ && !close);
    const After after = close ? After::kClose : After::kNext;
    if (head) return Queue(std::move(bytes), nullptr, after);
    // A large piece of the body is a write of its own, from where it is, rather than copied
    // behind what comes before it; small pieces join the write before them (never a large
    // one, which would grow and copy). The last write ends the answer.
    std::vector<std::string> writes;
    writes.push_back(std::move(bytes));
    auto add = [&](std::string& piece) {
      if (piece.size() < kSeparateBodyBytes) {
        writes.back().append(piece);
        return;
      }
      writes.push_back(std::move(piece));
      writes.emplace_back();
    };
    add(r.body);
    for (auto& piece : r.more_body)
      add(piece);
    if (writes.back().empty()) writes.pop_back();
    for (size_t i = 0; i < writes.size(); ++i)
      Queue(std::move(writes[i]), nullptr, i + 1 == writes.size() ? after : After::kNone);
  }
  void DoBeginStream(uint64_t gen, unsigned status, Headers h, std::string ctype) override {
    if (closed_ || gen != gen_ || !exchange_) return;
    // HTTP/1.0 has no chunked encoding: the body is raw and ends with the connection.
    if (http10_) keep_alive_ = false;
    streaming_ = true;
    Queue(Head(status, h, ctype, std::nullopt, !http10_, !keep_alive_, false), nullptr,
          After::kNone);
  }
  void DoWriteChunk(uint64_t gen, std::string data, std::function<void(bool)> cb) override {
    if (closed_ || gen != gen_ || !streaming_) {
      if (cb) cb(false);
      return;
    }
    if (data.empty()) {
      if (cb) cb(true);
      return;
    }
    Write w{std::move(data), std::move(cb), After::kNone};
    if (!http10_) {
      // The chunk's size line and its CRLF go beside its bytes, not into them (a copy of a
      // megabyte to make room at the front).
      w.size_line_bytes = static_cast<uint8_t>(
          std::snprintf(w.size_line.data(), w.size_line.size(), "%zx\r\n", w.bytes.size()));
      w.crlf = true;
    }
    Queue(std::move(w));
  }
  void DoEndStream(uint64_t gen) override {
    if (closed_ || gen != gen_ || !streaming_) return;
    streaming_ = false;
    Queue(http10_ ? std::string() : std::string("0\r\n\r\n"), nullptr,
          keep_alive_ ? After::kNext : After::kClose);
  }

 private:
  enum class After { kNone, kNext, kClose };
  // From this size on a response's body is not copied behind its head (one more write).
  static constexpr size_t kSeparateBodyBytes = 64 << 10;
  static constexpr size_t kIdleReadBytes = 4096;           // the first read of a request
  static constexpr size_t kLargeBodyReadBytes = 64 << 10;  // beast's most in one read
  static constexpr size_t kDirectBodyBytes = 1 << 20;      // ReadBodyDirect from this size
  struct Write {
    std::string bytes;
    std::function<void(bool)> cb;
    After after = After::kNone;
    // A chunk of a chunked body: "<size in hex>\r\n" written before `bytes`, "\r\n" after.
    std::array<char, 24> size_line{};
    uint8_t size_line_bytes = 0;
    bool crlf = false;
  };

  const ServerOptions& opts() const { return server_->options; }
  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }

  // ---- reading ----
  void ReadNext() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(opts().max_header_bytes));
    parser_->body_limit(opts().max_body_bytes);
    if (buffer_.size() > 0) return ReadHeader();
    // Idle between requests: the first byte must come within idle_timeout.
    tcp().expires_after(opts().idle_timeout);
    stream_.async_read_some(buffer_.prepare(kIdleReadBytes),
                            [self = this->shared_from_this()](Clean ec, size_t n) {
                              if (ec) return self->Close();
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    // From the first byte on, the whole request must arrive within read_timeout.
    tcp().expires_after(opts().read_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](Clean ec, size_t) {
                               if (ec) return self->ReadFailed(ec);
                               self->OnHeader();
                             });
  }

  void OnHeader() {
    auto& req = parser_->get();
    // Bracketed like Handle: once Stop began, no handler is called (the connection closes).
    if (!server_->EnterHandler()) return Close();
    auto refusal = Screen(req);
    server_->LeaveHandler();
    if (refusal) {
      // A request with a body is answered without reading it, and the connection closes; one
      // without (a GET to a wrong path) is answered in turn and the connection kept.
      const bool has_body = parser_->chunked() || parser_->content_length().value_or(0) > 0;
      if (has_body) return Answer(std::move(*refusal), req.method() == bhttp::verb::head);
      screened_refusal_ = std::move(*refusal);
    }
    if (bhttp::token_list(req[bhttp::field::expect]).exists("100-continue")) {
      auto data = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(stream_, net::buffer(*data),
                       [self = this->shared_from_this(), data](Clean ec, size_t) {
                         if (ec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (!parser_->chunked() && parser_->content_length().value_or(0) >= kDirectBodyBytes) {
      return ReadBodyDirect(static_cast<size_t>(*parser_->content_length()));
    }
    // Beast reads a body as far as the buffer has room: 4 KiB between requests (ReadNext),
    // 64 KiB while a large body arrives — a 358 MB upload in 4 KiB reads spent more on
    // syscalls, wake-ups and timers than on the bytes (issue 14). The room goes back in
    // Dispatch, so an idle keep-alive connection keeps only its 4 KiB.
    const uint64_t length =
        parser_->chunked() ? kLargeBodyReadBytes : parser_->content_length().value_or(0);
    if (length >= kLargeBodyReadBytes && buffer_.capacity() < kLargeBodyReadBytes) {
      buffer_.reserve(kLargeBodyReadBytes);
      large_body_room_ = true;
    }
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](Clean ec, size_t) {
                        if (ec) return self->ReadFailed(ec);
                        self->Dispatch();
                      });
  }

  // A body of kDirectBodyBytes or more with a Content-Length (file_write's: hundreds of MB)
  // is read straight into the request's body, sized for it at once (with huge pages,
  // common/huge_pages.h), and not through the read buffer and beast's parser, which copy it
  // once more, 64 KiB at a time. Each read asks for all that is missing. The header's limit
  // checked the length against max_body_bytes; read_timeout still bounds the whole request,
  // and a client gone before the last byte closes the connection with the body unseen.
  void ReadBodyDirect(size_t length) {
    std::string& body = direct_body_.emplace();
    const size_t have = std::min(buffer_.size(), length);
    // The bytes past `have` are read into place below before anything looks at the body.
    ResizeUninitialized(body, length);
    net::buffer_copy(net::buffer(body.data(), have), buffer_.data());
    buffer_.consume(have);
    if (have == length) return Dispatch();
    net::async_read(stream_, net::buffer(body.data() + have, length - have), WholeWrites{},
                    [self = this->shared_from_this()](Clean ec, size_t) {
                      if (ec) return self->ReadFailed(ec);
                      self->Dispatch();
                    });
  }

  void ReadFailed(Clean ec) {
    if (ec == bhttp::error::header_limit) {
      return Refuse(431, "HEADER_TOO_LARGE",
                    "the request line and headers exceed " +
                        std::to_string(opts().max_header_bytes) + " bytes");
    }
    if (ec == bhttp::error::body_limit) {
      return Refuse(413, "PAYLOAD_TOO_LARGE",
                    "the request body exceeds " + std::to_string(opts().max_body_bytes) + " bytes");
    }
    if (ec == beast::error::timeout) {
      server_->log->debug("closing {}: request not complete within {} ms", remote_,
                          opts().read_timeout.count());
      return Close();
    }
    if (ec.category() == Clean(bhttp::error::bad_target).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      return Refuse(400, "BAD_REQUEST", "malformed HTTP request: " + ec.message());
    }
    Close();
  }

  void Refuse(unsigned status, std::string_view code, const std::string& message) {
    Answer({.status = status, .body = ErrorBody(code, message)});
  }
  // Answers `r` without reading anything more from this connection, then closes it (after a
  // linger that drops the rest of the request). A HEAD request gets the headers only.
  void Answer(Response r, bool head = false) {
    keep_alive_ = false;
    exchange_.reset();
    ++gen_;
    tcp().expires_never();
    Queue(Head(r.status, r.headers, r.content_type, r.BodySize(), false, true, false) +
              (head ? std::string() : r.JoinedBody()),
          nullptr, After::kClose);
  }

  // The request line, headers, version and peer of `msg` as a Request, without its body.
  Request HeadOf(const bhttp::request<bhttp::string_body>& msg) const {
    Request head;
    head.method = std::string(msg.method_string());
    head.target = std::string(msg.target());
    for (const auto& f : msg.base()) {
      head.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    head.keep_alive = msg.keep_alive();
    head.version = msg.version() < 11 ? 10 : 11;
    head.remote = remote_;
    return head;
  }

  // The handler's look at the request line and headers (Handler::Screen).
  std::optional<Response> Screen(const bhttp::request<bhttp::string_body>& msg) {
    const Request head = HeadOf(msg);
    try {
      return server_->handler.Screen(head);
    } catch (const std::exception& e) {
      server_->log->error("handler's screen threw: {}", e.what());
      return Response{.status = 500, .body = ErrorBody("INTERNAL", "internal error")};
    }
  }

  void Dispatch() {
    tcp().expires_never();
    auto msg = parser_->release();
    parser_.reset();
    if (large_body_room_) {  // ReadBody's room goes; what is left of a pipelined request stays
      large_body_room_ = false;
      buffer_.shrink_to_fit();
    }
    Request req = HeadOf(msg);
    req.body = direct_body_ ? std::move(*direct_body_) : std::move(msg.body());
    direct_body_.reset();
    keep_alive_ = req.keep_alive;
    http10_ = msg.version() < 11;
    // Kept (without its body) for the handshake, in case the handler accepts the upgrade.
    upgrade_request_.reset();
    if (bws::is_upgrade(msg)) upgrade_request_ = std::move(msg);
    streaming_ = false;
    ++gen_;
    auto ex = std::make_shared<ExchangeImpl>(std::move(req), this->shared_from_this(), gen_);
    exchange_ = ex;
    if (screened_refusal_) {  // refused by Screen, with no body: answered like any response
      Response r = std::move(*screened_refusal_);
      screened_refusal_.reset();
      ex->Respond(std::move(r));
      return;
    }
    if (!server_->EnterHandler()) return Close();
    WatchClient(gen_);
    try {
      server_->handler.Handle(ex);
    } catch (const std::exception& e) {
      server_->log->error("handler threw: {}", e.what());
      ex->Respond({.status = 500, .body = ErrorBody("INTERNAL", "internal error")});
    }
    server_->LeaveHandler();
  }

  // ---- noticing a client that goes away while its answer is prepared ----
  void WatchClient(uint64_t gen) {
    tcp().socket().async_wait(tcp::socket::wait_read,
                              [self = this->shared_from_this(), gen](Clean ec) {
                                if (ec || self->closed_ || gen != self->gen_ || !self->exchange_)
                                  return;
                                self->CheckGone(gen);
                              });
  }

  // Readable: either the peer closed (FIN/RST) or it sent more bytes (a pipelined request, a
  // TLS record). Bytes stay queued; then poll for a hang-up now and then instead.
  void CheckGone(uint64_t gen) {
    if (closed_ || gen != gen_ || !exchange_) return;
    pollfd p{tcp().socket().native_handle(), POLLIN | POLLRDHUP, 0};
    int n = ::poll(&p, 1, 0);
    if (n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      server_->log->debug("client {} went away before its answer was complete", remote_);
      return Close();
    }
    if (n > 0 && (p.revents & POLLIN)) {
      gone_timer_.expires_after(kGonePollInterval);
      gone_timer_.async_wait([self = this->shared_from_this(), gen](Clean ec) {
        if (!ec) self->CheckGone(gen);
      });
      return;
    }
    WatchClient(gen);
  }

  // Half-closes, then reads and drops what the client still sends (an unread body) for a
  // moment before closing: closing with unread bytes would reset the connection and the
  // client could lose the answer.
  void LingerClose() {
    Clean ignored;
    gone_timer_.cancel();
    tcp().socket().cancel(ignored);
    tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    tcp().expires_after(std::chrono::seconds(2));
    DrainInput();
  }
  void DrainInput() {
    auto buf = std::make_shared<std::array<char, 4096>>();
    tcp().async_read_some(net::buffer(*buf),
                          [self = this->shared_from_this(), buf](Clean ec, size_t) {
                            if (ec || self->closed_) return self->Close();
                            self->DrainInput();
                          });
  }

  // ---- writing: one write in flight, in order ----
  void Queue(std::string bytes, std::function<void(bool)> cb, After after) {
    Queue(Write{std::move(bytes), std::move(cb), after});
  }
  void Queue(Write w) {
    writes_.push_back(std::move(w));
    if (writes_.size() == 1) WriteFront();
  }

  void WriteFront() {
    if (closed_ || writes_.empty()) return;
    tcp().expires_after(opts().write_timeout);
    const Write& w = writes_.front();
    const std::array<net::const_buffer, 3> pieces = {
        net::buffer(w.size_line.data(), w.size_line_bytes), net::buffer(w.bytes),
        net::buffer("\r\n", w.crlf ? 2 : 0)};
    net::async_write(stream_, pieces, WholeWrites{},
                     [self = this->shared_from_this()](Clean ec, size_t) { self->Wrote(ec); });
  }

  void Wrote(Clean ec) {
    if (closed_) return;
    if (ec) {
      server_->log->debug("write to {} failed: {}", remote_, ec.message());
      return Close();
    }
    Write w = std::move(writes_.front());
    writes_.pop_front();
    if (w.cb) w.cb(true);
    if (closed_) return;
    if (!writes_.empty()) return WriteFront();
    tcp().expires_never();
    if (w.after == After::kClose) {
      if (exchange_) exchange_->Completed();
      exchange_.reset();
      ++gen_;
      return LingerClose();
    }
    if (w.after == After::kNext) {
      if (exchange_) exchange_->Completed();
      exchange_.reset();
      ++gen_;
      gone_timer_.cancel();
      Clean ignored;
      tcp().socket().cancel(ignored);  // the client watch
      ReadNext();
    }
  }

  std::shared_ptr<Server::Impl> server_;
  std::shared_ptr<ssl::context> tls_;  // outlives stream_, which refers to it
  Stream stream_;
  std::string remote_;
  uint64_t id_;
  typename Stream::executor_type executor_;
  beast::flat_buffer buffer_;
  bool large_body_room_ = false;  // ReadBody reserved kLargeBodyReadBytes: Dispatch gives it back
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<std::string> direct_body_;  // ReadBodyDirect's body, until Dispatch
  std::optional<bhttp::request<bhttp::string_body>> upgrade_request_;
  std::optional<Response> screened_refusal_;  // Screen's answer to a request without a body
  std::shared_ptr<ExchangeImpl> exchange_;
  uint64_t gen_ = 0;
  bool keep_alive_ = true;
  bool http10_ = false;
  bool streaming_ = false;
  bool closed_ = false;
  bool counted_ = true;  // in server_->connections
  std::deque<Write> writes_;
  net::steady_timer gone_timer_;
};

}  // namespace

void Server::Impl::Accept() {
  acceptor.async_accept(
      net::make_strand(io), [self = shared_from_this()](Clean ec, tcp::socket socket) {
        if (self->stopped) return;
        if (ec) {
          if (ec == net::error::operation_aborted) return;
          // Out of descriptors (EMFILE, ENFILE) or memory: the connection stays queued and an
          // immediate retry fails again at once. Wait 100 ms, doubling to 1 s, and say so
          // once per run of failures instead of spinning and logging in a loop.
          const int failures = ++self->accept_failures;
          if (failures == 1) {
            self->log->warn(
                "accept failed: {}; retrying in 100 ms, then less often (at most a second apart) "
                "until it succeeds",
                ec.message());
          }
          self->accept_retry.expires_after(
              std::chrono::milliseconds(std::min(1000, 100 << std::min(failures - 1, 4))));
          self->accept_retry.async_wait([self](Clean e) {
            if (!e && !self->stopped) self->Accept();
          });
          return;
        }
        if (self->accept_failures > 0) {
          self->log->info("accepting again after {} failed accept(s)", self->accept_failures);
          self->accept_failures = 0;
        }
        std::string remote;
        Clean rec;
        auto ep = socket.remote_endpoint(rec);
        if (!rec) remote = ep.address().to_string() + ":" + std::to_string(ep.port());
        if (self->connections >= self->options.max_connections) {
          self->log->warn("refusing {}: {} connections open (the maximum)", remote,
                          self->connections.load());
          Clean ignored;
          socket.close(ignored);
          return self->Accept();
        }
        socket.set_option(tcp::no_delay(true), rec);
        if (auto ctx = self->Tls()) {
          using S = beast::ssl_stream<beast::tcp_stream>;
          std::make_shared<Session<S>>(self, S(beast::tcp_stream(std::move(socket)), *ctx),
                                       std::move(remote), ctx)
              ->Start();
        } else {
          std::make_shared<Session<beast::tcp_stream>>(self, beast::tcp_stream(std::move(socket)),
                                                       std::move(remote))
              ->Start();
        }
        self->Accept();
      });
}

Server::Server(boost::asio::io_context& io, ServerOptions options, Handler& handler)
    : impl_(std::make_shared<Impl>(io, std::move(options), handler)) {}

Server::~Server() {
  Stop();
  // WebSockets still closing go on without timers; they end when the peer answers or the
  // io_context stops.
  impl_->StopTimers();
}

Status Server::Listen(const std::string& host_port) {
  if (impl_->options.tls) {
    auto ctx = LoadTls(*impl_->options.tls);
    if (!ctx) return std::unexpected(ctx.error());
    std::lock_guard lock(impl_->mu);
    impl_->tls = *ctx;
  }
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "listen address \"" + host_port + "\" must be host:port");
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = host_port.substr(colon + 1);
  Clean ec;
  tcp::resolver resolver(impl_->io);
  auto results = resolver.resolve(host.empty() ? "0.0.0.0" : host, port,
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "listen address \"" + host_port + "\" does not resolve: " + ec.message());
  }
  tcp::endpoint ep = results.begin()->endpoint();
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    Clean ignored;
    a.close(ignored);
    return MakeError(ErrorCode::kUnavailable,
                     "cannot listen on " + host_port + ": " + ec.message());
  }
  impl_->port = a.local_endpoint(ec).port();
  impl_->Accept();
  return OkStatus();
}

uint16_t Server::port() const {
  return impl_->port;
}

void Server::Stop() {
  if (impl_->stopped.exchange(true)) return;
  net::post(impl_->acceptor.get_executor(), [impl = impl_] {
    Clean ignored;
    impl->acceptor.close(ignored);
    impl->accept_retry.cancel();
  });
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& [id, w] : impl_->connections_by_id) {
      if (auto c = w.lock()) live.push_back(std::move(c));
    }
  }
  for (auto& c : live) {
    c->Shutdown();
  }
  // Handle() does not block: this wait is short. After it the handler is never called again.
  while (impl_->active_handlers.load() > 0) {
    std::this_thread::yield();
  }
}

Status Server::ReloadTls() {
  if (!impl_->options.tls) return OkStatus();
  auto ctx = LoadTls(*impl_->options.tls);
  if (!ctx) return std::unexpected(ctx.error());
  std::lock_guard lock(impl_->mu);
  impl_->tls = *ctx;
  return OkStatus();
}

size_t Server::connections() const {
  return impl_->connections;
}

}  // namespace edge::http
