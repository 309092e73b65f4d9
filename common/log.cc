#include "common/log.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <nlohmann/json.hpp>

namespace edge::log {
namespace {

std::mutex g_secrets_mu;
std::set<std::string, std::less<>>& Secrets() {
  static std::set<std::string, std::less<>> secrets;
  return secrets;
}

// Formats each record as a text or JSON line, redacts it, hands it to the writer.
class LineSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void Configure(Format format, std::function<void(std::string_view)> writer) {
    std::lock_guard lock(mutex_);
    format_ = format;
    writer_ = std::move(writer);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string payload = Redact(std::string_view(msg.payload.data(), msg.payload.size()));
    auto secs = std::chrono::time_point_cast<std::chrono::milliseconds>(msg.time);
    std::string ts = fmt::format("{:%Y-%m-%dT%H:%M:%S}", secs);
    std::string level(spdlog::level::to_string_view(msg.level).data(),
                      spdlog::level::to_string_view(msg.level).size());
    std::string module(msg.logger_name.data(), msg.logger_name.size());
    std::string line;
    if (format_ == Format::kJson) {
      nlohmann::json j = {{"ts", ts + "Z"}, {"level", level}, {"module", module}, {"msg", payload}};
      line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      line = fmt::format("{}Z {:<5} [{}] {}", ts, level, module, payload);
    }
    line.push_back('\n');
    if (writer_) {
      writer_(line);
    } else {
      [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
    }
  }
  void flush_() override {}

 private:
  Format format_ = Format::kText;
  std::function<void(std::string_view)> writer_;
};

std::shared_ptr<LineSink>& Sink() {
  static auto sink = std::make_shared<LineSink>();
  return sink;
}

std::mutex g_level_mu;
spdlog::level::level_enum g_level = spdlog::level::info;

}  // namespace

Result<spdlog::level::level_enum> ParseLevel(std::string_view s) {
  static constexpr std::pair<std::string_view, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},   {"critical", spdlog::level::critical},
      {"off", spdlog::level::off}};
  for (const auto& [name, level] : kLevels) {
    if (s == name) return level;
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "log level \"" + std::string(s) +
                       "\" is not one of trace, debug, info, warn, error, critical, off");
}

Result<Format> ParseFormat(std::string_view s) {
  if (s == "text") return Format::kText;
  if (s == "json") return Format::kJson;
  return MakeError(ErrorCode::kInvalidArgument,
                   "log format \"" + std::string(s) + "\" is not one of text, json");
}

void Init(const Options& options) {
  Sink()->Configure(options.format, options.writer);
  {
    std::lock_guard lock(g_level_mu);
    g_level = options.level;
  }
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> l) { l->set_level(options.level); });
}

std::shared_ptr<spdlog::logger> Get(std::string_view module) {
  std::string name(module);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, Sink());
  {
    std::lock_guard lock(g_level_mu);
    logger->set_level(g_level);
  }
  logger->flush_on(spdlog::level::trace);
  try {
    spdlog::register_logger(logger);
  } catch (const spdlog::spdlog_ex&) {
    // Another thread registered it first.
    if (auto existing = spdlog::get(name)) return existing;
  }
  return logger;
}

void RegisterSecret(std::string_view secret) {
  if (secret.size() < 6) return;
  std::lock_guard lock(g_secrets_mu);
  Secrets().emplace(secret);
}

std::string Redact(std::string_view text) {
  std::string out(text);
  std::lock_guard lock(g_secrets_mu);
  for (const auto& s : Secrets()) {
    size_t pos = 0;
    while ((pos = out.find(s, pos)) != std::string::npos) {
      out.replace(pos, s.size(), "[REDACTED]");
      pos += 10;
    }
  }
  return out;
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (2..4) and its code point, or 0 when
// the bytes there are not valid UTF-8 (overlong forms, surrogates, > U+10FFFF, truncation).
size_t Utf8Sequence(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    *cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    *cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    *cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const unsigned char cc = b(k);
    const unsigned char min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
    if (cc < min || cc > max) return 0;
    *cp = (*cp << 6) | (cc & 0x3F);
  }
  return len;
}

bool HidesText(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0x200E ||
         cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string Escape(std::string_view s, size_t max_len) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(s.size(), max_len) + 24);
  std::string piece;
  size_t i = 0;
  while (i < s.size()) {
    piece.clear();
    size_t advance = 1;
    const auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    size_t seq = 0;
    if (c == '\\') {
      piece = "\\\\";
    } else if (c == '\n') {
      piece = "\\n";
    } else if (c == '\r') {
      piece = "\\r";
    } else if (c == '\t') {
      piece = "\\t";
    } else if (c == 0x1B) {
      piece = "\\e";
    } else if (c >= 0x20 && c < 0x7F) {
      piece.push_back(static_cast<char>(c));
    } else if (c >= 0x80 && (seq = Utf8Sequence(s, i, &cp)) != 0) {
      advance = seq;
      if (HidesText(cp)) {
        piece = fmt::format("\\u{{{:04x}}}", cp);
      } else {
        piece.assign(s.substr(i, seq));
      }
    } else {
      // Other C0 controls, DEL, and a byte that does not start valid UTF-8.
      piece = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
    if (out.size() + piece.size() > max_len) {
      out += fmt::format("...[{} more bytes]", s.size() - i);
      return out;
    }
    out += piece;
    i += advance;
  }
  return out;
}

}  // namespace edge::log
