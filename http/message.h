// HTTP/1.1 messages as plain values, and the Exchange a handler answers through (edge_http).
// Nothing here exposes Boost.Beast: a handler (the worker RPC door, the controller's worker
// endpoints, the operator API) sees a Request and answers with one Response, with a streamed
// (chunked) response flushed chunk by chunk, or by accepting a WebSocket upgrade
// (http/websocket.h). A fake Exchange makes a handler testable without sockets.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace edge::http {

class WebSocket;
class WebSocketHandler;
struct WebSocketOptions;

using Headers = std::vector<std::pair<std::string, std::string>>;

// The value of the first header named `name` (case-insensitive), nullopt when absent.
std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name);

struct Request {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // "/rpc?x=1"
  Headers headers;
  std::string body;
  std::string remote;      // "ip:port" of the peer
  bool keep_alive = true;  // HTTP/1.1 default; false for "Connection: close" or HTTP/1.0
  unsigned version = 11;   // 11 for HTTP/1.1, 10 for HTTP/1.0

  std::optional<std::string_view> Header(std::string_view name) const {
    return FindHeader(headers, name);
  }
  // The target without its query string (still percent-encoded; http/query.h SplitTarget).
  std::string_view Path() const;
  // The raw query string, without the '?' ("" when there is none); parse it with
  // http/query.h ParseQuery.
  std::string_view Query() const;
};

struct Response {
  unsigned status = 200;
  Headers headers;  // Content-Length is set by the server
  std::string body;
  std::string content_type = "application/json";
  // More of the body, after `body`, in order: each piece is written from where it is rather
  // than copied behind the rest (file_read's answer: hundreds of MB of base64 between a short
  // envelope's two halves, common/json_parse.h DumpJsonPieces). Content-Length counts them.
  std::vector<std::string> more_body;

  // The body's size, `more_body` included.
  size_t BodySize() const;
  // The whole body in one string (a copy; for tests and small answers).
  std::string JoinedBody() const;
};

// One request/response exchange. Exactly one of Respond, BeginStream (followed by chunks
// and EndStream) or AcceptWebSocket must be called, from any thread, at any later time; the
// connection waits for it (no work runs on the server's threads). Calls after the client
// went away are accepted and dropped.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual const Request& request() const = 0;
  // The request's body, handed over: the server's exchange leaves request().body empty (this
  // default, for other exchanges, copies it). For a handler that parses a body of hundreds of
  // MB in its own buffer (the worker door's file_write). Call it from the one thread that
  // reads the body, before anything else does.
  virtual std::string TakeBody() { return request().body; }

  virtual void Respond(Response response) = 0;

  // A chunked response: the status line and headers now, then each chunk is written and
  // flushed on its own; `written(ok)` runs when the chunk left (ok) or could not be
  // written (the client is gone). EndStream writes the last chunk.
  virtual void BeginStream(unsigned status, Headers headers, std::string content_type) = 0;
  virtual void WriteChunk(std::string data, std::function<void(bool ok)> written) = 0;
  virtual void EndStream() = 0;

  // `gone` runs once, on a server thread, when the client closes the connection (or a
  // write to it fails) before the response is complete. At once when it is gone already.
  virtual void OnClientGone(std::function<void()> gone) = 0;
  virtual bool client_gone() const = 0;

  // Answers with 101 and turns the connection into a WebSocket (http/websocket.h) whose
  // messages go to `handler`. Returns the socket at once; the handshake completes on the
  // connection's strand (a client gone by then ends in handler->OnClosed(1006)). Refusals
  // are ordinary responses, given instead of this call (401, 403, 404, 410 …).
  // INVALID_ARGUMENT, after answering 400 {"code":"BAD_REQUEST"} itself, when the request is
  // not a valid upgrade (CheckWebSocketUpgrade) or `handler` is null; FAILED_PRECONDITION
  // when the exchange was answered already. The default (an Exchange that cannot upgrade,
  // such as a test's fake) answers 400 and returns FAILED_PRECONDITION.
  virtual Result<std::shared_ptr<WebSocket>> AcceptWebSocket(
      const WebSocketOptions& options, std::shared_ptr<WebSocketHandler> handler);
};

class Handler {
 public:
  virtual ~Handler() = default;
  // Called on a server thread; must not block (hand the work elsewhere and answer later).
  virtual void Handle(std::shared_ptr<Exchange> exchange) = 0;
  // Called on a server thread once a request's line and headers have arrived, before its body
  // is read and before any `100 Continue`: `head` has no body. A Response returned here is the
  // answer: to a request that announces a body the connection then closes, dropping the body
  // unread, so a caller refused for its credentials or its path never gets the server to buffer
  // up to max_body_bytes; a request without one is answered in turn on its kept-alive
  // connection. nullopt (the default) reads the body and calls Handle. Must not block.
  virtual std::optional<Response> Screen(const Request& head) {
    (void)head;
    return std::nullopt;
  }
};

// "Not Found", "Payload Too Large", ... ("Unknown" for codes not listed).
std::string_view ReasonPhrase(unsigned status);

}  // namespace edge::http
