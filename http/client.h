// edge_http Client: a small blocking HTTP/1.1 client on Boost.Beast for the callers that make
// one request at a time (the integration tests, `edge-controller worker call`, the worker's
// heartbeat and lease renewal). Keep-alive: requests reuse the connection. Optional TLS with
// a CA to verify the server and a client certificate (mTLS). Every wait — connect, TLS
// handshake, each piece written and each read — is bounded by `timeout` (the wait, not the
// whole exchange: a large request or a streamed answer may last longer as long as it keeps
// moving); past it the call is UNAVAILABLE "... timed out after N ms ..." and the connection
// is closed. A streamed body is handed over as it arrives. Interim answers (1xx but 101) are
// read and dropped, each header its own wait (at most 8 of them); the answer to HEAD has no
// body; after a 101 the connection is closed. An answer that is not valid HTTP, has header
// fields over 64 KiB, is held and longer than max_response_bytes, or is cut short by the peer,
// and a connection that fails while an answer is read, is UNAVAILABLE saying which and naming
// the peer (host:port), and closes the connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "http/message.h"

namespace edge::http {

struct ClientTls {
  std::string ca_file;                // verifies the server ("" = the system's trust store)
  bool insecure_skip_verify = false;  // tests only: the server is not verified at all
  std::string cert_file;
  std::string key_file;
  std::string server_name;  // SNI + host name check ("" = not checked)
};

struct ClientOptions {
  std::chrono::milliseconds timeout{30'000};
  std::optional<ClientTls> tls;
  // Bounds an answer held in memory (Send). A streamed answer (SendStreaming) is handed over
  // piece by piece and is not bounded in total.
  uint64_t max_response_bytes = 1ull << 30;
};

class Client {
 public:
  // UNAVAILABLE naming the address when the connection (or TLS handshake) fails.
  static Result<std::unique_ptr<Client>> Connect(const std::string& host, uint16_t port,
                                                 ClientOptions options = {});
  ~Client();

  // Sends `request` (method, target, headers, body; Host and Content-Length are added) and
  // reads the whole answer. UNAVAILABLE when the connection fails or closes. The body is
  // moved into the message sent: pass a temporary (or std::move) to spare a copy.
  Result<Response> Send(Request request);
  // Like Send, but hands each piece of the body to `on_data` as it arrives (the returned
  // Response has an empty body). `on_data` returning false closes the connection at once
  // (the client going away mid-stream).
  Result<Response> SendStreaming(Request request,
                                 const std::function<bool(std::string_view)>& on_data);
  // Closes the connection (without any TLS close_notify).
  void Close();

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace edge::http
