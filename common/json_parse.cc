#include "common/json_parse.h"

#include <string>

namespace edge {

Status CheckJsonDepth(std::string_view text, std::string_view what, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) {
          return MakeError(ErrorCode::kInvalidArgument,
                           std::string(what) + " is nested " + std::to_string(depth) +
                               " levels deep at byte " + std::to_string(i) +
                               ", deeper than the limit of " + std::to_string(max_depth) +
                               " nested arrays/objects");
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return OkStatus();
}

Result<nlohmann::json> ParseJsonBounded(std::string_view text, std::string_view what,
                                        size_t max_depth) {
  if (auto st = CheckJsonDepth(text, what, max_depth); !st) return std::unexpected(st.error());
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 5: <why>".
    std::string why = e.what();
    if (auto colon = why.find(": "); colon != std::string::npos) why = why.substr(colon + 2);
    return MakeError(
        ErrorCode::kInvalidArgument,
        std::string(what) + " is not valid JSON: at byte " + std::to_string(e.byte) + ": " + why);
  } catch (const nlohmann::json::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(what) + " is not valid JSON: " + e.what());
  }
}

void AppendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + s.size() + 2);
  out.push_back('"');
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + start, i - start);
    start = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
    }
  }
  out.append(s.data() + start, s.size() - start);
  out.push_back('"');
}

}  // namespace edge
