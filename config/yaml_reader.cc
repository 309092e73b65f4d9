#include "config/yaml_reader.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "common/atomic_file.h"
#include "common/utf8.h"
#include "config/duration.h"

namespace edge::config {

std::string ConfigIssue::ToString() const {
  // Appends only: gcc 12 at -O3 warns (-Wrestrict, a false positive) on "x" + std::string&&.
  std::string out = source;
  if (line > 0) {
    out.append(":").append(std::to_string(line)).append(":").append(std::to_string(column));
  }
  out += ": ";
  if (!key.empty()) out += key + ": ";
  if (!value.empty()) out += "value \"" + value + "\": ";
  out += rule;
  return out;
}

std::string ConfigErrors::ToString() const {
  std::string out;
  for (const auto& i : issues) {
    if (!out.empty()) out += "\n";
    out += i.ToString();
  }
  return out;
}

namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string Upper(std::string s) {
  for (auto& c : s)
    c = c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string ScalarText(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsSequence()) return "<list>";
  if (n.IsMap()) return "<map>";
  return "";
}

}  // namespace

std::string DidYouMean(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (auto c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_d) {
      best_d = d;
      best = std::string(c);
    }
  }
  return best;
}

void YamlReader::Issue(const YAML::Node& node, const std::string& path, const std::string& value,
                       const std::string& rule) {
  if (auto it = env_.find(path); it != env_.end()) {
    errors_.issues.push_back({"environment " + it->second, 0, 0, path, value, rule});
    return;
  }
  ConfigIssue issue{source_, 0, 0, path, value, rule};
  if (node.IsDefined()) {
    auto mark = node.Mark();
    if (mark.line >= 0) {
      issue.line = mark.line + 1;
      issue.column = mark.column + 1;
    }
  }
  errors_.issues.push_back(std::move(issue));
}

void YamlReader::CrossReferenceIssue(const YAML::Node& node, const std::string& path,
                                     const std::string& value, const std::string& rule) {
  Issue(node, path, value, rule);
  errors_.issues.back().cross_reference = true;
}

void YamlReader::IssueNoPos(const std::string& path, const std::string& value,
                            const std::string& rule) {
  errors_.issues.push_back({source_, 0, 0, path, value, rule});
}

bool YamlReader::Map(const YAML::Node& node, const std::string& path,
                     const std::vector<std::string_view>& allowed) {
  if (!node.IsDefined() || node.IsNull()) return false;
  if (!node.IsMap()) {
    Issue(node, path, ScalarText(node), "must be a map");
    return false;
  }
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string rule = "unknown key";
    if (auto s = DidYouMean(key, allowed); !s.empty()) rule += " (did you mean \"" + s + "\"?)";
    Issue(kv.first, Join(path, key), "", rule);
  }
  return true;
}

void YamlReader::String(const YAML::Node& map, std::string_view key, const std::string& path,
                        std::string& out) {
  if (!map.IsMap()) return;
  YAML::Node n = map[std::string(key)];
  if (!n.IsDefined() || n.IsNull()) return;
  if (!n.IsScalar()) {
    Issue(n, path, ScalarText(n), "must be a string");
    return;
  }
  out = n.Scalar();
}

void YamlReader::Bool(const YAML::Node& map, std::string_view key, const std::string& path,
                      bool& out) {
  if (map.IsMap()) {
    YAML::Node n = map[std::string(key)];
    if (n.IsDefined() && !n.IsNull() && !n.IsScalar()) {
      Issue(n, path, ScalarText(n), "must be true or false");
      return;
    }
  }
  std::string s;
  String(map, key, path, s);
  if (s.empty()) return;
  if (s == "true") {
    out = true;
  } else if (s == "false") {
    out = false;
  } else {
    Issue(map[std::string(key)], path, s, "must be true or false");
  }
}

void YamlReader::Int(const YAML::Node& map, std::string_view key, const std::string& path,
                     int64_t& out, int64_t min, int64_t max) {
  std::string s;
  String(map, key, path, s);
  if (s.empty()) return;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < min || v > max) {
    Issue(map[std::string(key)], path, s,
          "must be an integer between " + std::to_string(min) + " and " + std::to_string(max));
    return;
  }
  out = v;
}

void YamlReader::Duration(const YAML::Node& map, std::string_view key, const std::string& path,
                          std::chrono::milliseconds& out, std::chrono::milliseconds min,
                          std::chrono::milliseconds max) {
  std::string s;
  String(map, key, path, s);
  if (s.empty()) return;
  auto d = ParseDuration(s);
  if (!d) {
    Issue(map[std::string(key)], path, s, "must be a duration such as 250ms, 30s, 5m or 1h30m");
    return;
  }
  if (*d < min || *d > max) {
    Issue(map[std::string(key)], path, s,
          "must be between " + FormatDuration(min) + " and " + FormatDuration(max));
    return;
  }
  out = *d;
}

