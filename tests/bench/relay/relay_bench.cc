// relay_bench: the operator session relay (wire.md §5.3) beside a raw WebSocket on the same
// HTTP server implementation (issue 12's benchmark). Prints figures; asserts nothing.
//
//   relay_bench emit --lines N [--rate R] [--bytes B]
//       The session's interactive tool: prints "ready", then for each line read on stdin N
//       lines "relaybench seq=S t=NS xxx…" (S from 1 per input line, NS = CLOCK_REALTIME in
//       ns when the line was written), padded to B bytes (default 100), R lines/s (0 = as
//       fast as possible: stdout fully buffered; paced: flushed per line), then "done".
//   relay_bench baseline [--lines N] [--paced-lines P] [--rate R] [--bytes B] [--echo E]
//       [--sockets K]
//       An in-process http::Server (the controller's; 2 io threads like the controller's
//       HTTP) with a Router route that accepts a WebSocket: (a) E echo round trips of a frame
//       shaped and sized like the relay's agent.output frame; (b) the server pushes N such
//       frames as fast as it can to 1 and to K sockets; (c) it pushes P frames at R/s to 1
//       and to K sockets, each frame carrying its CLOCK_REALTIME send time (one-way latency).
//   relay_bench relay --port P --token T --node NODE --tool TOOL [--sockets K] [--lines N]
//       The client side against a real controller: creates a session of TOOL (an interactive
//       `emit` tool) on NODE with the user token T, opens K sockets (a one-time ticket each),
//       waits for "ready" on all, sends one control.prompt.request on the first, reads until
//       "done" on every socket, then DELETEs the session. N = the lines the tool prints (to
//       count what is missing).
//
// Both client sides share Fleet (Boost.Beast, every socket on one thread) and print one
// "result name=… key=value …" line per measurement on stdout (tests/bench/relay/
// relay_bench.sh turns them into a table). Definitions:
//   - fps per socket: the data frames it received / (its last data frame − the first data
//     frame any socket received); aggregate: all data frames / (the last − that first one).
//     The start-up (session.input reaching the process, the producer thread starting) is
//     left out of both.
//   - latency: receive time (CLOCK_REALTIME, taken when the frame is read) − the time
//     stamped in the line. Process, agent and controller share the machine's clock.
//   - dropped: the sum of FRAMES_DROPPED {dropped}; missing: lines expected − received.
#include <time.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "common/rfc3339.h"
#include "http/client.h"
#include "http/router.h"
#include "http/server.h"
#include "http/websocket.h"

namespace {

namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using tcp = boost::asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using nlohmann::json;
using namespace std::chrono_literals;

int64_t RealNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// --key value flags; every key must be one of `known`.
struct Flags {
  std::map<std::string, std::string, std::less<>> values;
  std::string error;

  Flags(int argc, char** argv, int first, std::initializer_list<std::string_view> known) {
    for (int i = first; i < argc; i += 2) {
      std::string_view key = argv[i];
      if (!key.starts_with("--") ||
          std::find(known.begin(), known.end(), key.substr(2)) == known.end()) {
        error = "unknown option \"" + std::string(key) + "\"";
        return;
      }
      if (i + 1 >= argc) {
        error = "option " + std::string(key) + " needs a value";
        return;
      }
      values[std::string(key.substr(2))] = argv[i + 1];
    }
  }
  std::string Str(std::string_view key, std::string def = "") const {
    auto it = values.find(key);
    return it == values.end() ? def : it->second;
  }
  // A non-negative integer; records an error naming the option otherwise.
  uint64_t Num(std::string_view key, uint64_t def) {
    auto it = values.find(key);
    if (it == values.end()) return def;
    uint64_t v = 0;
    const auto& s = it->second;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) {
      error = "--" + std::string(key) + " \"" + s + "\" is not a non-negative integer";
      return def;
    }
    return v;
  }
};

// ---- The lines the emitter prints and the frames carry --------------------------------------

constexpr std::string_view kStampMark = "relaybench seq=";

