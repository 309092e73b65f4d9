// json_text_bench: what the worker door's JSON text costs per byte, beside copying the same
// bytes, measured in one run on this machine (issue 14, target 5). Prints figures; asserts
// nothing.
//
//   1. Writing: the exec stream's text (`yes …` lines: a newline, which must be escaped, every
//      37 bytes) in 1 MiB chunks, each as a JSON string of its own the way NdjsonChunkLine
//      writes it — IsValidUtf8 then AppendJsonString — beside memcpy of each chunk into a
//      string of its own (baseline) and nlohmann's dump of it.
//   2. Reading the same stream's NDJSON lines whole, as the operator's CLI does to see whether
//      one carries an error (`edge-controller worker call --stream`), beside copying each line.
//   3. Reading: a request whose one string is SIZE bytes of base64 (file_write's `content`)
//      through ParseJsonBounded, beside memcpy of the text (baseline) and nlohmann::json::parse.
//
// MiB/s of input, one sample per run. Usage: json_text_bench [--runs N] [--mib M] [--json PATH]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_parse.h"
#include "common/utf8.h"
#include "tests/bench/bench_report.h"

namespace {

using Clock = std::chrono::steady_clock;

// Runs `f` once and returns MiB of `bytes` per second.
double MibPerSecond(size_t bytes, const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(bytes) / (1 << 20) / s;
}

std::string StreamText(size_t bytes) {
  const std::string line = "abcdefghijklmnopqrstuvwxyz0123456789\n";
  std::string text;
  text.reserve(bytes + line.size());
  while (text.size() < bytes)
    text += line;
  text.resize(bytes);
  return text;
}

std::string Base64Request(size_t bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text = R"({"id":"1","method":"worker.file_write","params":{"content":")";
  const size_t head = text.size();
  text.resize(head + bytes);
  for (size_t i = 0; i < bytes; ++i)
    text[head + i] = kAlphabet[(i * 7 + i / 64) % 64];
  text += R"(","path":"/f","sandbox_id":"sb"}})";
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 10;
  size_t mib = 64;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--mib") == 0) mib = static_cast<size_t>(std::atol(argv[i + 1]));
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
  }
  if (runs < 1 || mib < 1) {
    std::fprintf(stderr, "usage: json_text_bench [--runs N>0] [--mib M>0] [--json PATH]\n");
    return 2;
  }
  const size_t bytes = mib << 20;
  edge::bench::BenchReport report;
  std::printf("json_text_bench: %zu MiB, %d runs (MiB/s of input)\n", mib, runs);

  // In the door's 1 MiB chunks, each written into a string of its own, as NdjsonChunkLine does.
  const std::string text = StreamText(bytes);
  constexpr size_t kChunk = 1 << 20;
  auto each_chunk = [&](const std::function<void(std::string_view, std::string&)>& f) {
    for (size_t at = 0; at < text.size(); at += kChunk) {
      std::string out;
      f(std::string_view(text).substr(at, kChunk), out);
    }
  };
  std::vector<double> copy, write, dump;
  for (int r = 0; r < runs; ++r) {
    copy.push_back(MibPerSecond(bytes, [&] {
      each_chunk([](std::string_view chunk, std::string& out) { out.assign(chunk); });
    }));
    write.push_back(MibPerSecond(bytes, [&] {
      each_chunk([](std::string_view chunk, std::string& out) {
        out.reserve(chunk.size() + 64);
        if (!edge::IsValidUtf8(chunk)) std::abort();
        edge::AppendJsonString(out, chunk);
        if (out.size() <= chunk.size()) std::abort();  // the newlines were escaped
      });
    }));
    dump.push_back(MibPerSecond(bytes, [&] {
      each_chunk(
          [](std::string_view chunk, std::string& out) { out = nlohmann::json(chunk).dump(); });
    }));
  }
  report.Add("memcpy of the stream's text", "MiB/s", copy);
  report.Add("IsValidUtf8 + AppendJsonString (an NDJSON chunk)", "MiB/s", write,
             "memcpy of the stream's text");
  report.Add("nlohmann::json(text).dump()", "MiB/s", dump, "memcpy of the stream's text");

  // The same stream as the operator's CLI reads it (`edge-controller worker call --stream`):
  // each 1 MiB chunk's NDJSON line parsed whole to see whether it carries an error, beside a
  // copy of each line. MiB/s of the stream's text.
  std::vector<std::string> lines;
  each_chunk([&](std::string_view chunk, std::string&) {
    std::string line = R"({"id":"s","result":{"data":)";
    edge::AppendJsonString(line, chunk);
    line += R"(,"stream":"stdout"},"worker_id":"worker-1"})";
    lines.push_back(std::move(line));
  });
  std::vector<double> lcopy, lread;
  for (int r = 0; r < runs; ++r) {
    lcopy.push_back(MibPerSecond(bytes, [&] {
      for (const auto& l : lines) {
        std::string out(l);
        if (out.size() != l.size()) std::abort();
      }
    }));
    lread.push_back(MibPerSecond(bytes, [&] {
      for (const auto& l : lines) {
        auto j = edge::ParseJsonBounded(l, "an NDJSON line");
        if (!j || j->contains("error")) std::abort();
      }
    }));
  }
  report.Add("memcpy of each NDJSON line", "MiB/s", lcopy);
  report.Add("ParseJsonBounded of each NDJSON line (the CLI's error check)", "MiB/s", lread,
             "memcpy of each NDJSON line");

  const std::string request = Base64Request(bytes);
  std::vector<double> rcopy, read, parse;
  for (int r = 0; r < runs; ++r) {
    std::string out;
    rcopy.push_back(MibPerSecond(bytes, [&] { out.assign(request); }));
    read.push_back(MibPerSecond(bytes, [&] {
      auto j = edge::ParseJsonBounded(request, "the request");
      if (!j || (*j)["params"]["content"].get_ref<const std::string&>().size() != bytes) {
        std::abort();
      }
    }));
    parse.push_back(MibPerSecond(bytes, [&] {
      auto j = nlohmann::json::parse(request);
      if (j["params"]["content"].get_ref<const std::string&>().size() != bytes) std::abort();
    }));
  }
  report.Add("memcpy of the request", "MiB/s", rcopy);
  report.Add("ParseJsonBounded (file_write's base64)", "MiB/s", read, "memcpy of the request");
  report.Add("nlohmann::json::parse", "MiB/s", parse, "memcpy of the request");
  return report.Write(json_path) ? 0 : 1;
}