void YamlReader::Size(const YAML::Node& map, std::string_view key, const std::string& path,
                      uint64_t& out, uint64_t min, uint64_t max) {
  std::string s;
  String(map, key, path, s);
  if (s.empty()) return;
  auto v = ParseSize(s);
  if (!v) {
    Issue(map[std::string(key)], path, s,
          "must be a size such as 512KiB, 64MiB, 1GiB or a byte count");
    return;
  }
  if (*v < min || *v > max) {
    Issue(map[std::string(key)], path, s,
          "must be between " + FormatSize(min) + " and " + FormatSize(max));
    return;
  }
  out = *v;
}

void YamlReader::StringList(const YAML::Node& map, std::string_view key, const std::string& path,
                            std::vector<std::string>& out) {
  if (!map.IsMap()) return;
  YAML::Node n = map[std::string(key)];
  if (!n.IsDefined() || n.IsNull()) return;
  if (!n.IsSequence()) {
    Issue(n, path, ScalarText(n), "must be a list of strings");
    return;
  }
  out.clear();
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) {
      Issue(n[i], path + "[" + std::to_string(i) + "]", ScalarText(n[i]), "must be a string");
      continue;
    }
    out.push_back(n[i].Scalar());
  }
}

void YamlReader::StringMap(const YAML::Node& map, std::string_view key, const std::string& path,
                           std::map<std::string, std::string>& out) {
  if (!map.IsMap()) return;
  YAML::Node n = map[std::string(key)];
  if (!n.IsDefined() || n.IsNull()) return;
  if (!n.IsMap()) {
    Issue(n, path, ScalarText(n), "must be a map of strings");
    return;
  }
  out.clear();
  for (const auto& kv : n) {
    if (!kv.second.IsScalar()) {
      Issue(kv.second, Join(path, kv.first.Scalar()), ScalarText(kv.second), "must be a string");
      continue;
    }
    out[kv.first.Scalar()] = kv.second.Scalar();
  }
}

void SetPath(YAML::Node root, const std::string& path, const std::string& value) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  // yaml-cpp nodes are references: walk with reset() to avoid rebinding the parent.
  YAML::Node cur;
  cur.reset(root);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = cur[parts[i]];
    if (!next.IsMap()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = cur[parts[i]];
    }
    cur.reset(next);
  }
  cur[parts.back()] = value;
}

void ApplyEnvOverrides(YAML::Node root, const std::vector<std::string>& scalar_paths,
                       const std::string& prefix, const EnvLookup& env, YamlReader& reader) {
  if (!env) return;
  for (const auto& path : scalar_paths) {
    const std::string var = prefix + Upper(path);
    if (auto v = env(var); v) {
      SetPath(root, path, *v);
      reader.MarkFromEnv(path, var);
    }
  }
}

namespace {

// The deepest flow-collection nesting ([ and { outside quotes and comments) and the line it
// was reached on: yaml-cpp parses and the config walkers merge recursively, so a 100 000-deep
// `[[[…` from a PushConfig must be refused before either sees it. Block nesting (where a
// compact `- - - …` costs two bytes a level) is bounded on the parser's events
// (YamlStructureChecker), before anything is loaded.
std::pair<size_t, size_t> FlowDepth(std::string_view text) {
  size_t depth = 0, deepest = 0, line = 1, deepest_line = 1;
  char quote = 0;
  bool comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      comment = false;
      continue;
    }
    if (comment) continue;
    if (quote != 0) {
      if (quote == '"' && c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
      comment = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        deepest_line = line;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {deepest, deepest_line};
}

// YAML text is Unicode (YAML 1.2 §5.1): valid UTF-8 and no control characters but tab,
// line feed and carriage return. yaml-cpp takes any bytes, and what it keeps of them does
// not survive its own emitter (a PushConfig delta merged twice gave two different keys) nor a
// protobuf string (labels travel in the node's capabilities). The first offending byte, or
// nullopt.
std::optional<ConfigIssue> CheckYamlText(const std::string& text, const std::string& source,
                                         const std::string& what) {
  const size_t valid = ValidUtf8Prefix(text);
  size_t bad = valid;
  std::string rule = what + " is not valid UTF-8";
  for (size_t i = 0; i < valid; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      bad = i;
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", c);
      rule = what + " holds the control character " + hex + " (YAML allows tab, LF and CR only)";
      break;
    }
  }
  if (bad == text.size()) return std::nullopt;
  int line = 1, column = 1;
  for (size_t i = 0; i < bad; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;  // columns count characters, not bytes
    }
  }
  return ConfigIssue{source, line, column, "", "", rule};
}

// What is checked on the parser's events before a document is loaded, not on the loaded node
// graph: an alias is one event whatever it stands for, so a document of nested aliases
// ("billion laughs") costs what its text costs, and nesting needs no recursion.
//  - Block and flow nesting deeper than kMaxYamlDepth: the loader, Clone and the config
//    walkers recurse once a level. The walk stops there (StopWalk).
//  - A key written twice in one mapping (YAML 1.2 §3.2.1.1: keys are unique). yaml-cpp keeps
//    both, readers see the first and a merge the last, so a PushConfig delta applied twice
//    gave two different configs.
constexpr size_t kMaxYamlDepth = 64;

