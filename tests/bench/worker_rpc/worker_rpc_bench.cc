// worker_rpc_bench: what the worker RPC door costs over doing the same thing by hand, measured
// in one run on this machine (issue 10's benchmarks). Prints figures; asserts nothing.
// In-process: the real Executor, the WorkerRpcHandler and an http::Server on loopback, driven
// by the blocking http::Client over one keep-alive connection.
//
//   1. `/bin/true` round trip: raw fork + execv + waitpid (baseline) versus worker.exec over
//      POST /rpc (argv mode). Median and p95.
//   2. exec_stream of SIZE bytes of text (`yes … | head -c SIZE`) as NDJSON over /rpc (the
//      client reads and discards) versus a raw pipe read of the same command, R times each,
//      interleaved. MiB/s.
//   3. file_write + file_read of SIZE bytes over /rpc versus `cp` of a file of that size, and
//      `cp` then `sync` of the copy (file_write fsyncs before it answers), R times each after
//      one round not counted; the client's base64 and envelope are inside the time, the
//      response is read, not parsed. Beside them, the transfer floor: the request's number of
//      bytes over a bare loopback TCP connection into fresh memory (LoopbackTransferSeconds).
//
// Usage: worker_rpc_bench [--runs N] [--stream-runs R] [--mib M] [--file-mib F]
//                         [--io-threads T] [--json PATH]
//   N round trips (default 200), R streams and file pairs (default 5), M MiB for the stream
//   (default 256), F MiB for the files (default: M); T threads run the event loop that the
//   executor and the server share (default 1, as the agent's sandbox.io_threads); PATH gets
//   every figure as JSON
//   (tests/bench/bench_report.h, for scripts/bench.sh's results.json).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/identity/worker_authenticator.h"
#include "agent/worker_rpc/worker_rpc_handler.h"
#include "common/base64.h"
#include "common/clock.h"
#include "common/huge_pages.h"
#include "common/log.h"
#include "common/string_fill.h"
#include "http/client.h"
#include "http/server.h"
#include "sandbox/executor.h"
#include "sandbox/tool_registry.h"
#include "tests/bench/bench_os.h"
#include "tests/bench/bench_report.h"

namespace {

using SteadyClock = std::chrono::steady_clock;
using nlohmann::json;

double Micros(SteadyClock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}
double Seconds(SteadyClock::duration d) {
  return std::chrono::duration<double>(d).count();
}

using edge::bench::ChildrenCpuSeconds;
using edge::bench::CpuSeconds;

struct Stats {
  double median, p95;
};
Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 95 / 100)]};
}

double ForkExecTrue() {
  const auto t0 = SteadyClock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ::execv("/bin/true", argv);
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return Micros(SteadyClock::now() - t0);
}

// Text output (what commands usually print; NUL bytes would cost 6 bytes each as JSON).
std::string TextCommand(size_t mib) {
  return "yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c " + std::to_string(mib << 20);
}

double RawPipeMiBs(size_t mib) {
  const std::string cmd = TextCommand(mib);
  const auto t0 = SteadyClock::now();
  FILE* f = ::popen(cmd.c_str(), "r");
  std::vector<char> buf(64 << 10);
  size_t total = 0;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), f))
    total += n;
  ::pclose(f);
  return (total / double(1 << 20)) / Seconds(SteadyClock::now() - t0);
}

