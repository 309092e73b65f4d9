#include "http/message.h"

#include <strings.h>
#include <boost/beast/http/status.hpp>

namespace edge::http {

std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && ::strncasecmp(k.data(), name.data(), k.size()) == 0) {
      return std::string_view(v);
    }
  }
  return std::nullopt;
}

std::string_view Request::Path() const {
  std::string_view t(target);
  return t.substr(0, t.find('?'));
}

std::string_view ReasonPhrase(unsigned status) {
  auto s = boost::beast::http::obsolete_reason(boost::beast::http::int_to_status(status));
  return s.empty() ? std::string_view("Unknown") : std::string_view(s.data(), s.size());
}

}  // namespace edge::http
