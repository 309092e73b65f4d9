#include "http/client.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <limits>
#include <variant>

#include "common/string_fill.h"

namespace edge::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

constexpr size_t kReadBufferBytes = 64 * 1024;  // the header's reads (beast's at most)
// A body's reads start at kReadBufferBytes and double, up to this, each time one fills all the
// room it was given: a stream that is already there is taken a megabyte a read (the size of
// the worker door's chunks), a small answer never grows the buffer.
constexpr size_t kMaxBodyReadBytes = 1024 * 1024;
// An answer held in memory with a Content-Length of this or more is read straight into its
// body (Exchange), not through the read buffer and beast's parser.
constexpr size_t kDirectBodyBytes = 1024 * 1024;
constexpr uint32_t kMaxHeaderBytes = 64 * 1024;  // an answer's header fields (header_limit)
constexpr int kMaxInterimAnswers = 8;            // 1xx answers before the final one

}  // namespace

// Every wait is an asynchronous operation on the client's own io_context, run on the calling
// thread until it has completed. One watchdog timer bounds them all: a wait that has lasted
// `timeout` (a peer that accepts and then says nothing: a stalled process, a half-open link)
// has its socket closed, and ends with UNAVAILABLE "... timed out after N ms". (A socket receive
// timeout cannot do this: Asio's blocking operations answer EAGAIN by polling again without limit.)
// The watchdog is armed once and re-armed only when it fires early, for the wait then running: a
// streamed answer's thousands of reads do not each set and cancel a timer (each of those was a
// timerfd_settime: issue 14).
struct Client::Impl {
  ClientOptions options;
  std::string host;
  net::io_context io;
  std::unique_ptr<ssl::context> ctx;
  std::variant<std::monostate, beast::tcp_stream, ssl::stream<beast::tcp_stream>> stream;
  // Beast reads a header into it as much as it has room for: at least 512 bytes, at most
  // 64 KiB (beast::read_size). Without this reserve its capacity stayed near 512 bytes, and a
  // streamed answer was read 512 bytes at a time: a million reads, each with its own wait and
  // timer, for 512 MiB of NDJSON, at 40 % of the speed (issue 14). Capacity stays after each
  // consume; a client made for one small call (the worker's heartbeat) touches only the
  // pages its answer needs.
  beast::flat_buffer buffer;
  // The watchdog (declared after `io`, so it goes first). `wait_started` is when the wait
  // now running began; none runs between two calls.
  net::steady_timer watchdog{io};
  bool watchdog_armed = false;
  bool waiting = false;
  bool timed_out = false;
  std::chrono::steady_clock::time_point wait_started;

  beast::tcp_stream& Lowest() {
    if (auto* s = std::get_if<beast::tcp_stream>(&stream)) return *s;
    return std::get<ssl::stream<beast::tcp_stream>>(stream).next_layer();
  }

  template <class Fn>
  void With(Fn&& fn) {
    if (auto* s = std::get_if<beast::tcp_stream>(&stream)) return fn(*s);
    return fn(std::get<ssl::stream<beast::tcp_stream>>(stream));
  }

  void ArmWatchdog(std::chrono::steady_clock::time_point at) {
    watchdog_armed = true;
    watchdog.expires_at(at);
    watchdog.async_wait([this](const beast::error_code& ec) {
      watchdog_armed = false;
      if (ec || !waiting) return;  // idle between calls: the next wait arms it again
      const auto deadline = wait_started + options.timeout;
      if (std::chrono::steady_clock::now() < deadline) return ArmWatchdog(deadline);
      timed_out = true;
      beast::error_code ignored;
      // Closed, not just cancelled: an operation that would try again (a connect's next
      // address) ends too. The caller then closes what is left.
      if (!std::holds_alternative<std::monostate>(stream)) Lowest().socket().close(ignored);
    });
  }