class YamlStructureChecker final : public YAML::EventHandler {
 public:
  struct StopWalk {};
  struct Repeat {
    std::string key;
    YAML::Mark at, first;
  };
  std::optional<Repeat> repeat;
  std::optional<YAML::Mark> too_deep;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Item(mark, nullptr); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Item(mark, nullptr); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string& value) override {
    Item(mark, &value);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Item(mark, nullptr);
    Push(mark, false);
  }
  void OnSequenceEnd() override { stack_.pop_back(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Item(mark, nullptr);
    Push(mark, true);
  }
  void OnMapEnd() override { stack_.pop_back(); }

 private:
  struct Frame {
    bool is_map;
    bool expect_key = true;
    std::map<std::string, YAML::Mark> keys;
  };
  void Push(const YAML::Mark& mark, bool is_map) {
    if (stack_.size() >= kMaxYamlDepth) {
      too_deep = mark;
      throw StopWalk{};
    }
    stack_.push_back(Frame{is_map});
  }
  // A node took the next place in the enclosing collection: in a mapping, a key or a value in
  // turn. Only scalar keys are compared (a collection or alias as a key is left alone).
  void Item(const YAML::Mark& mark, const std::string* scalar) {
    if (stack_.empty() || !stack_.back().is_map) return;
    Frame& f = stack_.back();
    if (f.expect_key && scalar != nullptr && !repeat) {
      auto [it, fresh] = f.keys.emplace(*scalar, mark);
      if (!fresh) repeat = Repeat{*scalar, mark, it->second};
    }
    f.expect_key = !f.expect_key;
  }
  std::vector<Frame> stack_;
};

std::optional<ConfigIssue> CheckStructure(const std::string& text, const std::string& source,
                                          const std::string& what) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  YamlStructureChecker checker;
  try {
    parser.HandleNextDocument(checker);
  } catch (const YamlStructureChecker::StopWalk&) {
    const YAML::Mark& at = *checker.too_deep;
    return ConfigIssue{source,
                       at.line + 1,
                       at.column + 1,
                       "",
                       "",
                       what + " nests collections more than " + std::to_string(kMaxYamlDepth) +
                           " levels deep; the limit is " + std::to_string(kMaxYamlDepth)};
  }
  if (!checker.repeat) return std::nullopt;
  const auto& r = *checker.repeat;
  return ConfigIssue{source,
                     r.at.line + 1,
                     r.at.column + 1,
                     "",
                     "",
                     what + " repeats the key \"" + r.key + "\" (first at line " +
                         std::to_string(r.first.line + 1) + "); keys are unique"};
}

}  // namespace

std::expected<YAML::Node, ConfigErrors> ParseYaml(const std::string& text,
                                                  const std::string& source,
                                                  const std::string& what) {
  if (auto issue = CheckYamlText(text, source, what)) {
    ConfigErrors errs;
    errs.issues.push_back(std::move(*issue));
    return std::unexpected(errs);
  }
  constexpr size_t kMaxFlowDepth = 64;
  if (auto [depth, line] = FlowDepth(text); depth > kMaxFlowDepth) {
    ConfigErrors errs;
    errs.issues.push_back({source, static_cast<int>(line), 0, "", "",
                           what + " nests [ or { " + std::to_string(depth) +
                               " levels deep; the limit is " + std::to_string(kMaxFlowDepth)});
    return std::unexpected(errs);
  }
  try {
    if (auto issue = CheckStructure(text, source, what)) {
      ConfigErrors errs;
      errs.issues.push_back(std::move(*issue));
      return std::unexpected(errs);
    }
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    ConfigErrors errs;
    errs.issues.push_back(
        {source, e.mark.line + 1, e.mark.column + 1, "", "", what + " syntax error: " + e.msg});
    return std::unexpected(errs);
  }
}

YAML::Node DeepMerge(const YAML::Node& base, const YAML::Node& delta) {
  if (!delta.IsDefined()) return base.IsDefined() ? YAML::Clone(base) : YAML::Node();
  if (!base.IsDefined() || !base.IsMap() || !delta.IsMap()) return YAML::Clone(delta);
  YAML::Node out = YAML::Clone(base);
  for (const auto& kv : delta) {
    const std::string key = kv.first.Scalar();
    out[key] = DeepMerge(base[key], kv.second);
  }
  return out;
}

std::optional<std::string> ReadSecretFile(YamlReader& r, const YAML::Node& at,
                                          const std::string& path, const std::string& file) {
  auto content = edge::ReadFile(file, 1 << 20);
  if (!content) {
    r.Issue(at, path, file, "cannot read secret file: " + content.error().message);
    return std::nullopt;
  }
  std::string s = std::move(*content);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  if (s.empty()) {
    r.Issue(at, path, file, "secret file is empty");
    return std::nullopt;
  }
  return s;
}

}  // namespace edge::config
