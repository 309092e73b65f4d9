#include "config/validate.h"

#include <cctype>
#include <charconv>

namespace edge::config {

bool IsHostPort(std::string_view s, bool listen) {
  size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string_view host = s.substr(0, colon), port = s.substr(colon + 1);
  if (host.empty() && !listen) return false;
  if (!host.empty() && host.front() == '[') {
    if (host.back() != ']' || host.size() < 3) return false;
  } else if (host.find(':') != std::string_view::npos) {
    return false;  // bare IPv6 needs brackets
  }
  for (char c : host) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '/') return false;
  }
  int p = -1;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || ptr != port.data() + port.size()) return false;
  return p >= (listen ? 0 : 1) && p <= 65535;
}

bool IsValidNodeId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  }
  return true;
}

bool IsCaPin(std::string_view s) {
  constexpr std::string_view kPrefix = "sha256:";
  if (s.substr(0, kPrefix.size()) != kPrefix || s.size() != kPrefix.size() + 64) return false;
  for (char c : s.substr(kPrefix.size())) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace edge::config
