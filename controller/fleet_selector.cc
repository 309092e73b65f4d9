#include "controller/fleet_selector.h"

#include <algorithm>
#include <cctype>

#include "common/log.h"

namespace edge::controller {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsKeyChar(char c) {
  return IsAlnum(c) || c == '.' || c == '_' || c == '/' || c == '-';
}
bool IsValueChar(char c) {
  return IsAlnum(c) || c == '.' || c == '_' || c == ':' || c == '/' || c == '@' || c == '+' ||
         c == '-';
}
bool IsIdChar(char c) {
  return IsAlnum(c) || c == '.' || c == '_' || c == '-';
}

// `"text"`, escaped and cut for a message.
std::string Quoted(std::string_view text) {
  return "\"" + log::Escape(text, 80) + "\"";
}

// "byte 3 (' ')" for the message about a bad byte at `i`.
std::string BadByte(std::string_view text, size_t i) {
  return "byte " + std::to_string(i + 1) + " ('" + log::Escape(text.substr(i, 1)) + "')";
}

// INVALID_ARGUMENT unless `text` is 1..max bytes of `ok` characters (the first also
// `ok_first`); `what` names the thing ("tag key \"k\""), `rule` says the rule.
Status CheckChars(std::string_view text, size_t max, bool (*ok)(char), bool (*ok_first)(char),
                  const std::string& what, const std::string& rule) {
  if (text.empty()) return MakeError(ErrorCode::kInvalidArgument, what + " is empty: " + rule);
  if (text.size() > max) {
    return MakeError(ErrorCode::kInvalidArgument, what + " is " + std::to_string(text.size()) +
                                                      " bytes, more than " + std::to_string(max) +
                                                      ": " + rule);
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (!ok(text[i]) || (i == 0 && !ok_first(text[i]))) {
      return MakeError(ErrorCode::kInvalidArgument,
                       what + " has " + BadByte(text, i) + " that is not allowed" +
                           (i == 0 && ok(text[i]) ? " first" : "") + ": " + rule);
    }
  }
  return OkStatus();
}

constexpr const char* kKeyRule =
    "a tag key is 1-63 bytes of A-Z a-z 0-9 . _ / - starting with a letter or a digit";
constexpr const char* kValueRule = "a tag value is 1-128 bytes of A-Z a-z 0-9 . _ : / @ + -";
constexpr const char* kTermForms = "a term is tag:K=V, label:K=V, os:X or node:ID";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ')
    s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

Status ValidateTagKey(std::string_view key) {
  return CheckChars(key, kMaxTagKeyBytes, IsKeyChar, IsAlnum, "tag key " + Quoted(key), kKeyRule);
}

Status ValidateTagValue(std::string_view key, std::string_view value) {
  return CheckChars(value, kMaxTagValueBytes, IsValueChar, IsValueChar,
                    "value " + Quoted(value) + " of tag " + Quoted(key), kValueRule);
}

Result<std::pair<std::string, std::string>> ParseTagAssignment(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tag " + Quoted(text) + " must be KEY=VALUE, such as role=web");
  }
  std::string_view key = text.substr(0, eq), value = text.substr(eq + 1);
  if (auto st = ValidateTagKey(key); !st) return std::unexpected(st.error());
  if (auto st = ValidateTagValue(key, value); !st) return std::unexpected(st.error());
  return std::pair{std::string(key), std::string(value)};
}

Result<TagRemoval> ParseTagRemoval(std::string_view text) {
  const size_t eq = text.find('=');
  std::string_view key = text.substr(0, eq);
  if (auto st = ValidateTagKey(key); !st) return std::unexpected(st.error());
  TagRemoval r{.key = std::string(key)};
  if (eq != std::string_view::npos) {
    std::string_view value = text.substr(eq + 1);
    if (auto st = ValidateTagValue(key, value); !st) return std::unexpected(st.error());
    r.value = std::string(value);
  }
  return r;
}

