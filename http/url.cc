#include "http/url.h"

#include <charconv>

namespace edge::http {

Result<Url> ParseUrl(std::string_view url, std::string_view what) {
  auto bad = [&](std::string why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(what) + " \"" + std::string(url) + "\": " + why);
  };
  Url u;
  std::string_view rest;
  if (url.starts_with("https://")) {
    u.tls = true;
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else {
    return bad("must start with http:// or https://");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (path.ends_with('/'))
      path.remove_suffix(1);
    u.base_path = std::string(path);
  }
  u.port = u.tls ? 443 : 80;
  std::string_view host = authority;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unbalanced [ in the host");
    host = authority.substr(1, close - 1);
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() != ':') return bad("junk after the host");
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    authority = authority.substr(colon);
  } else {
    authority = {};
  }
  if (authority.starts_with(':')) {
    std::string_view p = authority.substr(1);
    unsigned v = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc() || end != p.data() + p.size() || v == 0 || v > 65535) {
      return bad("the port must be 1-65535");
    }
    u.port = static_cast<uint16_t>(v);
  }
  if (host.empty()) return bad("no host");
  u.host = std::string(host);
  return u;
}

}  // namespace edge::http
