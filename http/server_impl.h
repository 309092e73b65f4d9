// Internal to edge_http (server.cc and websocket_connection.h; not for other modules): the
// state a Server shares with its connections. Each connection (an HTTP session, or a
// WebSocket it became) holds a shared_ptr to it, so it outlives the Server object until the
// last connection ends on the io_context.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "common/timer_queue.h"
#include "http/server.h"

namespace edge::http {

// A live connection as Server::Stop sees it.
class Connection {
 public:
  virtual ~Connection() = default;
  // Any thread: ends the connection on its strand (an HTTP session closes; a WebSocket
  // starts its close handshake with 1001).
  virtual void Shutdown() = 0;
};

struct Server::Impl : std::enable_shared_from_this<Server::Impl> {
  Impl(boost::asio::io_context& io_, ServerOptions options_, Handler& handler_);
  ~Impl();

  void Accept();
  void Register(uint64_t id, std::weak_ptr<Connection> c) {
    std::lock_guard lock(mu);
    connections_by_id[id] = std::move(c);
  }
  void Unregister(uint64_t id) {
    std::lock_guard lock(mu);
    connections_by_id.erase(id);
  }
  std::shared_ptr<boost::asio::ssl::context> Tls() {
    std::lock_guard lock(mu);
    return tls;
  }
  // The WebSocket timers, started on first use; stopped by ~Server (After then returns 0).
  TimerQueue& Timers();
  void StopTimers();

  // Brackets every call into the handlers (Handler::Handle and the WebSocketHandler
  // callbacks): false once Stop began (then nothing is called). Stop waits until every
  // bracket that began is left, so no handler runs after it returns.
  bool EnterHandler() {
    ++active_handlers;
    if (stopped) {
      --active_handlers;
      return false;
    }
    return true;
  }
  void LeaveHandler() { --active_handlers; }

  boost::asio::io_context& io;
  ServerOptions options;
  Handler& handler;
  Clock& clock;
  boost::asio::ip::tcp::acceptor acceptor;
  // Accept's wait after a failure (EMFILE and the like leave the connection queued, so an
  // immediate retry fails again at once): on the acceptor's strand, like accept_failures.
  boost::asio::steady_timer accept_retry;
  int accept_failures = 0;
  std::shared_ptr<spdlog::logger> log;
  std::mutex mu;
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::map<uint64_t, std::weak_ptr<Connection>> connections_by_id;
  std::unique_ptr<TimerQueue> timers;  // under mu
  bool timers_stopped = false;         // under mu
  std::atomic<uint64_t> next_id{1};
  // Open connections (HTTP sessions and WebSockets), counted against max_connections.
  std::atomic<size_t> connections{0};
  std::atomic<bool> stopped{false};
  std::atomic<int> active_handlers{0};
  uint16_t port = 0;
};

}  // namespace edge::http
