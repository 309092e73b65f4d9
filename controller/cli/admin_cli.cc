#include "controller/cli/admin_cli.h"

#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <iostream>

#include "common/grpc_status.h"
#include "common/json_parse.h"
#include "common/log.h"
#include "config/duration.h"
#include "controller/admin_server.h"

namespace edge::controller::cli {

std::optional<config::ControllerConfig> LoadConfig(const edge::cli::GlobalOptions& opts) {
  return edge::cli::LoadConfigOrReport(opts, config::LoadControllerConfig);
}

std::shared_ptr<grpc::Channel> AdminSocketChannel(const config::ControllerConfig& cfg,
                                                  bool wait_connected) {
  struct stat st {};
  if (::stat(cfg.admin.socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    std::fprintf(stderr,
                 "error: controller not reachable on %s: no socket there (is it running?)\n",
                 cfg.admin.socket.c_str());
    return nullptr;
  }
  auto channel = AdminChannel(cfg.admin.socket);
  if (wait_connected &&
      !channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    std::fprintf(stderr, "error: controller not reachable on %s\n", cfg.admin.socket.c_str());
    return nullptr;
  }
  return channel;
}

std::unique_ptr<grpc::ClientContext> CallContext(std::chrono::milliseconds timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

int ReportRpcFailure(const config::ControllerConfig& cfg, const grpc::Status& st, int unreachable) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
    std::fprintf(stderr, "error: controller not reachable on %s: %s\n", cfg.admin.socket.c_str(),
                 st.error_message().c_str());
    return unreachable;
  }
  std::fprintf(stderr, "error: %s\n", st.error_message().c_str());
  return st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? edge::cli::kExitUsage
                                                               : edge::cli::kExitFailure;
}

int ReportNodeCallFailure(const grpc::Status& st) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
    std::fprintf(stderr, "error: %s\n", st.error_message().c_str());
    return kExitNodeUnavailable;
  }
  std::fprintf(stderr, "error: %s: %s\n", std::string(GrpcCodeName(st.error_code())).c_str(),
               st.error_message().c_str());
  return st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? edge::cli::kExitUsage
                                                               : edge::cli::kExitFailure;
}

std::optional<std::chrono::milliseconds> ParseDurationFlag(const std::string& flag,
                                                           const std::string& value,
                                                           std::chrono::milliseconds min,
                                                           const std::string& example) {
  auto d = config::ParseDuration(value);
  if (d && *d >= min) return *d;
  const std::string what =
      min.count() > 0 ? " of at least " + config::FormatDuration(min) + "," : std::string(",");
  std::fprintf(stderr, "error: %s \"%s\" must be a duration%s such as %s\n", flag.c_str(),
               value.c_str(), what.c_str(), example.c_str());
  return std::nullopt;
}

namespace {
std::string Utc(int64_t epoch_ms, const char* format) {
  std::time_t secs = epoch_ms / 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}
}  // namespace

std::string IsoTime(int64_t epoch_ms) {
  return epoch_ms == 0 ? "-" : Utc(epoch_ms, "%Y-%m-%dT%H:%M:%SZ");
}

std::string IsoTimeMs(int64_t epoch_ms) {
  if (epoch_ms == 0) return "-";
  char out[64];
  std::snprintf(out, sizeof out, "%s.%03dZ", Utc(epoch_ms, "%Y-%m-%dT%H:%M:%S").c_str(),
                static_cast<int>(epoch_ms % 1000));
  return out;
}

nlohmann::json JsonTime(int64_t epoch_ms) {
  return epoch_ms == 0 ? nlohmann::json(nullptr) : nlohmann::json(IsoTimeMs(epoch_ms));
}

std::string Dump(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json JsonOrText(const std::string& text) {
  auto j = ParseJsonBounded(text, "json");
  return j ? std::move(*j) : nlohmann::json(text);
}

bool CheckUtf8(const std::string& flag, const std::string& value) {
  try {
    (void)nlohmann::json(value).dump();
    return true;
  } catch (const nlohmann::json::type_error& e) {
    std::string why = e.what();
    if (auto p = why.find("] "); p != std::string::npos) why = why.substr(p + 2);
    std::fprintf(stderr,
                 "error: %s \"%s\" is not valid UTF-8 (%s): arguments travel as JSON text; "
                 "write a character as a JSON escape in --args-json (\"\\u00ff\"), or pass "
                 "raw bytes base64-encoded to a tool that takes them (file.write content)\n",
                 flag.c_str(), log::Escape(value, 120).c_str(), why.c_str());
    return false;
  }
}

namespace {
// A value of --arg k=v (see ArgsFromFlags).
nlohmann::json ArgValue(const std::string& v) {
  auto j = ParseJsonBounded(v, "--arg");
  if (j && (j->is_number() || j->is_boolean() || j->is_array() || j->is_object() || j->is_string()))
    return std::move(*j);
  return v;
}
}  // namespace

std::optional<std::string> ArgsFromFlags(const std::string& args_json,
                                         const std::vector<std::string>& args) {
  nlohmann::json out = nlohmann::json::object();
  if (!args_json.empty()) {
    auto parsed = ParseJsonBounded(args_json, "--args-json");
    if (!parsed) {
      std::fprintf(stderr, "error: %s\n", parsed.error().message.c_str());
      return std::nullopt;
    }
    if (!parsed->is_object()) {
      std::fprintf(stderr,
                   "error: --args-json must be a JSON object, such as '{\"path\":\"x\"}'\n");
      return std::nullopt;
    }
    out = std::move(*parsed);
  }
  for (const auto& kv : args) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "error: --arg \"%s\" must be key=value\n", log::Escape(kv, 120).c_str());
      return std::nullopt;
    }
    if (!CheckUtf8("--arg", kv)) return std::nullopt;
    out[kv.substr(0, eq)] = ArgValue(kv.substr(eq + 1));
  }
  return out.dump();
}

void PrintMintedToken(const std::string& format, const std::string& token, const std::string& jti,
                      int64_t expires_at_epoch_ms, nlohmann::json fields, const std::string& what,
                      const std::string& whom) {
  if (format == "json") {
    fields["token"] = token;
    fields["jti"] = jti;
    fields["expires_at"] = IsoTimeMs(expires_at_epoch_ms);
    std::cout << fields.dump() << "\n";
    return;
  }
  std::cout << token << "\n";
  std::fprintf(stderr, "%s %s %s, expires %s\n", what.c_str(), jti.c_str(), whom.c_str(),
               IsoTimeMs(expires_at_epoch_ms).c_str());
}

}  // namespace edge::controller::cli