std::string MakeLine(uint64_t seq, int64_t ns, size_t bytes) {
  char head[80];
  const int n = std::snprintf(head, sizeof head, "relaybench seq=%llu t=%lld ",
                              static_cast<unsigned long long>(seq), static_cast<long long>(ns));
  std::string line(head, static_cast<size_t>(n));
  if (line.size() < bytes) line.append(bytes - line.size(), 'x');
  return line;
}

struct Stamp {
  uint64_t seq = 0;
  int64_t ns = 0;
};

// The stamp of a line inside a frame (no JSON parse: the client must stay cheap).
std::optional<Stamp> FindStamp(std::string_view frame) {
  const size_t at = frame.find(kStampMark);
  if (at == std::string_view::npos) return std::nullopt;
  const char* p = frame.data() + at + kStampMark.size();
  const char* end = frame.data() + frame.size();
  Stamp s;
  auto r = std::from_chars(p, end, s.seq);
  if (r.ec != std::errc() || end - r.ptr < 3 || std::string_view(r.ptr, 3) != " t=")
    return std::nullopt;
  if (std::from_chars(r.ptr + 3, end, s.ns).ec != std::errc()) return std::nullopt;
  return s;
}

// ---- emit -----------------------------------------------------------------------------------

int Emit(Flags& f) {
  const uint64_t lines = f.Num("lines", 1000), rate = f.Num("rate", 0), bytes = f.Num("bytes", 100);
  if (!f.error.empty()) {
    std::fprintf(stderr, "relay_bench emit: %s\n", f.error.c_str());
    return 2;
  }
  static char buffer[1 << 16];
  std::setvbuf(stdout, buffer, _IOFBF, sizeof buffer);
  std::fputs("ready\n", stdout);
  std::fflush(stdout);
  char* in = nullptr;
  size_t cap = 0;
  while (::getline(&in, &cap, stdin) > 0) {
    timespec start{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    for (uint64_t seq = 1; seq <= lines; ++seq) {
      if (rate > 0) {
        const int64_t due = int64_t{start.tv_sec} * 1'000'000'000 + start.tv_nsec +
                            static_cast<int64_t>((seq - 1) * 1'000'000'000 / rate);
        timespec at{.tv_sec = due / 1'000'000'000, .tv_nsec = due % 1'000'000'000};
        while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
        }
      }
      const std::string line = MakeLine(seq, RealNs(), bytes) + "\n";
      if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size()) return 1;
      if (rate > 0 && std::fflush(stdout) != 0) return 1;
    }
    std::fputs("done\n", stdout);
    if (std::fflush(stdout) != 0) return 1;
  }
  std::free(in);
  return 0;
}

// ---- Figures ----------------------------------------------------------------------------------

struct Summary {
  double median = 0, p99 = 0, min = 0, max = 0;
  size_t n = 0;
};
Summary Summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = v.size();
  s.median = v[v.size() / 2];
  s.p99 = v[std::min(v.size() - 1, (v.size() * 99 + 99) / 100 - 1)];
  s.min = v.front();
  s.max = v.back();
  return s;
}

