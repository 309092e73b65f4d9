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

// A value for an error message: at most 64 bytes, quoted.
std::string Quoted(const std::string& v) {
  constexpr size_t kMax = 64;
  if (v.size() <= kMax) return "'" + v + "'";
  return "'" + v.substr(0, kMax) + "'... (" + std::to_string(v.size()) + " bytes)";
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
        std::string inner = s.substr(p + 1, close - p - 1);
        std::string name = inner;
        bool allow_option = false;
        if (size_t colon = inner.find(':'); colon != std::string::npos) {
          name = inner.substr(0, colon);
          std::string modifier = inner.substr(colon + 1);
          size_t modifier_offset = p + 1 + colon;
          if (modifier != "opt") {
            return MakeError(ErrorCode::kInvalidArgument,
                             where + ": unknown modifier ':" + modifier + "' at offset " +
                                 std::to_string(modifier_offset) +
                                 " (the only modifier is ':opt', as in {" + name + ":opt})");
          }
          if (i == 0) {
            return MakeError(ErrorCode::kInvalidArgument,
                             where + ": ':opt' at offset " + std::to_string(modifier_offset) +
                                 " does not apply to command[0], the program");
          }
          if (p != 0) {
            return MakeError(ErrorCode::kInvalidArgument,
                             where + ": ':opt' at offset " + std::to_string(modifier_offset) +
                                 " applies only to a placeholder at the start of its element");
          }
          allow_option = true;
        }
        if (name.empty() || name.size() > 64 ||
            !std::all_of(name.begin(), name.end(), ValidNameChar)) {
          return MakeError(ErrorCode::kInvalidArgument,
                           where + ": placeholder '{" + inner + "}' at offset " +
                               std::to_string(p) +
                               " must be a name of 1-64 characters [A-Za-z0-9_.-]");
        }
        if (!literal.empty()) pieces.push_back(Piece{false, std::move(literal)});
        literal.clear();
        pieces.push_back(Piece{true, name, allow_option});
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
    if (!literal.empty()) pieces.push_back(Piece{false, std::move(literal), false});
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
  bool after_double_dash = false;  // a literal "--" element came before (after argv[0])
  for (size_t i = 0; i < elements_.size(); ++i) {
    const auto& pieces = elements_[i];
    std::string element;
    // The placeholder whose value gave the element its first byte, and that value.
    const Piece* lead = nullptr;
    std::string lead_value;
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
      std::string value;
      if (v.is_string()) {
        value = v.get_ref<const std::string&>();
        if (value.find('\0') != std::string::npos) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "arg '" + piece.text + "': must not contain a NUL byte");
        }
      } else if (v.is_boolean()) {
        value = v.get<bool>() ? "true" : "false";
      } else if (v.is_number()) {
        value = v.dump();
      } else {
        return MakeError(
            ErrorCode::kInvalidArgument,
            "arg '" + piece.text + "': must be a string, number or bool, got " + JsonTypeName(v));
      }
      if (i == 0 && value.find('/') != std::string::npos) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "arg '" + piece.text + "': value " + Quoted(value) +
                             " is used in command[0], the program, and must not contain '/' "
                             "(a value may name a program, not rewrite its path)");
      }
      if (element.empty() && !value.empty()) {
        lead = &piece;
        lead_value = value;
      }
      element += value;
    }
    // An element whose template starts with a placeholder must not start with '-' unless the
    // template allows options there.
    if (!element.empty() && element[0] == '-' && !pieces.empty() && pieces[0].placeholder) {
      const Piece& first = pieces[0];
      // Who put the '-' first: a value, or a literal left first by empty values before it.
      std::string where = "command[" + std::to_string(i) + "]";
      std::string what = lead != nullptr
                             ? "arg '" + lead->text + "': value " + Quoted(lead_value) +
                                   " would start " + where + " with '-'"
                             : "arg '" + first.text + "': the empty value would leave " + where +
                                   " starting with '-' (" + Quoted(element) + ")";
      if (i == 0) {
        return MakeError(ErrorCode::kInvalidArgument,
                         what + "; command[0] is the program, whose name must not start with '-'");
      }
      if (!first.allow_option && !after_double_dash) {
        return MakeError(ErrorCode::kInvalidArgument,
                         what +
                             ", and the program would read it as an option; refused "
                             "(to allow options in this slot write {" +
                             first.text +
                             ":opt} in the tool's command, or put a literal \"--\" element "
                             "before it if the program supports it)");
      }
    }
    if (i > 0 && pieces.size() == 1 && !pieces[0].placeholder && pieces[0].text == "--") {
      after_double_dash = true;
    }
    out.push_back(std::move(element));
  }
  if (out[0].empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "command[0]: the program rendered empty");
  }
  return out;
}

}  // namespace edge::sandbox
