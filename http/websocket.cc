#include "http/websocket.h"

#include <strings.h>

#include "common/log.h"

namespace edge::http {
namespace {

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// True when a comma-separated header named `name` (any of its occurrences) lists `token`.
bool HasToken(const Headers& headers, std::string_view name, std::string_view token) {
  for (const auto& [k, v] : headers) {
    if (!EqualsNoCase(k, name)) continue;
    std::string_view rest(v);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      if (EqualsNoCase(Trim(rest.substr(0, comma)), token)) return true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return false;
}

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

Status Bad(std::string why) {
  return MakeError(ErrorCode::kInvalidArgument, "not a valid WebSocket upgrade request: " + why);
}

}  // namespace

Status CheckWebSocketUpgrade(const Request& request) {
  if (request.method != "GET") {
    return Bad("the method is " + log::Escape(request.method, 16) + ", not GET");
  }
  if (request.version != 11) return Bad("it needs HTTP/1.1");
  if (!HasToken(request.headers, "Upgrade", "websocket")) {
    return Bad("no \"Upgrade: websocket\" header");
  }
  if (!HasToken(request.headers, "Connection", "upgrade")) {
    return Bad("the Connection header does not list \"upgrade\"");
  }
  const auto version = request.Header("Sec-WebSocket-Version");
  if (!version) return Bad("no Sec-WebSocket-Version header");
  if (Trim(*version) != "13") {
    return Bad("Sec-WebSocket-Version is \"" + log::Escape(*version, 32) + "\"; only 13 is spoken");
  }
  const auto key = request.Header("Sec-WebSocket-Key");
  if (!key) return Bad("no Sec-WebSocket-Key header");
  // 16 bytes in base64: 22 characters and "==".
  const std::string_view k = Trim(*key);
  bool ok = k.size() == 24 && k.substr(22) == "==";
  for (size_t i = 0; ok && i < 22; ++i)
    ok = IsBase64Char(k[i]);
  if (!ok) {
    return Bad("Sec-WebSocket-Key \"" + log::Escape(k, 64) +
               "\" is not 16 bytes in base64 (24 characters ending in \"==\")");
  }
  return OkStatus();
}

}  // namespace edge::http
