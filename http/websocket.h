// WebSockets on the edge_http Server (RFC 6455; the operator API's relay, wire.md §5.3).
// A handler accepts an upgrade through Exchange::AcceptWebSocket and gets a WebSocket to
// send on; what arrives goes to its WebSocketHandler. Nothing here exposes Boost.Beast, so
// a fake WebSocket makes the code above it testable without sockets.
//
// Ownership: the connection holds its WebSocketHandler until OnClosed has returned (then
// drops it, so a handler that holds its WebSocket makes no lasting cycle). Whoever got the
// WebSocket may keep it as long as it likes; once closed it refuses SendText and its socket
// is gone.
//
// Threading: SendText, Close and the getters may be called from any thread and never block.
// The handler's callbacks run on the connection's strand, one at a time, never two at once
// for one socket; they must not block (hand work elsewhere). They may call SendText and
// Close. No callback runs once Server::Stop has returned.
//
// Transport rules (the handler never sees the frames they refuse):
// - Text messages only: a binary message closes with 1003. A message above
//   `max_frame_size` bytes (all its fragments together) closes with 1009, invalid UTF-8 in a
//   text message with 1007, a protocol violation with 1002.
// - The server pings every `ping_interval` and closes (1001, "idle timeout") a peer from
//   which nothing (a message, a pong, a ping) arrived for `idle_timeout`.
// - A write (a message, a ping, the handshake response) not complete after the server's
//   write_timeout drops the connection (OnClosed 1006): a stalled reader costs one write.
// - A close handshake not finished `close_timeout` after the close frame (ours, or the
//   peer's) drops the connection.
// - The transport's own closes (1003, 1009, idle, Stop) drop the messages still queued.
// - Server::Stop closes with 1001 ("server stopping").
// - No extensions (permessage-deflate off), no subprotocol unless the options name one.
// These timers run on the server's injected clock (ServerOptions::clock), so tests move a
// ManualClock instead of waiting.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"
#include "http/message.h"

namespace edge::http {

// Close codes (RFC 6455 §7.4.1) the transport uses; any other 1000-4999 code may be given to
// Close.
namespace close_code {
inline constexpr uint16_t kNormal = 1000;
inline constexpr uint16_t kGoingAway = 1001;  // server stopping, idle peer
inline constexpr uint16_t kProtocolError = 1002;
inline constexpr uint16_t kUnsupportedData = 1003;  // a binary message
inline constexpr uint16_t kNoStatus = 1005;         // the peer's close frame had no code
inline constexpr uint16_t kAbnormal = 1006;         // the connection dropped without a close
inline constexpr uint16_t kInvalidPayload = 1007;   // a text message that is not UTF-8
inline constexpr uint16_t kPolicyViolation = 1008;
inline constexpr uint16_t kTooBig = 1009;  // a message above max_frame_size
inline constexpr uint16_t kInternalError = 1011;
inline constexpr uint16_t kTryAgainLater = 1013;  // e.g. a reader too slow for its queue
}  // namespace close_code

struct WebSocketOptions {
  // The largest message accepted from the peer (bytes, all fragments together; 0 = none).
  size_t max_frame_size = 1 << 20;
  std::chrono::milliseconds ping_interval{30'000};
  std::chrono::milliseconds idle_timeout{90'000};
  std::chrono::milliseconds close_timeout{5'000};
  // Extra headers of the 101 response (e.g. X-Request-ID); Upgrade, Connection and the
  // Sec-WebSocket-* ones are the server's.
  Headers response_headers;
  // Sent as Sec-WebSocket-Protocol when not empty (the caller checked the client offered it).
  std::string subprotocol;
};

class WebSocketHandler {
 public:
  virtual ~WebSocketHandler() = default;
  // A complete text message (valid UTF-8, at most max_frame_size bytes). Not called once
  // Close was called or the socket began closing.
  virtual void OnText(std::string text) = 0;
  // Once, last. `code`: ours when we closed first (Close, or a transport rule above), else
  // the peer's (kNoStatus when its close frame had none), kAbnormal when the connection
  // dropped without a close handshake. `reason` is the matching close reason ("" if none).
  // Not called for a socket that Server::Stop closed after Stop returned.
  virtual void OnClosed(uint16_t code, std::string reason) = 0;
  // A queued message has been written to the peer (queued_bytes() went down): a caller that
  // keeps its own queue hands over more. Default: nothing.
  virtual void OnWritten() {}
};

class WebSocket {
 public:
  virtual ~WebSocket() = default;

  // Queues a text message to send after those queued before; returns at once. Messages
  // queued before the handshake completed are sent after it. FAILED_PRECONDITION once the
  // socket is closing or closed (the message is dropped); INVALID_ARGUMENT when `text` is
  // not valid UTF-8 (a browser would fail the connection).
  virtual Status SendText(std::string text) = 0;
  // What Close does with the messages still queued.
  enum class Pending {
    kFlush,  // sends them first, then the close frame (a last message, then 1000)
    kDrop,   // drops them: the close frame follows the message being written (1013 for a
             // reader too slow for its queue)
  };
  // Starts the close handshake with `code` and `reason` (cut to 123 bytes at a character
  // boundary); a code that may not be sent (RFC 6455 §7.4: below 1000, 1004-1006,
  // 1015-2999, above 4999) is sent as 1011. SendText is refused from now on. Idempotent: the first
  // call wins (a later kDrop still drops what is queued).
  virtual void Close(uint16_t code, std::string reason, Pending pending = Pending::kFlush) = 0;

  // Messages queued and not yet written (the one being written included), and their bytes:
  // the caller's overflow policy reads these (the socket itself never drops or refuses for
  // size).
  virtual size_t queued_messages() const = 0;
  virtual size_t queued_bytes() const = 0;
  // Pong frames received so far (for keep-alive diagnostics and tests).
  virtual uint64_t pongs_received() const = 0;
  // True once Close was called or the connection ended.
  virtual bool closed() const = 0;
  // "ip:port" of the peer.
  virtual const std::string& remote() const = 0;
};

// OK when `request` is a valid WebSocket upgrade request (RFC 6455 §4.2.1: GET, HTTP/1.1,
// "Upgrade: websocket", "Connection: upgrade", Sec-WebSocket-Version 13, a
// Sec-WebSocket-Key of 16 bytes in base64); INVALID_ARGUMENT naming what is wrong otherwise.
Status CheckWebSocketUpgrade(const Request& request);

}  // namespace edge::http
