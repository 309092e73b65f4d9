// Internal to edge_http (included by server.cc only): WsConnection<Stream>, the WebSocket an
// HTTP session becomes when its handler accepts an upgrade (plain TCP or TLS). The behaviour
// is the one http/websocket.h documents; this is how it is built:
// - Everything but the public WebSocket calls runs on the connection's strand (the executor
//   of the HTTP session it came from). SendText/Close take a small mutex and post.
// - One message write in flight (Beast serialises pings, pongs and the close frame between
//   message frames); one read always pending, read piecewise so every piece counts as heard.
// - The timers (ping, idle, write progress, close handshake) are deadlines on the server's
//   injected clock, checked by Tick(); one TimerQueue timer at a time is armed for the
//   earliest deadline, and its callback only posts to the strand (it holds no strong
//   reference, so the connection is never destroyed on the timer thread).
// - Finish() runs once: it closes the socket, stops counting the connection and calls
//   OnClosed (unless Server::Stop has begun), then drops the handler.
#pragma once

#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <deque>
#include <optional>

#include "common/utf8.h"
#include "http/server_impl.h"
#include "http/websocket.h"

namespace edge::http::detail {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace bws = beast::websocket;
namespace net = boost::asio;

// Header values go on the wire as given; CR, LF and NUL would split them.
std::string HeaderSafe(std::string_view v);

// RFC 6455 §7.4: the codes an endpoint may put in a close frame.
inline bool SendableCloseCode(uint16_t code) {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
         (code >= 3000 && code <= 4999);
}

template <class Stream>
class WsConnection final : public WebSocket,
                           public Connection,
                           public std::enable_shared_from_this<WsConnection<Stream>> {
 public:
  using Executor = decltype(std::declval<Stream&>().get_executor());
  using Ws = bws::stream<Stream, /*deflateSupported=*/false>;
  using UpgradeRequest = bhttp::request<bhttp::string_body>;

  WsConnection(std::shared_ptr<Server::Impl> server, Executor ex, WebSocketOptions options,
               std::shared_ptr<WebSocketHandler> handler, std::string remote)
      : server_(std::move(server)),
        ex_(std::move(ex)),
        opts_(std::move(options)),
        handler_(std::move(handler)),
        remote_(std::move(remote)),
        id_(server_->next_id++) {}

  ~WsConnection() override {
    if (counted_) {
      --server_->connections;
      server_->Unregister(id_);
    }
  }

  // ---- WebSocket (any thread) ----
  Status SendText(std::string text) override {
    if (!IsValidUtf8(text)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "a WebSocket text message must be valid UTF-8; byte " +
                           std::to_string(ValidUtf8Prefix(text)) + " of " +
                           std::to_string(text.size()) + " is not");
    }
    std::lock_guard lock(mu_);
    if (closed_) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "the WebSocket to " + remote_ + " is closed");
    }
    queued_bytes_ += text.size();
    ++queued_messages_;
    queue_.push_back(std::move(text));
    if (!kick_posted_) {
      kick_posted_ = true;
      net::post(ex_, [self = this->shared_from_this()] { self->Kick(); });
    }
    return OkStatus();
  }

  void Close(uint16_t code, std::string reason, Pending pending) override {
    if (!MarkClosed(pending)) return;
    if (!SendableCloseCode(code)) code = close_code::kInternalError;
    net::post(ex_, [self = this->shared_from_this(), code, r = std::move(reason)]() mutable {
      self->StartClose(code, std::move(r), Pending::kFlush);  // dropped already if asked
    });
  }

  size_t queued_messages() const override { return queued_messages_; }
  size_t queued_bytes() const override { return queued_bytes_; }
  uint64_t pongs_received() const override { return pongs_; }
  bool closed() const override {
    std::lock_guard lock(mu_);
    return closed_;
  }
  const std::string& remote() const override { return remote_; }

  // ---- Connection (any thread) ----
  void Shutdown() override {
    MarkClosed(Pending::kDrop);
    net::post(ex_, [self = this->shared_from_this()] {
      self->StartClose(close_code::kGoingAway, "server stopping", Pending::kDrop);
    });
  }

  // ---- from the HTTP session, on the strand ----
  // Takes over the session's stream and answers the upgrade.
  void Begin(Stream stream, UpgradeRequest request, std::shared_ptr<net::ssl::context> tls) {
    tls_ = std::move(tls);
    ws_.emplace(std::move(stream));
    request_ = std::move(request);
    counted_ = true;
    ++server_->connections;
    server_->Register(id_, this->weak_from_this());
    if (server_->stopped) {
      // Stop ran after the session was listed: nothing may be started any more.
      return Finish(close_code::kGoingAway, "server stopping");
    }
    // Silence and pings count from the handshake on (before its answer reaches the client).
    last_heard_ = Now();
    next_ping_at_ = last_heard_ + opts_.ping_interval;
    ws_->read_message_max(opts_.max_frame_size);
    ws_->set_option(bws::stream_base::decorator(
        [headers = opts_.response_headers, sub = opts_.subprotocol](bws::response_type& res) {
          for (const auto& [k, v] : headers)
            res.insert(HeaderSafe(k), HeaderSafe(v));
          if (!sub.empty()) res.set(bhttp::field::sec_websocket_protocol, HeaderSafe(sub));
        }));
    ws_->control_callback([this](bws::frame_type kind, beast::string_view) {
      last_heard_ = Now();
      if (kind == bws::frame_type::pong) ++pongs_;
      if (kind == bws::frame_type::close && !peer_close_seen_) {
        peer_close_seen_ = true;
        if (!close_started_) close_started_ = Now();
        Rearm();
      }
    });
    state_ = State::kHandshake;
    handshake_started_ = Now();
    Rearm();
    ws_->async_accept(
        *request_, [self = this->shared_from_this()](beast::error_code ec) { self->Accepted(ec); });
  }

  // The session ended before the upgrade could start.
  void Abort(std::string why) { Finish(close_code::kAbnormal, std::move(why)); }

 private:
  enum class State { kPending, kHandshake, kOpen, kFinished };
  using MonoTime = Clock::MonoTime;

  MonoTime Now() const { return server_->clock.Monotonic(); }
  std::chrono::milliseconds write_timeout() const { return server_->options.write_timeout; }
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(*ws_); }

  // Refuses further SendText; with kDrop also drops what is queued (even when it was closed
  // already, so a later Stop drops what a flushing Close still had). False when it was
  // closed already.
  bool MarkClosed(Pending pending) {
    std::lock_guard lock(mu_);
    if (pending == Pending::kDrop) {
      for (const auto& m : queue_)
        queued_bytes_ -= m.size();
      queued_messages_ -= queue_.size();
      queue_.clear();
    }
    if (closed_) return false;
    closed_ = true;
    return true;
  }

  void Accepted(beast::error_code ec) {
    handshake_started_.reset();
    request_.reset();
    if (state_ == State::kFinished) return;
    if (ec) {
      server_->log->debug("WebSocket handshake with {} failed: {}", remote_, ec.message());
      return HardClose("the WebSocket handshake failed: " + ec.message());
    }
    server_->log->debug("WebSocket open with {}", remote_);
    state_ = State::kOpen;
    ReadMore();
    WriteNext();  // what was queued meanwhile, then a close asked for meanwhile
    Rearm();
  }

  // ---- reading ----
  void ReadMore() {
    ws_->async_read_some(
        read_buf_, 64 << 10,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->Read(ec); });
  }

  void Read(beast::error_code ec) {
    if (state_ == State::kFinished) return;
    if (ec) return ReadEnded(ec);
    last_heard_ = Now();
    if (!ws_->got_text()) {
      read_buf_.consume(read_buf_.size());
      StartClose(close_code::kUnsupportedData, "binary messages are not accepted", Pending::kDrop);
    } else if (ws_->is_message_done()) {
      std::string text = beast::buffers_to_string(read_buf_.data());
      read_buf_.consume(read_buf_.size());
      // Once closing, what still arrives is read (to reach the peer's close) and dropped.
      if (!Closing()) Deliver(std::move(text));
    }
    if (state_ != State::kFinished) ReadMore();
  }

  void ReadEnded(beast::error_code ec) {
    uint16_t code = close_code::kAbnormal;
    std::string reason = ec.message();
    if (close_code_) {
      code = *close_code_;
      reason = close_reason_;
    } else if (ec == bws::error::closed || peer_close_seen_) {
      std::tie(code, reason) = PeerClose();
    } else if (ec == bws::error::message_too_big) {
      code = close_code::kTooBig;
      reason = "a message above " + std::to_string(opts_.max_frame_size) + " bytes";
    } else if (ec == bws::error::bad_frame_payload) {
      code = close_code::kInvalidPayload;
    } else if (ec.category() == beast::error_code(bws::error::closed).category()) {
      code = close_code::kProtocolError;
    }
    server_->log->debug("WebSocket with {} ended ({}): {}", remote_, code, ec.message());
    Finish(code, std::move(reason));
  }

  std::pair<uint16_t, std::string> PeerClose() const {
    const auto& r = ws_->reason();
    if (r.code == bws::close_code::none) return {close_code::kNoStatus, ""};
    return {static_cast<uint16_t>(r.code), std::string(r.reason.data(), r.reason.size())};
  }

  void Deliver(std::string text) {
    if (!handler_ || !server_->EnterHandler()) return;
    try {
      handler_->OnText(std::move(text));
    } catch (const std::exception& e) {
      server_->log->error("WebSocket handler threw: {}", e.what());
      StartClose(close_code::kInternalError, "internal error", Pending::kDrop);
    }
    server_->LeaveHandler();
  }

  // ---- writing ----
  void Kick() {
    {
      std::lock_guard lock(mu_);
      kick_posted_ = false;
    }
    WriteNext();
  }

  // The next queued message; once the queue is empty, the close frame if one is due.
  void WriteNext() {
    if (state_ != State::kOpen || writing_ || close_frame_sent_) return;
    bool empty = false;
    {
      std::lock_guard lock(mu_);
      empty = queue_.empty();
      if (!empty) {
        current_ = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (empty) return MaybeSendClose();
    writing_ = true;
    write_started_ = Now();
    Rearm();
    ws_->text(true);
    ws_->async_write(net::buffer(current_), [self = this->shared_from_this()](
                                                beast::error_code ec, size_t) { self->Wrote(ec); });
  }

  void Wrote(beast::error_code ec) {
    writing_ = false;
    write_started_.reset();
    queued_bytes_ -= current_.size();
    --queued_messages_;
    current_ = std::string();
    if (state_ == State::kFinished) return;
    if (ec && ec != net::error::operation_aborted && !Closing()) {
      return HardClose("a write failed: " + ec.message());
    }
    if (!ec && state_ == State::kOpen && handler_ && server_->EnterHandler()) {
      try {
        handler_->OnWritten();
      } catch (const std::exception& e) {
        server_->log->error("WebSocket handler threw: {}", e.what());
        StartClose(close_code::kInternalError, "internal error", Pending::kDrop);
      }
      server_->LeaveHandler();
    }
    WriteNext();
  }

  void Ping() {
    ping_started_ = Now();
    ws_->async_ping({}, [self = this->shared_from_this()](beast::error_code ec) {
      self->ping_started_.reset();
      if (self->state_ == State::kFinished) return;
      if (ec) self->server_->log->debug("ping to {} failed: {}", self->remote_, ec.message());
      self->Rearm();  // the next ping's deadline counts again
    });
  }

  // ---- closing ----
  bool Closing() const { return close_code_.has_value() || peer_close_seen_; }

  // Decides to close with `code`; the close frame follows the queued messages (or at once,
  // with kDrop). The first decision wins.
  void StartClose(uint16_t code, std::string reason, Pending pending) {
    MarkClosed(pending);
    if (state_ == State::kFinished || close_code_) return;
    if (reason.size() > 123) reason.resize(Utf8CutPoint(reason, 123));
    close_code_ = code;
    close_reason_ = std::move(reason);
    // kPending / kHandshake: Accepted's WriteNext sends it once the handshake is done.
    if (state_ == State::kOpen) WriteNext();
    Rearm();
  }

  void MaybeSendClose() {
    if (!close_code_ || close_frame_sent_ || writing_ || state_ != State::kOpen) return;
    close_frame_sent_ = true;
    if (!close_started_) close_started_ = Now();
    Rearm();
    if (peer_close_seen_ || !ws_->is_open()) return;  // Beast is closing already
    ws_->async_close(bws::close_reason(static_cast<bws::close_code>(*close_code_), close_reason_),
                     [self = this->shared_from_this()](beast::error_code ec) {
                       // The pending read ends the connection (it sees the peer's close).
                       if (ec && self->state_ != State::kFinished) {
                         self->server_->log->debug("close to {}: {}", self->remote_, ec.message());
                       }
                     });
  }

  // Drops the TCP connection now; pending operations end with errors and are ignored.
  void HardClose(std::string why) {
    if (state_ == State::kFinished) return;
    server_->log->debug("dropping the WebSocket with {}: {}", remote_, why);
    uint16_t code = close_code::kAbnormal;
    std::string reason = std::move(why);
    if (close_code_) {
      code = *close_code_;
      reason = close_reason_;
    } else if (peer_close_seen_) {
      std::tie(code, reason) = PeerClose();
    }
    Finish(code, std::move(reason));
  }

  void Finish(uint16_t code, std::string reason) {
    if (state_ == State::kFinished) return;
    state_ = State::kFinished;
    MarkClosed(Pending::kDrop);
    CancelTimer();
    if (ws_) {
      beast::error_code ignored;
      Tcp().socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
      Tcp().socket().close(ignored);
    }
    if (counted_) {
      counted_ = false;
      --server_->connections;
      server_->Unregister(id_);
    }
    if (auto handler = std::move(handler_); handler && server_->EnterHandler()) {
      try {
        handler->OnClosed(code, std::move(reason));
      } catch (const std::exception& e) {
        server_->log->error("WebSocket handler threw: {}", e.what());
      }
      server_->LeaveHandler();
    }
  }

  // ---- timers ----
  void Tick() {
    if (state_ == State::kFinished) return;
    const MonoTime now = Now();
    const auto wt = write_timeout();
    if (handshake_started_ && now >= *handshake_started_ + wt) {
      return HardClose("the handshake response was not written within " +
                       std::to_string(wt.count()) + " ms");
    }
    if ((write_started_ && now >= *write_started_ + wt) ||
        (ping_started_ && now >= *ping_started_ + wt)) {
      return HardClose("a write made no progress for " + std::to_string(wt.count()) + " ms");
    }
    if (state_ == State::kOpen && !close_started_ && !ws_->is_open()) {
      // Beast failed the connection by itself (1002, 1007, 1009) and waits for the peer.
      close_started_ = now;
    }
    if (close_started_ && now >= *close_started_ + opts_.close_timeout) {
      return HardClose("the close handshake did not finish within " +
                       std::to_string(opts_.close_timeout.count()) + " ms");
    }
    if (state_ == State::kOpen && !Closing() && ws_->is_open()) {
      if (now >= last_heard_ + opts_.idle_timeout) {
        server_->log->debug("closing the WebSocket with {}: silent for {} ms", remote_,
                            opts_.idle_timeout.count());
        StartClose(close_code::kGoingAway, "idle timeout", Pending::kDrop);
      } else if (now >= next_ping_at_ && !ping_started_) {
        Ping();
        next_ping_at_ = now + opts_.ping_interval;
      }
    }
    Rearm();
  }

  // Arms the timer for the earliest deadline (when no earlier one is armed).
  void Rearm() {
    if (state_ == State::kFinished) return;
    std::optional<MonoTime> due;
    auto consider = [&](MonoTime t) {
      if (!due || t < *due) due = t;
    };
    const auto wt = write_timeout();
    if (handshake_started_) consider(*handshake_started_ + wt);
    if (write_started_) consider(*write_started_ + wt);
    if (ping_started_) consider(*ping_started_ + wt);
    if (close_started_) consider(*close_started_ + opts_.close_timeout);
    if (state_ == State::kOpen && !Closing()) {
      if (!ping_started_) consider(next_ping_at_);
      consider(last_heard_ + opts_.idle_timeout);
    }
    if (!due) return;
    if (timer_id_ != 0 && timer_due_ <= *due) return;
    CancelTimer();
    const MonoTime now = Now();
    const auto delay = std::chrono::ceil<std::chrono::milliseconds>(*due - now);
    timer_due_ = *due;
    timer_id_ = server_->Timers().After(
        delay, [ex = ex_, weak = this->weak_from_this(), id = ++timer_seq_] {
          net::post(ex, [weak, id] {
            if (auto self = weak.lock()) self->TimerFired(id);
          });
        });
    armed_seq_ = timer_seq_;
    // After() counts the delay from its own reading of the clock: a clock that jumped past
    // `due` meanwhile (a test's) would make the timer late by the jump. Look again then.
    if (Now() != now && Now() >= *due) {
      net::post(ex_, [self = this->shared_from_this()] { self->Tick(); });
    }
  }

  void TimerFired(uint64_t seq) {
    if (seq == armed_seq_) timer_id_ = 0;
    Tick();
  }

  void CancelTimer() {
    if (timer_id_ != 0) server_->Timers().Cancel(timer_id_);
    timer_id_ = 0;
  }

  std::shared_ptr<Server::Impl> server_;
  Executor ex_;
  const WebSocketOptions opts_;
  std::shared_ptr<WebSocketHandler> handler_;  // until Finish
  const std::string remote_;
  const uint64_t id_;

  // Guarded by mu_ (any thread).
  mutable std::mutex mu_;
  bool closed_ = false;
  bool kick_posted_ = false;
  std::deque<std::string> queue_;
  // Written under mu_ or on the strand; read anywhere.
  std::atomic<size_t> queued_bytes_{0};
  std::atomic<size_t> queued_messages_{0};
  std::atomic<uint64_t> pongs_{0};

  // The strand's.
  std::shared_ptr<net::ssl::context> tls_;  // outlives ws_, which refers to it
  std::optional<Ws> ws_;
  std::optional<UpgradeRequest> request_;  // until the handshake is done
  State state_ = State::kPending;
  bool counted_ = false;
  beast::flat_buffer read_buf_;
  std::string current_;  // the message being written
  bool writing_ = false;
  bool peer_close_seen_ = false;
  std::optional<uint16_t> close_code_;  // ours, once we decided to close
  bool close_frame_sent_ = false;
  std::string close_reason_;
  MonoTime last_heard_{};
  MonoTime next_ping_at_{};
  std::optional<MonoTime> handshake_started_, write_started_, ping_started_, close_started_;
  TimerQueue::TimerId timer_id_ = 0;
  MonoTime timer_due_{};
  uint64_t timer_seq_ = 0;
  uint64_t armed_seq_ = 0;
};

}  // namespace edge::http::detail