  // Starts one operation with `start(handler)` on `s` (the stream, or a layer of it), bounded
  // by the timeout, and runs the io_context until it has completed. Returns its error.
  template <class Start>
  beast::error_code Await(Start&& start) {
    beast::error_code result = net::error::would_block;
    wait_started = std::chrono::steady_clock::now();
    waiting = true;
    timed_out = false;
    // Armed for this wait's deadline or earlier: when it fires early it re-arms itself.
    if (!watchdog_armed) ArmWatchdog(wait_started + options.timeout);
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    io.restart();
    while (result == net::error::would_block) {
      if (io.run_one() == 0) result = net::error::operation_aborted;  // out of work: a bug
    }
    waiting = false;
    if (timed_out) result = beast::error::timeout;
    return result;
  }

  // One read into `into`, as many bytes as the kernel has up to its size.
  beast::error_code ReadInto(net::mutable_buffer into, size_t& got) {
    beast::error_code ec;
    got = 0;
    With([&](auto& s) {
      ec = Await([&](auto h) {
        s.async_read_some(into, [&got, h = std::move(h)](beast::error_code e, size_t n) mutable {
          got = n;
          h(e);
        });
      });
    });
    return ec;
  }
  // One read of a body's bytes into `buffer`, as many as the kernel has up to `room`.
  beast::error_code ReadSome(size_t room, size_t& got) {
    const auto ec = ReadInto(buffer.prepare(room), got);
    buffer.commit(got);
    return ec;
  }
  // The rest of a body of `length` bytes, read straight into place in `body` (sized for it at
  // once, huge pages from 8 MiB): what the header's reads brought first, then reads of all
  // that is missing, each bounded by `timeout`. A file_read's answer of hundreds of MB is not
  // copied once more from the read buffer, 64 KiB at a time.
  beast::error_code ReadBodyDirect(size_t length, std::string& body) {
    ResizeUninitialized(body, length);  // every byte is read into place before it is seen
    size_t have = std::min(buffer.size(), length);
    net::buffer_copy(net::buffer(body.data(), have), buffer.data());
    buffer.consume(have);
    while (have < length) {
      size_t got = 0;
      auto ec = ReadInto(net::buffer(body.data() + have, length - have), got);
      if (ec == net::error::eof) return bhttp::error::partial_message;
      if (ec) return ec;
      have += got;
    }
    return {};
  }

  // A read that failed, saying why and naming the peer: a malformed or oversized answer, one
  // the peer cut short by closing, a connection that failed (a reset); a timeout as Failed.
  std::unexpected<Error> ReadFailed(const beast::error_code& ec) {
    if (ec == bhttp::error::body_limit) {
      return MakeError(
          ErrorCode::kUnavailable,
          "read failed: the answer from " + host + " is longer than the " +
              std::to_string(options.max_response_bytes) +
              " bytes a held answer may have (max_response_bytes): body limit exceeded");
    }
    if (ec == bhttp::error::header_limit) {
      return MakeError(ErrorCode::kUnavailable,
                       "read failed: the answer from " + host + " has a header longer than " +
                           std::to_string(kMaxHeaderBytes) + " bytes: header limit exceeded");
    }
    const auto& http_errors = bhttp::make_error_code(bhttp::error::bad_version).category();
    if (ec.category() == http_errors && ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message) {
      return MakeError(ErrorCode::kUnavailable, "read failed: the answer from " + host +
                                                    " is not valid HTTP: " + ec.message());
    }
    // Over TLS a peer that closes without close_notify is a truncated stream, not an end.
    if (ec == bhttp::error::partial_message || ec == bhttp::error::end_of_stream ||
        ec == ssl::error::stream_truncated) {
      return MakeError(ErrorCode::kUnavailable, "read failed: " + host +
                                                    " closed the connection before the whole "
                                                    "answer came: " +
                                                    ec.message());
    }
    if (ec == beast::error::timeout) return Failed("read failed", ec);
    return MakeError(ErrorCode::kUnavailable,
                     "read failed: the connection to " + host + " failed: " + ec.message());
  }

  std::unexpected<Error> Failed(const std::string& what, const beast::error_code& ec) {
    if (ec == beast::error::timeout) {
      return MakeError(ErrorCode::kUnavailable, what + ": timed out after " +
                                                    std::to_string(options.timeout.count()) +
                                                    " ms without an answer from " + host);
    }
    return MakeError(ErrorCode::kUnavailable, what + ": " + ec.message());
  }

