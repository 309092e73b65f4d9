// What every `edge-controller` operator command shares (they are thin clients of the admin
// API on data_dir/admin.sock): loading the config, reaching the admin socket, reporting a
// refused call with the right exit code, parsing duration flags, and printing times and JSON.
// Free functions only; nothing here keeps state.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "config/controller_config.h"

namespace edge::controller::cli {

// Exit code of a command about a node that is not connected (EX_UNAVAILABLE).
inline constexpr int kExitNodeUnavailable = 69;
// Exit code of `invoke` / `fleet invoke` whose command succeeded but whose output reached this
// client only in part: it fell so far behind that the controller dropped some of it
// (controller/output_pacer.h, the `output_dropped` note; EX_IOERR). A failed command keeps its
// own exit code.
inline constexpr int kExitOutputIncomplete = 74;

// Loads the config or prints every problem; nullopt means exit 2.
std::optional<config::ControllerConfig> LoadConfig(const edge::cli::GlobalOptions& opts);

// A channel on the admin socket; nullptr after printing why when there is no socket there.
// With `wait_connected` it also connects first (up to 5 s), so that an UNAVAILABLE on a later
// call means a node, not the controller.
std::shared_ptr<grpc::Channel> AdminSocketChannel(const config::ControllerConfig& cfg,
                                                  bool wait_connected = false);

// What a command needs to call the admin API: the config and a stub of `Service` on the admin
// socket.
template <typename Service>
struct AdminCall {
  config::ControllerConfig cfg;
  std::unique_ptr<typename Service::Stub> stub;
};
// Loads the config and opens the admin socket (connected first with `wait_connected`); or the
// exit code to leave with, after printing why: 2 for a bad config, `unreachable` when there is
// no controller on the socket.
template <typename Service>
std::expected<AdminCall<Service>, int> OpenAdmin(const edge::cli::GlobalOptions& opts,
                                                 bool wait_connected = false,
                                                 int unreachable = edge::cli::kExitFailure) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return std::unexpected(edge::cli::kExitUsage);
  auto channel = AdminSocketChannel(*cfg, wait_connected);
  if (!channel) return std::unexpected(unreachable);
  return AdminCall<Service>{std::move(*cfg), Service::NewStub(channel)};
}

// A client context with a deadline `timeout` from now.
std::unique_ptr<grpc::ClientContext> CallContext(
    std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Prints a refused admin call and returns its exit code: the controller not reachable →
// `unreachable`; INVALID_ARGUMENT → 2; anything else → 1.
int ReportRpcFailure(const config::ControllerConfig& cfg, const grpc::Status& st,
                     int unreachable = edge::cli::kExitFailure);

// Prints a refused call about a node made on a channel from AdminSocketChannel(cfg, true)
// and returns its exit code: UNAVAILABLE is then the node, not connected → 69; otherwise as
// ReportRpcFailure, with the status code's name.
int ReportNodeCallFailure(const grpc::Status& st);

// A duration flag such as --ttl 30m: the value, or nullopt after printing "error: FLAG
// "VALUE" must be a duration of at least MIN, such as EXAMPLE" (the caller exits 2).
std::optional<std::chrono::milliseconds> ParseDurationFlag(const std::string& flag,
                                                           const std::string& value,
                                                           std::chrono::milliseconds min,
                                                           const std::string& example);

// RFC 3339 UTC: seconds ("2026-01-02T03:04:05Z") or milliseconds; "-" for 0.
std::string IsoTime(int64_t epoch_ms);
std::string IsoTimeMs(int64_t epoch_ms);
// JSON time: the RFC 3339 string with milliseconds, or null for 0.
nlohmann::json JsonTime(int64_t epoch_ms);

// JSON for the terminal: bytes that are not UTF-8 (a node's output) become U+FFFD instead of
// an exception.
std::string Dump(const nlohmann::json& j, int indent = -1);

// JSON from the controller (a payload, stored args): the value, or the text as a string when
// it is not JSON (or nested too deep to handle safely).
nlohmann::json JsonOrText(const std::string& text);

// Arguments travel as JSON text, which must be UTF-8. Prints a usage error naming the flag
// and where its value stops being UTF-8, and returns false, when `value` is not.
bool CheckUtf8(const std::string& flag, const std::string& value);

// A tool's arguments from `--args-json` (a JSON object) and `--arg k=v` (repeatable; wins):
// a value that is a JSON number, boolean, array or object is passed typed, a JSON "string"
// unquoted, anything else (null included) as the string it is. The object as JSON text, or
// nullopt after printing why (the caller exits 2).
std::optional<std::string> ArgsFromFlags(const std::string& args_json,
                                         const std::vector<std::string>& args);

// Prints a token that a `… token create` command minted. With --format json: one object of
// token, jti, expires_at and `fields`. Otherwise only the token on stdout (so `X=$(…)` or
// `> file` takes it) and "<what> <jti> <whom>, expires <time>" on stderr.
void PrintMintedToken(const std::string& format, const std::string& token, const std::string& jti,
                      int64_t expires_at_epoch_ms, nlohmann::json fields, const std::string& what,
                      const std::string& whom);

}  // namespace edge::controller::cli
