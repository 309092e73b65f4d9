// Shared command-line conventions of edge-agent and edge-controller (header-only, CLI11):
// exit codes (0 ok, 1 runtime failure, 2 usage or config error), the global logging flags,
// and --format text|json for commands that print records.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

#include "common/log.h"

namespace edge::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A group of subcommands that lives in its own file (`edge-agent token …`,
// `edge-controller worker …`): its Add…Commands(app, opts) adds the subcommands and returns
// a runner, which main calls after parsing; the runner returns the exit code when one of its
// commands was chosen, nullopt otherwise. Logging is initialised before it runs.
using CommandRunner = std::function<std::optional<int>()>;

struct GlobalOptions {
  std::string config_path;
  std::string log_level;   // empty = from config (or info)
  std::string log_format;  // empty = from config (or text)
};

inline void AddGlobalOptions(CLI::App& app, GlobalOptions& opts,
                             const std::string& default_config) {
  opts.config_path = default_config;
  // Global flags may also follow the subcommand: `edge-agent config check --config F`.
  app.fallthrough();
  app.add_option("-c,--config", opts.config_path, "config file")
      ->capture_default_str()
      ->envname(app.get_name() == "edge-agent" ? "EDGE_AGENT_CONFIG" : "EDGE_CONTROLLER_CONFIG");
  app.add_option("--log-level", opts.log_level,
                 "trace|debug|info|warn|error|critical|off (overrides log.level)");
  app.add_option("--log-format", opts.log_format, "text|json (overrides log.format)");
}

// Initializes logging from the flags, falling back to the config's values. Returns false
// (after printing why) when a value is invalid.
inline bool InitLogging(const GlobalOptions& opts, const std::string& cfg_level = "info",
                        const std::string& cfg_format = "text") {
  auto level = log::ParseLevel(opts.log_level.empty() ? cfg_level : opts.log_level);
  auto format = log::ParseFormat(opts.log_format.empty() ? cfg_format : opts.log_format);
  if (!level || !format) {
    std::fprintf(stderr, "error: %s\n", (!level ? level.error() : format.error()).message.c_str());
    return false;
  }
  log::Init({.level = *level, .format = *format, .writer = {}});
  return true;
}

// The process environment as an optional-returning lookup (what config loaders take).
inline std::optional<std::string> GetEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// Loads a config with `loader(path, GetEnv)`, or prints every problem and returns nullopt
// (the caller exits kExitUsage).
template <typename Loader>
auto LoadConfigOrReport(const GlobalOptions& opts, Loader loader)
    -> std::optional<typename decltype(loader(opts.config_path, GetEnv))::value_type> {
  auto cfg = loader(opts.config_path, GetEnv);
  if (!cfg) {
    std::fprintf(stderr, "%s\n", cfg.error().ToString().c_str());
    return std::nullopt;
  }
  return std::move(*cfg);
}

// Adds --format text|json to a subcommand that prints records.
inline void AddFormatOption(CLI::App* cmd, std::string& format) {
  format = "text";
  cmd->add_option("--format", format, "output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

// Parses argv; on --help/--version prints and returns kExitOk, on a usage error prints it
// with a hint and returns kExitUsage; returns -1 when the caller should go on.
inline int Parse(CLI::App& app, int argc, char** argv) {
  // A first word that is not an option must name a command; say which word was wrong.
  std::string names;
  bool known = false;
  for (const auto* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->check_name(argv[1]));
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::fprintf(stderr,
                 "error: unknown command \"%s\" (commands: %s)\nRun '%s --help' for usage.\n",
                 argv[1], names.c_str(), app.get_name().c_str());
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\nRun '%s --help' for usage.\n", e.what(),
                 app.get_name().c_str());
    return kExitUsage;
  }
  return -1;
}

}  // namespace edge::cli