Result<FleetSelector> FleetSelector::Parse(std::string_view text) {
  const std::string whole = "selector " + Quoted(text);
  if (text.size() > kMaxSelectorBytes) {
    return MakeError(ErrorCode::kInvalidArgument, "selector is " + std::to_string(text.size()) +
                                                      " bytes, more than " +
                                                      std::to_string(kMaxSelectorBytes));
  }
  if (Trim(text).empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "selector is empty: name the nodes with comma-separated terms, all of "
                     "which must hold; " +
                         std::string(kTermForms));
  }
  FleetSelector sel;
  size_t pos = 0, index = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    std::string_view raw =
        text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
    ++index;
    if (index > kMaxSelectorTerms) {
      return MakeError(ErrorCode::kInvalidArgument,
                       whole + " has more than " + std::to_string(kMaxSelectorTerms) + " terms");
    }
    const std::string_view term = Trim(raw);
    const std::string where = "selector term " + std::to_string(index);
    if (term.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       whole + ": term " + std::to_string(index) + " is empty; " + kTermForms);
    }
    const std::string named = where + " " + Quoted(term);
    const size_t colon = term.find(':');
    if (colon == std::string_view::npos) {
      return MakeError(ErrorCode::kInvalidArgument,
                       named + " has no kind; " + std::string(kTermForms));
    }
    const std::string_view kind = term.substr(0, colon), rest = term.substr(colon + 1);
    SelectorTerm t;
    if (kind == "tag" || kind == "label") {
      t.kind = kind == "tag" ? SelectorTerm::Kind::kTag : SelectorTerm::Kind::kLabel;
      const size_t eq = rest.find('=');
      if (eq == std::string_view::npos || eq == 0 || eq + 1 == rest.size()) {
        return MakeError(ErrorCode::kInvalidArgument,
                         named + " must be " + std::string(kind) + ":KEY=VALUE with both set");
      }
      t.key = std::string(rest.substr(0, eq));
      t.value = std::string(rest.substr(eq + 1));
      if (t.kind == SelectorTerm::Kind::kTag) {
        if (auto st = ValidateTagKey(t.key); !st) {
          return MakeError(ErrorCode::kInvalidArgument, named + ": " + st.error().message);
        }
        if (auto st = ValidateTagValue(t.key, t.value); !st) {
          return MakeError(ErrorCode::kInvalidArgument, named + ": " + st.error().message);
        }
      } else {
        for (size_t i = 0; i < rest.size(); ++i) {
          const auto c = static_cast<unsigned char>(rest[i]);
          if (c < 0x20 || c == 0x7f) {
            return MakeError(ErrorCode::kInvalidArgument,
                             named + " has a control character at " + BadByte(rest, i));
          }
        }
      }
    } else if (kind == "os" || kind == "node") {
      t.kind = kind == "os" ? SelectorTerm::Kind::kOs : SelectorTerm::Kind::kNode;
      const std::string rule = kind == "os"
                                   ? "an os is 1-64 bytes of A-Z a-z 0-9 . _ -, such as linux"
                                   : "a node id is 1-64 bytes of A-Z a-z 0-9 . _ -";
      if (auto st = CheckChars(rest, 64, IsIdChar, IsIdChar, named + ": the value", rule); !st) {
        return std::unexpected(st.error());
      }
      t.value = kind == "os" ? Lower(rest) : std::string(rest);
    } else {
      return MakeError(ErrorCode::kInvalidArgument,
                       named + " has an unknown kind " + Quoted(kind) + "; " + kTermForms);
    }
    sel.terms_.push_back(std::move(t));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return sel;
}

bool FleetSelector::Matches(const NodeView& node) const {
  const auto& labels = node.capabilities.custom_labels();
  for (const auto& t : terms_) {
    switch (t.kind) {
      case SelectorTerm::Kind::kTag: {
        auto it = node.tags.find(t.key);
        if (it == node.tags.end() || it->second != t.value) return false;
        break;
      }
      case SelectorTerm::Kind::kLabel: {
        auto it = labels.find(t.key);
        if (it == labels.end() || it->second != t.value) return false;
        break;
      }
      case SelectorTerm::Kind::kOs:
        if (Lower(node.capabilities.os()) != t.value) return false;
        break;
      case SelectorTerm::Kind::kNode:
        if (node.node.node_id != t.value) return false;
        break;
    }
  }
  return true;
}

std::string FleetSelector::ToString() const {
  std::string out;
  for (const auto& t : terms_) {
    if (!out.empty()) out += ',';
    switch (t.kind) {
      case SelectorTerm::Kind::kTag:
        out += "tag:" + t.key + "=" + t.value;
        break;
      case SelectorTerm::Kind::kLabel:
        out += "label:" + t.key + "=" + t.value;
        break;
      case SelectorTerm::Kind::kOs:
        out += "os:" + t.value;
        break;
      case SelectorTerm::Kind::kNode:
        out += "node:" + t.value;
        break;
    }
  }
  return out;
}

bool IsLive(const NodeView& node) {
  return node.connected && node.edge.has_value() && node.node.state != kNodeRevoked;
}

}  // namespace edge::controller