  bhttp::request<bhttp::string_body> Build(Request& r) {
    bhttp::request<bhttp::string_body> req;
    req.method_string(r.method);
    req.target(r.target);
    req.version(11);
    req.set(bhttp::field::host, host);
    for (const auto& [k, v] : r.headers)
      req.insert(k, v);
    if (!r.keep_alive) req.keep_alive(false);
    req.body() = std::move(r.body);
    req.prepare_payload();
    return req;
  }

  Result<Response> Exchange(Request r, const std::function<bool(std::string_view)>* on_data) {
    if (std::holds_alternative<std::monostate>(stream)) {
      return MakeError(ErrorCode::kUnavailable, "the connection is closed");
    }
    auto req = Build(r);
    beast::error_code ec;
    // Written piece by piece, each piece its own wait: a large body on a slow link may take
    // longer than `timeout` as long as it keeps moving.
    bhttp::request_serializer<bhttp::string_body> sr{req};
    while (!ec && !sr.is_done()) {
      With([&](auto& s) {
        ec = Await([&](auto h) { bhttp::async_write_some(s, sr, std::move(h)); });
      });
    }
    if (ec) {
      Close();
      return Failed("write failed", ec);
    }
    // Interim answers (1xx but 101, RFC 9110 §15.2) come before the final one and are read
    // and dropped: the final answer, not a stale one, goes to this call. Each parse is set up
    // before its header is read (beast checks a Content-Length against the body limit, and
    // decides whether a body follows, as the header ends).
    std::optional<bhttp::response_parser<bhttp::string_body>> parser_slot;
    bool switched = false;
    for (int interim = 0;; ++interim) {
      auto& p = parser_slot.emplace();
      p.header_limit(kMaxHeaderBytes);
      // An answer held in memory is bounded; a streamed one is handed over piece by piece and
      // may be as long as it keeps moving (`worker exec-stream` of more than a GiB). (The
      // largest value, not boost::none: beast 1.74 compares a Content-Length with the optional
      // limit, and every length is greater than none.)
      p.body_limit(on_data != nullptr ? std::numeric_limits<uint64_t>::max()
                                      : options.max_response_bytes);
      // The answer to HEAD has the header of the answer GET would have, and no body.
      if (req.method() == bhttp::verb::head) p.skip(true);
      With([&](auto& s) {
        ec = Await([&](auto h) { bhttp::async_read_header(s, buffer, p, std::move(h)); });
      });
      if (ec) {
        Close();
        return ReadFailed(ec);
      }
      const unsigned status = p.get().result_int();
      // 101 Switching Protocols is final; this client never asks for it, so what follows is
      // not HTTP, and the connection is closed after the call.
      if (status == 101) switched = true;
      if (status < 100 || status >= 200 || status == 101) break;
      if (interim == kMaxInterimAnswers) {
        Close();
        return MakeError(ErrorCode::kUnavailable, "read failed: " + host + " sent more than " +
                                                      std::to_string(kMaxInterimAnswers) +
                                                      " interim (1xx) answers and no final one");
      }
    }
    auto& parser = *parser_slot;
    // A streamed chunked body goes to `on_data` straight from the read buffer, a chunk's bytes
    // at a time, without being copied into the message's body first.
    bool stopped = false;
    auto on_chunk = [&](uint64_t, beast::string_view piece, beast::error_code& cec) -> size_t {
      if (!piece.empty() && !(*on_data)(std::string_view(piece.data(), piece.size()))) {
        stopped = true;
        cec = net::error::operation_aborted;  // ends the parse; the connection is closed
      }
      return piece.size();
    };
    if (on_data != nullptr) parser.on_chunk_body(on_chunk);
    Response out;
    const auto& h = parser.get();
    out.status = h.result_int();
    for (const auto& f : h.base()) {
      out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    out.content_type = std::string(h[bhttp::field::content_type]);
    // (The body limit checked the Content-Length as the header ended.)
    if (const auto length = parser.content_length(); on_data == nullptr && !parser.is_done() &&
                                                     !parser.chunked() && length &&
                                                     *length >= kDirectBodyBytes) {
      if (ec = ReadBodyDirect(static_cast<size_t>(*length), out.body); ec) {
        out.body.clear();
        Close();
        return ReadFailed(ec);
      }
      if (switched || !parser.get().keep_alive()) Close();
      return out;
    }
    // The body: what the header's reads brought first, then reads of growing size, each
    // parsed as it comes (beast's own body reads are 64 KiB at most).
    size_t room = kReadBufferBytes;
    bool need_read = buffer.size() == 0;
    while (!parser.is_done()) {
      if (need_read) {
        size_t got = 0;
        ec = ReadSome(room, got);
        if (ec == net::error::eof) {
          parser.put_eof(ec);  // ends a body that runs to the close; anything else is cut
          if (!ec) continue;
        }
        if (ec) {
          Close();
          return ReadFailed(ec);
        }
        if (got == room && room < kMaxBodyReadBytes) room *= 2;
        need_read = false;
      }
      const size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (stopped) {
        Close();
        return out;
      }
      if (ec == bhttp::error::need_more || (!ec && used == 0)) {
        ec = {};
        need_read = true;
      } else if (ec) {
        Close();
        return ReadFailed(ec);
      }
      if (buffer.size() == 0) need_read = true;
      if (on_data != nullptr) {
        auto& body = parser.get().body();
        if (!body.empty()) {
          bool go_on = (*on_data)(body);
          body.clear();
          if (!go_on) {
            Close();
            return out;
          }
        }
      }
    }
    if (on_data == nullptr) out.body = std::move(parser.get().body());
    if (switched || !parser.get().keep_alive()) Close();
    return out;
  }

  void Close() {
    if (std::holds_alternative<std::monostate>(stream)) return;
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
    stream = std::monostate{};
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() {
  if (impl_) impl_->Close();
}

Result<std::unique_ptr<Client>> Client::Connect(const std::string& host, uint16_t port,
                                                ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->buffer.reserve(kReadBufferBytes);
  impl->host = host + ":" + std::to_string(port);
  beast::error_code ec;
  // Name resolution is getaddrinfo's, bounded by resolv.conf (timeout x attempts, 5 s x 2 by
  // default), not by `timeout`; an address given as digits resolves at once.
  tcp::resolver resolver(impl->io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return MakeError(ErrorCode::kUnavailable, "cannot resolve " + host + ": " + ec.message());
  auto& sock = impl->stream.emplace<beast::tcp_stream>(impl->io);
  ec = impl->Await([&](auto h) { sock.async_connect(results, std::move(h)); });
  if (ec) return impl->Failed("cannot connect to " + impl->host, ec);
  sock.socket().set_option(tcp::no_delay(true), ec);
  if (!options.tls) return std::unique_ptr<Client>(new Client(std::move(impl)));
  try {
    impl->ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
    const auto& t = *options.tls;
    if (t.insecure_skip_verify) {
      impl->ctx->set_verify_mode(ssl::verify_none);
    } else {
      if (t.ca_file.empty()) {
        impl->ctx->set_default_verify_paths();
      } else {
        impl->ctx->load_verify_file(t.ca_file);
      }
      impl->ctx->set_verify_mode(ssl::verify_peer);
    }
    if (!t.cert_file.empty()) impl->ctx->use_certificate_chain_file(t.cert_file);
    if (!t.key_file.empty()) impl->ctx->use_private_key_file(t.key_file, ssl::context::pem);
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("client TLS files could not be loaded: ") + e.what());
  }
  beast::tcp_stream connected = std::move(sock);
  auto& s = impl->stream.emplace<ssl::stream<beast::tcp_stream>>(std::move(connected), *impl->ctx);
  const auto& t = *options.tls;
  if (!t.server_name.empty()) {
    SSL_set_tlsext_host_name(s.native_handle(), t.server_name.c_str());
    s.set_verify_callback(ssl::host_name_verification(t.server_name));
  }
  ec = impl->Await([&](auto h) { s.async_handshake(ssl::stream_base::client, std::move(h)); });
  if (ec) return impl->Failed("TLS handshake with " + impl->host + " failed", ec);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<Response> Client::Send(Request request) {
  return impl_->Exchange(std::move(request), nullptr);
}

Result<Response> Client::SendStreaming(Request request,
                                       const std::function<bool(std::string_view)>& on_data) {
  return impl_->Exchange(std::move(request), &on_data);
}

void Client::Close() {
  impl_->Close();
}

}  // namespace edge::http
