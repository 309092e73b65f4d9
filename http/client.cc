#include "http/client.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <variant>

namespace edge::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

void SetTimeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

std::unexpected<Error> Unavailable(const std::string& what, const beast::error_code& ec) {
  return MakeError(ErrorCode::kUnavailable, what + ": " + ec.message());
}

}  // namespace

struct Client::Impl {
  ClientOptions options;
  std::string host;
  net::io_context io;
  std::unique_ptr<ssl::context> ctx;
  std::variant<std::monostate, tcp::socket, ssl::stream<tcp::socket>> stream;
  beast::flat_buffer buffer;

  tcp::socket& Lowest() {
    if (auto* s = std::get_if<tcp::socket>(&stream)) return *s;
    return std::get<ssl::stream<tcp::socket>>(stream).next_layer();
  }

  template <class Fn>
  auto With(Fn&& fn) {
    if (auto* s = std::get_if<tcp::socket>(&stream)) return fn(*s);
    return fn(std::get<ssl::stream<tcp::socket>>(stream));
  }

  // Runs the read `fn` again while it fails with EINTR: the socket's receive timeout makes the
  // kernel answer a signal that wakes this thread (a handler's, a stop and continue) with
  // EINTR instead of restarting the call. The parser keeps what was read; the read goes on.
  template <class Fn>
  void ReadRetrying(beast::error_code& ec, Fn&& fn) {
    for (int tries = 0; tries < 1000; ++tries) {
      ec = {};
      With(fn);
      if (ec != net::error::interrupted) return;
    }
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
    beast::error_code ec;
    auto req = Build(r);
    With([&](auto& s) { bhttp::write(s, req, ec); });
    if (ec) {
      Close();
      return Unavailable("write failed", ec);
    }
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(options.max_response_bytes);
    parser.header_limit(64 << 10);
    ReadRetrying(ec, [&](auto& s) { bhttp::read_header(s, buffer, parser, ec); });
    if (ec) {
      Close();
      return Unavailable("read failed", ec);
    }
    Response out;
    const auto& h = parser.get();
    out.status = h.result_int();
    for (const auto& f : h.base()) {
      out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    out.content_type = std::string(h[bhttp::field::content_type]);
    while (!parser.is_done()) {
      ReadRetrying(ec, [&](auto& s) { bhttp::read_some(s, buffer, parser, ec); });
      if (ec) {
        Close();
        return Unavailable("read failed", ec);
      }
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
    if (!parser.get().keep_alive()) Close();
    return out;
  }

  void Close() {
    if (std::holds_alternative<std::monostate>(stream)) return;
    beast::error_code ignored;
    Lowest().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close(ignored);
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
  impl->host = host + ":" + std::to_string(port);
  beast::error_code ec;
  tcp::resolver resolver(impl->io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return Unavailable("cannot resolve " + host, ec);
  tcp::socket sock(impl->io);
  net::connect(sock, results, ec);
  if (ec) return Unavailable("cannot connect to " + impl->host, ec);
  sock.set_option(tcp::no_delay(true), ec);
  SetTimeouts(sock.native_handle(), options.timeout);
  if (!options.tls) {
    impl->stream = std::move(sock);
    return std::unique_ptr<Client>(new Client(std::move(impl)));
  }
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
  impl->stream.emplace<ssl::stream<tcp::socket>>(std::move(sock), *impl->ctx);
  auto& s = std::get<ssl::stream<tcp::socket>>(impl->stream);
  const auto& t = *options.tls;
  if (!t.server_name.empty()) {
    SSL_set_tlsext_host_name(s.native_handle(), t.server_name.c_str());
    s.set_verify_callback(ssl::host_name_verification(t.server_name));
  }
  s.handshake(ssl::stream_base::client, ec);
  if (ec) return Unavailable("TLS handshake with " + impl->host + " failed", ec);
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
