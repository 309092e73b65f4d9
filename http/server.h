// edge_http Server: HTTP/1.1 and WebSocket on Boost.Beast over a caller's io_context
// (design.md §4) — the agent's worker RPC door, the controller's worker control-plane
// endpoints and its operator API (REST + the WebSocket relay of wire.md §5.3).
//
// - Many connections on the io_context, each on its own strand: no thread per connection.
// - Keep-alive (HTTP/1.1 default; "Connection: close" and HTTP/1.0 close after the answer).
// - HEAD: the handler answers as for GET; the server writes the headers (Content-Length of
//   that body included) and leaves the body out.
// - Limits, each answered before the handler sees anything: request line + headers above
//   `max_header_bytes` → 431 and close; a body above `max_body_bytes` → 413 and close (a
//   Content-Length above it is refused before the body is read); a malformed request → 400
//   and close; a request not complete `read_timeout` after its first byte (slowloris) →
//   closed; a connection idle `idle_timeout` between requests → closed; a response write
//   that does not progress for `write_timeout` → closed; past `max_connections` new
//   connections are closed at once.
// - Optional TLS; with a client CA, mutual TLS: a client certificate is required and
//   verified (handshake failure otherwise). ReloadTls swaps the certificates for new
//   connections (SIGHUP).
// - While a handler works, the server watches the connection: a client that closes it is
//   reported through Exchange::OnClientGone (a streamed exec is cancelled that way).
// - WebSocket: a handler may accept an upgrade request instead of answering
//   (Exchange::AcceptWebSocket, http/websocket.h), over plain TCP or TLS alike. The
//   connection then stays a WebSocket until it closes and still counts toward
//   `max_connections`; its ping, idle, write-progress and close-handshake timers run on
//   `clock` (the HTTP timeouts above run in real time on the io_context).
// - Stop() closes WebSockets with 1001 and HTTP connections at once; after it returns no
//   handler (Handler, WebSocketHandler) is called again.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "common/error.h"
#include "http/message.h"
#include "http/websocket.h"

namespace edge::http {

struct TlsFiles {
  std::string cert_file;       // PEM chain
  std::string key_file;        // PEM private key
  std::string client_ca_file;  // "" = no client certificate asked; else required + verified
};

struct ServerOptions {
  size_t max_header_bytes = 16 << 10;
  uint64_t max_body_bytes = 64ull << 20;
  std::chrono::milliseconds read_timeout{30'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds write_timeout{60'000};
  size_t max_connections = 4096;
  std::optional<TlsFiles> tls;
  std::string name = "http";  // logger module
  // The WebSockets' timers (ping, idle, write progress, close handshake); nullptr = the
  // system clock. A test passes a ManualClock and advances it. Must outlive the
  // io_context's handlers of this server.
  Clock* clock = nullptr;
};

class Server {
 public:
  // The handler and io_context must outlive the server.
  Server(boost::asio::io_context& io, ServerOptions options, Handler& handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds "host:port" (port 0 = any free one; empty host = all addresses) and starts
  // accepting. UNAVAILABLE naming the address when it cannot bind; INVALID_ARGUMENT for a
  // bad address or unreadable TLS files.
  Status Listen(const std::string& host_port);
  // The bound port (after Listen).
  uint16_t port() const;
  // Stops accepting and closes every connection (handlers still running see client_gone;
  // WebSockets get a close frame 1001 "server stopping", bounded by their close_timeout
  // while the server object lives). Once it returns no handler is called again: neither
  // Handler nor any WebSocketHandler (so a WebSocket that Stop closes gets no OnClosed); they
  // may be destroyed. Connections end on the io_context's threads. Not to be called from
  // inside a handler.
  void Stop();
  // Loads the TLS files again for new connections; on error the old ones stay.
  Status ReloadTls();

  // Open connections, WebSockets included.
  size_t connections() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace edge::http
