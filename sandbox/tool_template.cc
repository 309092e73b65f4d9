#include "sandbox/tool_template.h"

#include <algorithm>

namespace edge::sandbox {
namespace {

bool ValidNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

std::string JsonTypeName(const nlohmann::json& v) {
  return v.type_name();
}

}  // namespace

Result<ToolTemplate> ToolTemplate::Parse(const std::vector<std::string>& argv) {
  if (argv.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "command: the argv template must not be empty");
  }
  ToolTemplate t;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    std::string where = "command[" + std::to_string(i) + "] '" + s + "'";
    if (s.find('\0') != std::string::npos) {
      return MakeError(ErrorCode::kInvalidArgument, where + ": contains a NUL byte");
    }
    std::vector<Piece> pieces;
    std::string literal;
    for (size_t p = 0; p < s.size(); ++p) {
      char c = s[p];
      if (c == '{' && p + 1 < s.size() && s[p + 1] == '{') {
        literal.push_back('{');
        ++p;
      } else if (c == '}' && p + 1 < s.size() && s[p + 1] == '}') {
        literal.push_back('}');
        ++p;
      } else if (c == '{') {
        size_t close = s.find('}', p + 1);
        if (close == std::string::npos) {
          return MakeError(ErrorCode::kInvalidArgument,
                           where + ": unclosed '{' at offset " + std::to_string(p));
        }
        std::string name = s.substr(p + 1, close - p - 1);
        if (name.empty() || name.size() > 64 ||
            !std::all_of(name.begin(), name.end(), ValidNameChar)) {
          return MakeError(ErrorCode::kInvalidArgument,
                           where + ": placeholder '{" + name +
                               "}' must be a name of 1-64 characters [A-Za-z0-9_.-]");
        }
        if (!literal.empty()) pieces.push_back(Piece{false, std::move(literal)});
        literal.clear();
        pieces.push_back(Piece{true, name});
        if (std::find(t.names_.begin(), t.names_.end(), name) == t.names_.end()) {
          t.names_.push_back(name);
        }
        p = close;
      } else if (c == '}') {
        return MakeError(ErrorCode::kInvalidArgument,
                         where + ": stray '}' at offset " + std::to_string(p) + " (use '}}')");
      } else {
        literal.push_back(c);
      }
    }
    if (!literal.empty()) pieces.push_back(Piece{false, std::move(literal)});
    if (i == 0 && pieces.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "command[0]: the program must not be empty");
    }
    t.elements_.push_back(std::move(pieces));
  }
  return t;
}

Result<std::vector<std::string>> ToolTemplate::Render(const nlohmann::json& args) const {
  if (!args.is_null() && !args.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "args: must be a JSON object, got " + JsonTypeName(args));
  }
  std::vector<std::string> out;
  out.reserve(elements_.size());
  for (const auto& pieces : elements_) {
    std::string element;
    for (const auto& piece : pieces) {
      if (!piece.placeholder) {
        element += piece.text;
        continue;
      }
      if (args.is_null() || !args.contains(piece.text)) {
        return MakeError(
            ErrorCode::kInvalidArgument,
            "arg '" + piece.text + "': missing (the tool's command uses {" + piece.text + "})");
      }
      const nlohmann::json& v = args.at(piece.text);
      if (v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        if (s.find('\0') != std::string::npos) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "arg '" + piece.text + "': must not contain a NUL byte");
        }
        element += s;
      } else if (v.is_boolean()) {
        element += v.get<bool>() ? "true" : "false";
      } else if (v.is_number()) {
        element += v.dump();
      } else {
        return MakeError(
            ErrorCode::kInvalidArgument,
            "arg '" + piece.text + "': must be a string, number or bool, got " + JsonTypeName(v));
      }
    }
    out.push_back(std::move(element));
  }
  if (out[0].empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "command[0]: the program rendered empty");
  }
  return out;
}

}  // namespace edge::sandbox
