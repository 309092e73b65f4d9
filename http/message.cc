#include "http/message.h"

#include <strings.h>
#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>

#include "http/query.h"

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
  return SplitTarget(target).path;
}

std::string_view Request::Query() const {
  return SplitTarget(target).query;
}

size_t Response::BodySize() const {
  size_t n = body.size();
  for (const auto& piece : more_body)
    n += piece.size();
  return n;
}

std::string Response::JoinedBody() const {
  std::string out;
  out.reserve(BodySize());
  out += body;
  for (const auto& piece : more_body)
    out += piece;
  return out;
}

Result<std::shared_ptr<WebSocket>> Exchange::AcceptWebSocket(const WebSocketOptions&,
                                                             std::shared_ptr<WebSocketHandler>) {
  const std::string message = "this exchange cannot be upgraded to a WebSocket";
  nlohmann::json body = {{"code", "BAD_REQUEST"}, {"message", message}};
  Respond({.status = 400, .body = body.dump()});
  return MakeError(ErrorCode::kFailedPrecondition, message);
}

std::string_view ReasonPhrase(unsigned status) {
  auto s = boost::beast::http::obsolete_reason(boost::beast::http::int_to_status(status));
  return s.empty() ? std::string_view("Unknown") : std::string_view(s.data(), s.size());
}

}  // namespace edge::http