double Seconds(SteadyClock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// ---- The client side: K WebSockets read on one thread ---------------------------------------

class Fleet {
 public:
  struct Sock {
    explicit Sock(boost::asio::io_context& io) : ws(io) {}
    websocket::stream<tcp::socket> ws;
    beast::flat_buffer buf;
    bool ready = false, done = false, closed = false;
    uint64_t frames = 0, bytes = 0, dropped = 0;
    SteadyClock::time_point last;
    std::vector<double> latency_us;
    std::string error;  // why it closed, or an unexpected frame that ends the run
  };

  ~Fleet() { CloseAll(); }

  // Connects and completes the handshake (blocking), then reads in the background of Run*.
  std::string Open(uint16_t port, const std::string& target) {
    auto s = std::make_unique<Sock>(io_);
    beast::error_code ec;
    s->ws.next_layer().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
    if (ec) return "connect to port " + std::to_string(port) + ": " + ec.message();
    s->ws.next_layer().set_option(tcp::no_delay(true), ec);
    s->ws.read_message_max(16 << 20);
    websocket::response_type res;
    s->ws.handshake(res, "127.0.0.1:" + std::to_string(port), target, ec);
    if (ec) return "WebSocket handshake on " + target.substr(0, 40) + "…: " + ec.message();
    Read(*s);
    socks_.push_back(std::move(s));
    return "";
  }

  // Sends a text frame on socket `i` and runs until it is written.
  std::string Send(size_t i, std::string text) {
    auto& s = *socks_[i];
    auto data = std::make_shared<std::string>(std::move(text));
    bool written = false;
    beast::error_code err;
    s.ws.text(true);
    s.ws.async_write(boost::asio::buffer(*data), [&, data](beast::error_code ec, size_t) {
      written = true;
      err = ec;
    });
    if (!RunUntil([&] { return written; }, 30s)) return "write timed out";
    return err ? "write: " + err.message() : "";
  }

  // Runs the reads until `pred` holds (true), `timeout` passes or every socket closed (false).
  bool RunUntil(const std::function<bool()>& pred, SteadyClock::duration timeout) {
    const auto end = SteadyClock::now() + timeout;
    while (!pred()) {
      const auto now = SteadyClock::now();
      if (now >= end) return false;
      if (io_.stopped()) io_.restart();
      if (io_.run_one_for(end - now) == 0 && AllClosed()) return pred();
    }
    return true;
  }

  bool AllClosed() const {
    return std::all_of(socks_.begin(), socks_.end(), [](const auto& s) { return s->closed; });
  }
  bool All(bool Sock::*flag) const {
    return std::all_of(socks_.begin(), socks_.end(), [&](const auto& s) { return (*s).*flag; });
  }
  // The first socket's error, "" when none.
  std::string FirstError() const {
    for (const auto& s : socks_)
      if (!s->error.empty()) return s->error;
    return "";
  }
  const std::vector<std::unique_ptr<Sock>>& sockets() const { return socks_; }
  uint64_t frames() const {
    uint64_t n = 0;
    for (const auto& s : socks_)
      n += s->frames;
    return n;
  }
  void set_record_latency(bool on) { record_latency_ = on; }

  // One "result …" line for the data frames seen (expected = lines each socket should get).
  void PrintResult(const std::string& name, uint64_t expected) const {
    std::vector<double> fps, lat;
    uint64_t total = 0, bytes = 0, dropped = 0, missing = 0;
    SteadyClock::time_point last = t0_;
    for (const auto& s : socks_) {
      total += s->frames;
      bytes += s->bytes;
      dropped += s->dropped;
      missing += s->frames < expected ? expected - s->frames : 0;
      last = std::max(last, s->last);
      const double secs = Seconds(s->last - t0_);
      fps.push_back(secs > 0 ? static_cast<double>(s->frames) / secs : 0);
      lat.insert(lat.end(), s->latency_us.begin(), s->latency_us.end());
    }
    const Summary f = Summarize(fps), l = Summarize(lat);
    const double secs = Seconds(last - t0_);
    std::printf(
        "result name=%s sockets=%zu frames=%llu missing=%llu dropped=%llu frame_bytes=%.0f "
        "fps_socket_min=%.0f fps_socket_median=%.0f fps_aggregate=%.0f lat_median_us=%.0f "
        "lat_p99_us=%.0f lat_min_us=%.0f lat_max_us=%.0f\n",
        name.c_str(), socks_.size(), static_cast<unsigned long long>(total),
        static_cast<unsigned long long>(missing), static_cast<unsigned long long>(dropped),
        total ? static_cast<double>(bytes) / static_cast<double>(total) : 0.0, f.min, f.median,
        secs > 0 ? static_cast<double>(total) / secs : 0.0, l.median, l.p99, l.min, l.max);
    std::fflush(stdout);
  }

  void CloseAll() {
    for (auto& s : socks_) {
      beast::error_code ec;
      s->ws.next_layer().close(ec);
    }
    io_.restart();
    io_.poll();
    socks_.clear();
  }

 private:
  void Read(Sock& s) {
    s.ws.async_read(s.buf, [this, &s](beast::error_code ec, size_t) {
      if (ec) {
        s.closed = true;
        if (s.error.empty())
          s.error = ec == websocket::error::closed
                        ? "closed by the server with " + std::to_string(s.ws.reason().code)
                        : "read: " + ec.message();
        return;
      }
      const int64_t now_ns = RealNs();
      const auto now = SteadyClock::now();
      const auto data = s.buf.cdata();
      OnFrame(s, std::string_view(static_cast<const char*>(data.data()), data.size()), now_ns, now);
      s.buf.consume(s.buf.size());
      Read(s);
    });
  }

  void OnFrame(Sock& s, std::string_view text, int64_t now_ns, SteadyClock::time_point now) {
    if (auto stamp = FindStamp(text)) {
      if (!started_) {
        started_ = true;
        t0_ = now;
      }
      ++s.frames;
      s.bytes += text.size();
      s.last = now;
      if (record_latency_) s.latency_us.push_back(static_cast<double>(now_ns - stamp->ns) / 1e3);
    } else if (text.find("\"data\":\"done\"") != std::string_view::npos) {
      s.done = true;
    } else if (text.find("\"data\":\"ready\"") != std::string_view::npos) {
      s.ready = true;
    } else if (text.find("FRAMES_DROPPED") != std::string_view::npos) {
      const size_t at = text.find("\"dropped\":");
      uint64_t n = 0;
      if (at != std::string_view::npos)
        std::from_chars(text.data() + at + 10, text.data() + text.size(), n);
      s.dropped += n;
    } else if (text.find("\"session.ended\"") != std::string_view::npos ||
               text.find("\"session.error\"") != std::string_view::npos) {
      if (s.error.empty()) s.error = "unexpected frame: " + std::string(text.substr(0, 300));
    }
  }

  boost::asio::io_context io_;
  std::vector<std::unique_ptr<Sock>> socks_;
  bool record_latency_ = true;
  bool started_ = false;
  SteadyClock::time_point t0_;
};

// ---- baseline: a raw WebSocket on the same server ---------------------------------------------

// A frame shaped like the relay's agent.output (SerializeFrame's sorted keys, a UUID
// message_id and session_id, an RFC 3339 timestamp with milliseconds, a seq), built by plain
// concatenation: the raw baseline pays for the transport only.
std::string RawFrame(const std::string& line, uint64_t seq) {
  static const std::string kHead =
      "{\"message_id\":\"" + edge::NewUuidV4() + "\",\"payload\":{\"data\":\"";
  static const std::string kTail = "\",\"session_id\":\"" + edge::NewUuidV4() +
                                   "\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"type\":"
                                   "\"agent.output\",\"v\":\"rawp-dps-1.0\"}";
  return kHead + line + "\",\"stream\":\"stdout\"},\"seq\":" + std::to_string(seq) + kTail;
}

// The server's sockets by group (the route's {group}), and the producer that pushes to one
// group. Flow control like the relay's: a socket gets the next frame while its transport
// holds less than kHighWater bytes (the relay: a 2 MiB queue of its own + 256 KiB in the
// transport); the producer waits for the slowest socket otherwise.
class PushHub {
 public:
  static constexpr size_t kHighWater = 2 << 20;

  void Add(const std::string& group, std::shared_ptr<edge::http::WebSocket> ws) {
    std::lock_guard lock(mu_);
    groups_[group].push_back(std::move(ws));
  }
  size_t Count(const std::string& group) {
    std::lock_guard lock(mu_);
    return groups_[group].size();
  }
  void Written() {
    { std::lock_guard lock(mu_); }
    cv_.notify_all();
  }
  // Pushes `frames` frames (`rate` per second, 0 = as fast as possible) and a "done" frame to
  // every socket of `group`, on a thread of its own.
  void StartPush(const std::string& group, uint64_t frames, uint64_t rate, size_t bytes) {
    Join();
    producer_ = std::thread([=, this] { Push(group, frames, rate, bytes); });
  }
  void Join() {
    if (producer_.joinable()) producer_.join();
  }
  void Clear() {
    Join();
    std::lock_guard lock(mu_);
    groups_.clear();
  }

 private:
  void Push(const std::string& group, uint64_t frames, uint64_t rate, size_t bytes) {
    std::vector<std::shared_ptr<edge::http::WebSocket>> sockets;
    {
      std::lock_guard lock(mu_);
      sockets = groups_[group];
    }
    const auto start = SteadyClock::now();
    for (uint64_t seq = 1; seq <= frames + 1; ++seq) {
      if (rate > 0 && seq <= frames)
        std::this_thread::sleep_until(start +
                                      std::chrono::nanoseconds((seq - 1) * 1'000'000'000 / rate));
      const std::string frame =
          seq <= frames ? RawFrame(MakeLine(seq, RealNs(), bytes), seq) : RawFrame("done", seq);
      for (auto& ws : sockets) {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return ws->closed() || ws->queued_bytes() < kHighWater; });
        lock.unlock();
        (void)ws->SendText(frame);
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<std::shared_ptr<edge::http::WebSocket>>> groups_;
  std::thread producer_;
};

// One server-side socket: echoes what it gets; tells the hub when a write completed.
class EchoSocket final : public edge::http::WebSocketHandler {
 public:
  explicit EchoSocket(PushHub& hub) : hub_(hub) {}
  // The socket, once AcceptWebSocket returned it; echoes what arrived before.
  void SetSocket(const std::shared_ptr<edge::http::WebSocket>& ws) {
    std::vector<std::string> early;
    {
      std::lock_guard lock(mu_);
      ws_ = ws;
      early.swap(early_);
    }
    for (auto& t : early)
      (void)ws->SendText(std::move(t));
  }
  void OnText(std::string text) override {
    std::shared_ptr<edge::http::WebSocket> ws;
    {
      std::lock_guard lock(mu_);
      ws = ws_.lock();
      if (!ws) {
        early_.push_back(std::move(text));
        return;
      }
    }
    (void)ws->SendText(std::move(text));
  }
  void OnWritten() override { hub_.Written(); }
  void OnClosed(uint16_t, std::string) override { hub_.Written(); }

 private:
  PushHub& hub_;
  std::mutex mu_;
  std::weak_ptr<edge::http::WebSocket> ws_;
  std::vector<std::string> early_;
};

int Baseline(Flags& f) {
  const uint64_t lines = f.Num("lines", 20000), paced = f.Num("paced-lines", 2000),
                 rate = f.Num("rate", 500), bytes = f.Num("bytes", 100),
                 echoes = f.Num("echo", 2000), many = f.Num("sockets", 50);
  if (!f.error.empty() || lines == 0 || rate == 0 || echoes == 0 || many == 0) {
    std::fprintf(
        stderr, "relay_bench baseline: %s\n",
        f.error.empty() ? "--lines, --rate, --echo and --sockets must be > 0" : f.error.c_str());
    return 2;
  }
  edge::log::Init({.level = spdlog::level::warn});
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  PushHub hub;
  edge::http::Router router;
  router.Add("GET", "/ws/{group}",
             [&hub](std::shared_ptr<edge::http::Exchange> ex, const edge::http::PathParams& p) {
               auto handler = std::make_shared<EchoSocket>(hub);
               auto ws = ex->AcceptWebSocket(edge::http::WebSocketOptions{}, handler);
               if (!ws) return;
               handler->SetSocket(*ws);
               hub.Add(p.at("group"), *ws);
             });
  edge::http::Server server(io, edge::http::ServerOptions{.name = "bench"}, router);
  if (auto st = server.Listen("127.0.0.1:0"); !st) {
    std::fprintf(stderr, "relay_bench baseline: %s\n", st.error().ToString().c_str());
    return 1;
  }
  std::thread t1([&] { io.run(); }), t2([&] { io.run(); });
  int rc = 0;
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "relay_bench baseline: %s\n", what.c_str());
    rc = 1;
  };

  // (a) echo round trips of one relay-sized frame.
  {
    Fleet fleet;
    fleet.set_record_latency(false);
    std::string err = fleet.Open(server.port(), "/ws/echo");
    std::vector<double> rtt;
    for (uint64_t i = 0; err.empty() && i < echoes; ++i) {
      const auto t = SteadyClock::now();
      err = fleet.Send(0, RawFrame(MakeLine(i + 1, RealNs(), bytes), i + 1));
      if (err.empty() && !fleet.RunUntil([&] { return fleet.frames() == i + 1; }, 30s))
        err = "no echo: " + fleet.FirstError();
      rtt.push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - t).count());
    }
    if (!err.empty()) {
      fail("echo: " + err);
    } else {
      const Summary s = Summarize(rtt);
      std::printf(
          "result name=raw.echo sockets=1 frames=%zu frame_bytes=%zu rtt_median_us=%.0f "
          "rtt_p99_us=%.0f rtt_min_us=%.0f rtt_max_us=%.0f\n",
          s.n, RawFrame(MakeLine(1, RealNs(), bytes), 1).size(), s.median, s.p99, s.min, s.max);
      std::fflush(stdout);
    }
  }
  // (b) bursts and (c) paced pushes, to 1 and to `many` sockets.
  struct Run {
    std::string name;
    uint64_t sockets, frames, rate;
  };
  const std::vector<Run> runs = {{"raw.burst", 1, lines, 0},
                                 {"raw.burst", many, lines, 0},
                                 {"raw.paced", 1, paced, rate},
                                 {"raw.paced", many, paced, rate}};
  for (size_t r = 0; rc == 0 && r < runs.size(); ++r) {
    const Run& run = runs[r];
    const std::string group = "run" + std::to_string(r);
    Fleet fleet;
    std::string err;
    for (uint64_t k = 0; err.empty() && k < run.sockets; ++k)
      err = fleet.Open(server.port(), "/ws/" + group);
    // The route registers a socket right after accepting it: wait for all of them.
    for (int i = 0; err.empty() && hub.Count(group) < run.sockets; ++i) {
      if (i == 10'000) err = "the server did not register every socket";
      std::this_thread::sleep_for(1ms);
    }
    if (err.empty()) {
      hub.StartPush(group, run.frames, run.rate, bytes);
      if (!fleet.RunUntil([&] { return fleet.All(&Fleet::Sock::done); }, 300s))
        err = "not every socket saw the end of the push: " + fleet.FirstError();
    }
    hub.Join();
    if (!err.empty())
      fail(run.name + " to " + std::to_string(run.sockets) + " socket(s): " + err);
    else
      fleet.PrintResult(run.name, run.frames);
  }
  server.Stop();
  hub.Clear();
  work.reset();
  io.stop();
  t1.join();
  t2.join();
  return rc;
}

// ---- relay: the client side against the real controller --------------------------------------

struct Rest {
  uint16_t port;
  std::string token;

  // One request; the parsed body when the status is `want`, else an error naming both.
  std::optional<json> Call(const std::string& method, const std::string& target,
                           const std::string& body, unsigned want, std::string& err) const {
    auto c = edge::http::Client::Connect("127.0.0.1", port, {.timeout = 30s});
    if (!c) {
      err = c.error().ToString();
      return std::nullopt;
    }
    edge::http::Headers headers = {{"Authorization", "Bearer " + token}};
    if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
    auto r = (*c)->Send({.method = method, .target = target, .headers = headers, .body = body});
    if (!r) {
      err = method + " " + target + ": " + r.error().ToString();
      return std::nullopt;
    }
    if (r->status != want) {
      err = method + " " + target + ": status " + std::to_string(r->status) + " " + r->body;
      return std::nullopt;
    }
    auto j = json::parse(r->body.empty() ? "{}" : r->body, nullptr, false);
    if (j.is_discarded()) {
      err = method + " " + target + ": the body is not JSON: " + r->body;
      return std::nullopt;
    }
    return j;
  }
};

int Relay(Flags& f) {
  const uint64_t port = f.Num("port", 0), sockets = f.Num("sockets", 1), lines = f.Num("lines", 0);
  const std::string token = f.Str("token"), node = f.Str("node"), tool = f.Str("tool");
  if (!f.error.empty() || port == 0 || port > 65535 || sockets == 0 || token.empty() ||
      node.empty() || tool.empty()) {
    std::fprintf(stderr, "relay_bench relay: %s\n",
                 f.error.empty() ? "--port, --token, --node and --tool are required, --sockets > 0"
                                 : f.error.c_str());
    return 2;
  }
  const Rest rest{static_cast<uint16_t>(port), token};
  std::string err;
  auto created = rest.Call("POST", "/v1/edge/nodes/" + node + "/sessions",
                           json{{"agent_name", tool}}.dump(), 201, err);
  if (!created) {
    std::fprintf(stderr, "relay_bench relay: %s\n", err.c_str());
    return 1;
  }
  const std::string sid = created->value("session_id", "");
  std::string ticket = created->value("edge_ws_ticket", "");
  Fleet fleet;
  for (uint64_t k = 0; err.empty() && k < sockets; ++k) {
    if (k > 0) {
      auto t = rest.Call("POST", "/v1/edge/sessions/" + sid + "/tickets", "", 201, err);
      if (!t) break;
      ticket = t->value("edge_ws_ticket", "");
    }
    err = fleet.Open(rest.port, "/v1/edge/ws/stream?ticket=" + ticket + "&session_id=" + sid);
  }
  if (err.empty() && !fleet.RunUntil([&] { return fleet.All(&Fleet::Sock::ready); }, 60s))
    err = "not every socket saw the process's \"ready\": " + fleet.FirstError();
  if (err.empty()) {
    const json prompt = {{"v", "rawp-dps-1.0"},
                         {"type", "control.prompt.request"},
                         {"message_id", edge::NewUuidV4()},
                         {"timestamp", edge::FormatRfc3339(edge::SystemClock::Instance().Now())},
                         {"session_id", sid},
                         {"payload", {{"text", "go"}}}};
    err = fleet.Send(0, prompt.dump());
  }
  if (err.empty() &&
      !fleet.RunUntil([&] { return fleet.All(&Fleet::Sock::done) || !fleet.FirstError().empty(); },
                      600s))
    err = "not every socket saw the process's \"done\"";
  if (err.empty()) err = fleet.FirstError();
  std::string del_err;
  rest.Call("DELETE", "/v1/edge/sessions/" + sid, "", 204, del_err);
  if (!err.empty()) {
    std::fprintf(stderr, "relay_bench relay (%s, %llu socket(s)): %s\n", tool.c_str(),
                 static_cast<unsigned long long>(sockets), err.c_str());
    return 1;
  }
  fleet.PrintResult("relay." + tool, lines);
  if (!del_err.empty()) std::fprintf(stderr, "relay_bench relay: %s\n", del_err.c_str());
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: relay_bench emit --lines N [--rate R] [--bytes B]\n"
               "       relay_bench baseline [--lines N] [--paced-lines P] [--rate R] [--bytes B] "
               "[--echo E] [--sockets K]\n"
               "       relay_bench relay --port P --token T --node NODE --tool TOOL "
               "[--sockets K] [--lines N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string_view mode = argv[1];
  if (mode == "emit") {
    Flags f(argc, argv, 2, {"lines", "rate", "bytes"});
    return f.error.empty() ? Emit(f) : (std::fprintf(stderr, "%s\n", f.error.c_str()), Usage());
  }
  if (mode == "baseline") {
    Flags f(argc, argv, 2, {"lines", "paced-lines", "rate", "bytes", "echo", "sockets"});
    return f.error.empty() ? Baseline(f) : (std::fprintf(stderr, "%s\n", f.error.c_str()), Usage());
  }
  if (mode == "relay") {
    Flags f(argc, argv, 2, {"port", "token", "node", "tool", "sockets", "lines"});
    return f.error.empty() ? Relay(f) : (std::fprintf(stderr, "%s\n", f.error.c_str()), Usage());
  }
  return Usage();
}
