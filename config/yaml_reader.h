// Internal to edge_config: reads typed values out of a yaml-cpp tree, recording a
// ConfigIssue (with file, line, column, dotted key, value and rule) for every problem, and
// rejecting unknown keys with a "did you mean" suggestion. Values that came from an
// environment override are reported against that variable instead of a file position.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_errors.h"

namespace edge::config {

// Environment lookup, injected so tests never touch the real environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}

  // Marks `path` as set from environment variable `var` (for error locations).
  void MarkFromEnv(const std::string& path, const std::string& var) { env_[path] = var; }

  // `node` must be a map (or null = empty); reports keys not in `allowed`.
  bool Map(const YAML::Node& node, const std::string& path,
           const std::vector<std::string_view>& allowed);

  void String(const YAML::Node& map, std::string_view key, const std::string& path,
              std::string& out);
  void Bool(const YAML::Node& map, std::string_view key, const std::string& path, bool& out);
  void Int(const YAML::Node& map, std::string_view key, const std::string& path, int64_t& out,
           int64_t min, int64_t max);
  template <typename T>
  void Integer(const YAML::Node& map, std::string_view key, const std::string& path, T& out,
               int64_t min, int64_t max) {
    int64_t v = static_cast<int64_t>(out);
    Int(map, key, path, v, min, max);
    out = static_cast<T>(v);
  }
  void Duration(const YAML::Node& map, std::string_view key, const std::string& path,
                std::chrono::milliseconds& out, std::chrono::milliseconds min,
                std::chrono::milliseconds max);
  void Size(const YAML::Node& map, std::string_view key, const std::string& path, uint64_t& out,
            uint64_t min, uint64_t max);
  void StringList(const YAML::Node& map, std::string_view key, const std::string& path,
                  std::vector<std::string>& out);
  void StringMap(const YAML::Node& map, std::string_view key, const std::string& path,
                 std::map<std::string, std::string>& out);

  // Records a problem at `node`'s position (or the env var that set `path`).
  void Issue(const YAML::Node& node, const std::string& path, const std::string& value,
             const std::string& rule);
  // Records that `value` names something the config does not define (ConfigIssue::cross_reference).
  void CrossReferenceIssue(const YAML::Node& node, const std::string& path,
                           const std::string& value, const std::string& rule);
  // Records a problem with no position inside the file.
  void IssueNoPos(const std::string& path, const std::string& value, const std::string& rule);

  ConfigErrors& errors() { return errors_; }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::map<std::string, std::string> env_;
  ConfigErrors errors_;
};

// Joins a dotted path.
inline std::string Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

// The closest of `candidates` to `word` within edit distance 2 (or 1/3 of its length), or "".
std::string DidYouMean(std::string_view word, const std::vector<std::string_view>& candidates);

// Writes `value` at dotted `path` inside `root` (creating maps on the way).
void SetPath(YAML::Node root, const std::string& path, const std::string& value);

// For each scalar key path, an override from `env` named prefix + upper(path, '.'->'_').
void ApplyEnvOverrides(YAML::Node root, const std::vector<std::string>& scalar_paths,
                       const std::string& prefix, const EnvLookup& env, YamlReader& reader);

// Parses `text`; a syntax error, text that is not UTF-8 or a control character other than
// tab, LF and CR becomes ConfigErrors naming `source`, line and column.
std::expected<YAML::Node, ConfigErrors> ParseYaml(const std::string& text,
                                                  const std::string& source,
                                                  const std::string& what = "YAML");

// Maps merge key by key (recursively); anything else in `delta` replaces.
YAML::Node DeepMerge(const YAML::Node& base, const YAML::Node& delta);

// Reads the contents of a secret file (trailing newline trimmed), or records an issue.
std::optional<std::string> ReadSecretFile(YamlReader& r, const YAML::Node& at,
                                          const std::string& path, const std::string& file);

}  // namespace edge::config