// The floor under moving `payload` from one process's memory into another's, whatever the
// protocol: its bytes written on a fresh loopback TCP connection and read on another thread
// into fresh memory sized for them at once (huge pages from 8 MiB), as the HTTP server reads
// a file_write's body (http/server.cc ReadBodyDirect). Seconds from the first write to the
// last byte read; -1 when a step fails.
double LoopbackTransferSeconds(const std::string& payload) {
  const auto [sfd, cfd] = edge::bench::LoopbackTcpPair();
  if (sfd < 0) return -1;
  const auto t0 = SteadyClock::now();
  bool read_ok = false;
  std::thread reader([&, sfd = sfd] {
    std::string into;
    edge::ResizeUninitialized(into, payload.size());
    size_t have = 0;
    while (have < into.size()) {
      const ssize_t n = ::read(sfd, into.data() + have, into.size() - have);
      if (n <= 0) return;
      have += static_cast<size_t>(n);
    }
    read_ok = true;
  });
  size_t sent = 0;
  while (sent < payload.size()) {
    const ssize_t n = ::write(cfd, payload.data() + sent, payload.size() - sent);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(cfd, SHUT_WR);
  reader.join();
  const double secs = Seconds(SteadyClock::now() - t0);
  ::close(sfd);
  ::close(cfd);
  return read_ok ? secs : -1;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 200, stream_runs = 5, io_threads = 1;
  size_t mib = 256, file_mib = 0;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--stream-runs") == 0) stream_runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--io-threads") == 0) io_threads = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--mib") == 0) mib = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--file-mib") == 0) {
      file_mib = std::strtoull(argv[i + 1], nullptr, 10);
    }
  }
  if (file_mib == 0) file_mib = mib;
  if (runs < 1 || stream_runs < 1 || mib < 1 || io_threads < 1 || io_threads > 16) {
    std::fprintf(stderr,
                 "usage: worker_rpc_bench [--runs N>0] [--stream-runs R>0] [--mib M>0] "
                 "[--file-mib F>0] [--io-threads 1-16] [--json PATH]\n");
    return 2;
  }
  // The door logs every call at info: keep the figures readable.
  edge::log::Init({.level = spdlog::level::warn});
  char tmpl[] = "/tmp/edge-wbench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);

  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::vector<std::thread> io_pool;
  for (int i = 0; i < io_threads; ++i)
    io_pool.emplace_back([&] { io.run(); });
  edge::SystemClock clock;
  edge::sandbox::ExecutorOptions opts;
  opts.data_dir = dir;
  opts.own_id = "bench";
  opts.pids_cgroup_root = "";
  opts.max_output_bytes = (std::max(mib, file_mib) + 1) << 20;
  auto ex = edge::sandbox::Executor::Open(io, clock, opts);
  if (!ex) {
    std::fprintf(stderr, "executor: %s\n", ex.error().ToString().c_str());
    return 1;
  }
  edge::config::WorkerAuth auth;
  auth.worker_token = "bench-token-0123456789";
  edge::identity::WorkerAuthenticator authn("bench", auth, clock);
  edge::workerrpc::WorkerRpcHandler handler(**ex, authn,
                                            {.worker_id = "bench", .max_result_bytes = 0});
  edge::http::ServerOptions so;
  const size_t biggest = std::max(mib, file_mib);
  so.max_body_bytes = (biggest * 2 + 16) << 20;
  edge::http::Server server(io, so, handler);
  if (!server.Listen("127.0.0.1:0")) return 1;
  auto client = edge::http::Client::Connect(
      "127.0.0.1", server.port(),
      {.timeout = std::chrono::minutes(5), .max_response_bytes = (biggest * 3 + 16) << 20});
  if (!client) return 1;
  const edge::http::Headers hdr = {{"X-Worker-ID", "bench"},
                                   {"X-Worker-Token", "bench-token-0123456789"}};
  edge::sandbox::Lease lease{"sb", "bench", 1, clock.Now() + std::chrono::hours(1)};
  auto rpc = [&](const std::string& method, json params, bool with_lease = false,
                 edge::http::Headers extra = {}) {
    json env = {{"id", "b"}, {"method", method}, {"params", std::move(params)}};
    if (with_lease) {
      env["lease"] = {{"resource_id", "sb"},
                      {"holder_id", "bench"},
                      {"generation", 1},
                      {"expires_at", "2199-01-01T00:00:00Z"}};
    }
    auto h = hdr;
    h.insert(h.end(), extra.begin(), extra.end());
    return (*client)->Send({.method = "POST", .target = "/rpc", .headers = h, .body = env.dump()});
  };
  auto spawned = rpc("worker.spawn", {{"sandbox_id", "sb"}}, true);
  if (!spawned || spawned->status != 200) {
    std::fprintf(stderr, "spawn failed\n");
    return 1;
  }

  // 1. round trip
  std::vector<double> raw, door;
  for (int i = 0; i < runs; ++i)
    raw.push_back(ForkExecTrue());
  for (int i = 0; i < runs; ++i) {
    const auto t0 = SteadyClock::now();
    auto r = rpc("worker.exec", {{"sandbox_id", "sb"}, {"command", "/bin/true"}, {"mode", "argv"}});
    if (!r || r->status != 200) {
      std::fprintf(stderr, "exec failed: %s\n", r ? r->body.c_str() : r.error().ToString().c_str());
      return 1;
    }
    door.push_back(Micros(SteadyClock::now() - t0));
  }
  // The issue's baseline is fork/exec plus one HTTP request: a GET /health round trip on the
  // same keep-alive connection and server.
  std::vector<double> http_rt;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = SteadyClock::now();
    auto r = (*client)->Send({.method = "GET", .target = "/health"});
    if (!r || r->status != 200) {
      std::fprintf(stderr, "health failed\n");
      return 1;
    }
    http_rt.push_back(Micros(SteadyClock::now() - t0));
  }
  auto a = Summarize(raw), b = Summarize(door), hr = Summarize(http_rt);
  std::printf(
      "exec /bin/true x%d: fork/exec median %.0f us p95 %.0f us | GET /health median %.0f us | "
      "worker.exec over /rpc median %.0f us p95 %.0f us (%.1fx fork/exec, %.2fx fork/exec + "
      "one HTTP request)\n",
      runs, a.median, a.p95, hr.median, b.median, b.p95, b.median / a.median,
      b.median / (a.median + hr.median));

  // 2. NDJSON stream, R times, each beside a raw pipe read of the same command. Where each
  // stream's CPU went, per GiB of output (as exec_stream_floor_bench reports its floor): this
  // thread (the client), the rest of this process (the door: executor, handler, server), the
  // command (sh, yes, head).
  std::vector<double> client_cpu, door_cpu, command_cpu;
  auto stream_once = [&]() -> double {
    size_t got = 0;
    std::string last;  // the end of what came, for the final line
    const double self0 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
    const double process0 = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
    const double children0 = ChildrenCpuSeconds();
    const auto t0 = SteadyClock::now();
    json env = {
        {"id", "s"},
        {"method", "worker.exec_stream"},
        {"params", {{"sandbox_id", "sb"}, {"command", TextCommand(mib)}, {"timeout", "10m"}}}};
    auto h = hdr;
    h.emplace_back("X-Worker-Stream", "ndjson");
    auto sr = (*client)->SendStreaming(
        {.method = "POST", .target = "/rpc", .headers = h, .body = env.dump()},
        [&](std::string_view d) {
          got += d.size();
          last.append(d.substr(d.size() > 256 ? d.size() - 256 : 0));
          if (last.size() > 512) last.erase(0, last.size() - 256);
          return true;
        });
    const double secs = Seconds(SteadyClock::now() - t0);
    const double gib = static_cast<double>(mib) / 1024.0;
    const double self = CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - self0;
    client_cpu.push_back(self / gib);
    door_cpu.push_back((CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - process0 - self) / gib);
    command_cpu.push_back((ChildrenCpuSeconds() - children0) / gib);
    // The command ended well (the last line says so: an error line is a failed stream) and at
    // least its output came back, escaped.
    const bool done = last.find(R"("result":{"done":true,"exit_code":0})") != std::string::npos;
    if (!sr || sr->status != 200 || !done || got < (mib << 20)) {
      std::fprintf(stderr,
                   "exec_stream failed: %s, status %u, %zu bytes of NDJSON for %zu of output, last "
                   "line %s\n",
                   sr ? "answered" : sr.error().ToString().c_str(), sr ? sr->status : 0u, got,
                   mib << 20, done ? "a successful result" : ("not one: ..." + last).c_str());
      return -1;
    }
    return mib / secs;
  };
  std::vector<double> pipes, streams;
  for (int i = 0; i < stream_runs; ++i) {
    pipes.push_back(RawPipeMiBs(mib));
    const double v = stream_once();
    if (v < 0) return 1;
    streams.push_back(v);
  }
  namespace eb = edge::bench;
  const auto ps = eb::Summarize(pipes), ss = eb::Summarize(streams);
  std::printf(
      "exec_stream %zu MiB as NDJSON x%d, %d I/O thread(s): median %.0f MiB/s of output (min "
      "%.0f, max %.0f) | raw pipe median %.0f MiB/s (min %.0f, max %.0f)\n",
      mib, stream_runs, io_threads, ss.median, ss.min, ss.max, ps.median, ps.min, ps.max);
  const auto cc = eb::Summarize(client_cpu), dc = eb::Summarize(door_cpu),
             kc = eb::Summarize(command_cpu);
  std::printf(
      "exec_stream CPU-s per GiB of output, medians: door (executor, handler, server) %.2f, "
      "client %.2f, the command (sh, yes, head) %.2f, all %.2f\n",
      dc.median, cc.median, kc.median, dc.median + cc.median + kc.median);

  // 3. file_write + file_read, R times each, beside cp
  const std::string src = dir + "/src.bin", dst = dir + "/dst.bin";
  {
    std::ofstream f(src, std::ios::binary);
    std::string block(1 << 20, 'x');
    for (size_t i = 0; i < file_mib; ++i)
      f.write(block.data(), static_cast<std::streamsize>(block.size()));
  }
  const std::string content(file_mib << 20, 'x');
  std::vector<double> cps, durable_cps, writes, reads, encodes, transfers;
  // As many bytes as the file_write request (and about as many as file_read's answer).
  const std::string transfer_payload((content.size() + 2) / 3 * 4 + 96, 'A');
  // One round more than asked for, the first not counted: on a VM, memory the guest has never
  // touched (fresh page cache, fresh buffers) costs several times more the first time, and
  // the first round is the only one that pays it for every buffer (stop 51: 2.3 s against
  // 0.65 for the same file_write, by strace's timestamps).
  constexpr int kWarmUpRounds = 1;
  for (int i = 0; i < stream_runs + kWarmUpRounds; ++i) {
    auto c0 = SteadyClock::now();
    if (std::system(("cp " + src + " " + dst).c_str()) != 0) {
      std::fprintf(stderr, "cp failed\n");
      return 1;
    }
    cps.push_back(Seconds(SteadyClock::now() - c0));
    // The same copy made durable, as file_write's is (it fsyncs before it answers): coreutils'
    // `sync FILE` fsyncs that file.
    if (std::system(("rm -f " + dst).c_str()) != 0) return 1;
    auto d0 = SteadyClock::now();
    if (std::system(("cp " + src + " " + dst + " && sync " + dst).c_str()) != 0) {
      std::fprintf(stderr, "cp && sync failed\n");
      return 1;
    }
    durable_cps.push_back(Seconds(SteadyClock::now() - d0));
    transfers.push_back(LoopbackTransferSeconds(transfer_payload));
    if (transfers.back() < 0) {
      std::fprintf(stderr, "the loopback transfer failed\n");
      return 1;
    }
    auto w0 = SteadyClock::now();
    // The client's part, timed too: base64 and the envelope, written as a client would write
    // it (nlohmann's dump of a 350 MB string would measure nlohmann, not the door): the text
    // encoded straight into the request's buffer, between the envelope's two halves.
    std::string write_body;
    edge::ReserveLarge(write_body, (content.size() + 2) / 3 * 4 + 128);  // as the door's are
    write_body.append(
        R"({"id":"b","method":"worker.file_write","params":{"sandbox_id":"sb","path":"big.bin",)"
        R"("content":")");
    edge::Base64EncodeAppend(content, write_body);
    write_body.append(R"("}})");
    encodes.push_back(Seconds(SteadyClock::now() - w0));
    auto wr = (*client)->Send(
        {.method = "POST", .target = "/rpc", .headers = hdr, .body = std::move(write_body)});
    writes.push_back(Seconds(SteadyClock::now() - w0));
    auto r0 = SteadyClock::now();
    auto rd = rpc("worker.file_read", {{"sandbox_id", "sb"}, {"path", "big.bin"}});
    reads.push_back(Seconds(SteadyClock::now() - r0));
    if (!wr || wr->status != 200 || !rd || rd->status != 200) {
      std::fprintf(stderr, "file_write or file_read failed\n");
      return 1;
    }
  }
  for (auto* v : {&cps, &durable_cps, &writes, &reads, &encodes, &transfers})
    v->erase(v->begin(), v->begin() + kWarmUpRounds);
  const auto cs = eb::Summarize(cps), ds = eb::Summarize(durable_cps), ws = eb::Summarize(writes),
             rs = eb::Summarize(reads), es = eb::Summarize(encodes), ts = eb::Summarize(transfers);
  std::printf(
      "file %zu MiB x%d: file_write median %.2f s (min %.2f, max %.2f; the client's base64 and "
      "envelope %.2f s of it), file_read median %.2f s (min %.2f, max %.2f) | cp median %.2f s, "
      "cp && sync median %.2f s (min %.2f, max %.2f)\n",
      file_mib, stream_runs, ws.median, ws.min, ws.max, es.median, rs.median, rs.min, rs.max,
      cs.median, ds.median, ds.min, ds.max);
  std::printf(
      "file %zu MiB x%d: the request's %zu bytes over bare loopback TCP into fresh memory median "
      "%.2f s (min %.2f, max %.2f) — the transfer floor under each of file_write and file_read\n",
      file_mib, stream_runs, transfer_payload.size(), ts.median, ts.min, ts.max);

  json figures = json::array();
  figures.push_back(eb::FigureJson("fork/exec /bin/true", "us", eb::Summarize(raw)));
  figures.push_back(eb::FigureJson("GET /health round trip", "us", eb::Summarize(http_rt)));
  auto exec_fig = eb::FigureJson("worker.exec /bin/true over /rpc", "us", eb::Summarize(door));
  exec_fig["baseline"] = "fork/exec /bin/true";
  exec_fig["ratio"] = b.median / a.median;
  figures.push_back(std::move(exec_fig));
  figures.push_back(eb::FigureJson("raw pipe read of the stream's command", "MiB/s", ps));
  auto stream_fig = eb::FigureJson("exec_stream as NDJSON", "MiB/s", ss);
  stream_fig["baseline"] = "raw pipe read of the stream's command";
  stream_fig["ratio"] = ps.median > 0 ? ss.median / ps.median : 0.0;
  figures.push_back(std::move(stream_fig));
  figures.push_back(eb::FigureJson("exec_stream: door CPU per GiB", "CPU-s/GiB", dc));
  figures.push_back(eb::FigureJson("exec_stream: client CPU per GiB", "CPU-s/GiB", cc));
  figures.push_back(eb::FigureJson("exec_stream: the command's CPU per GiB", "CPU-s/GiB", kc));
  figures.push_back(eb::FigureJson("cp of the file", "s", cs));
  figures.push_back(eb::FigureJson("cp of the file, then sync of the copy", "s", ds));
  figures.push_back(eb::FigureJson("file_write (client's base64 included)", "s", ws));
  figures.push_back(eb::FigureJson("file_read", "s", rs));
  figures.push_back(
      eb::FigureJson("the file request's bytes over bare loopback TCP into fresh memory", "s", ts));
  if (!eb::WriteFigures(json_path, figures)) {
    std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
    return 1;
  }

  client->reset();
  server.Stop();
  work.reset();
  io.stop();
  for (auto& t : io_pool)
    t.join();
  std::filesystem::remove_all(dir);
  return 0;
}
