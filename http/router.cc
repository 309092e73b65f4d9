#include "http/router.h"

#include <nlohmann/json.hpp>

namespace edge::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Splits "/a/b%20c/" into {"a", "b c"}; false for a malformed escape or a decoded '/' / NUL.
bool SplitPath(std::string_view path, std::vector<std::string>& out) {
  out.clear();
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/')
      ++i;
    if (i >= path.size()) break;
    std::string seg;
    while (i < path.size() && path[i] != '/') {
      char c = path[i];
      if (c == '%') {
        if (i + 2 >= path.size()) return false;
        int hi = HexValue(path[i + 1]), lo = HexValue(path[i + 2]);
        if (hi < 0 || lo < 0) return false;
        c = static_cast<char>(hi << 4 | lo);
        if (c == '/' || c == '\0') return false;
        i += 3;
      } else {
        ++i;
      }
      seg.push_back(c);
    }
    out.push_back(std::move(seg));
  }
  return true;
}

}  // namespace

Response JsonError(unsigned status, std::string_view code, std::string_view message) {
  nlohmann::json body = {{"code", code}, {"message", message}};
  return Response{.status = status,
                  .body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

std::string RequestId(const Request& request) {
  auto id = request.Header("X-Request-ID");
  return id ? std::string(id->substr(0, 128)) : std::string();
}

void RespondEchoingRequestId(const std::shared_ptr<Exchange>& exchange, Response response) {
  if (std::string id = RequestId(exchange->request()); !id.empty()) {
    response.headers.emplace_back("X-Request-ID", std::move(id));
  }
  exchange->Respond(std::move(response));
}

void Router::Add(std::string method, std::string_view pattern, RouteHandler handler) {
  Route r{.method = std::move(method), .segments = {}, .handler = std::move(handler)};
  SplitPath(pattern, r.segments);
  routes_.push_back(std::move(r));
}

bool Router::MatchSegments(const Route& route, const std::vector<std::string>& path,
                           PathParams& params) {
  if (route.segments.size() != path.size()) return false;
  PathParams found;
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& want = route.segments[i];
    if (want.size() > 2 && want.front() == '{' && want.back() == '}') {
      if (path[i].empty()) return false;
      found[want.substr(1, want.size() - 2)] = path[i];
    } else if (want != path[i]) {
      return false;
    }
  }
  params = std::move(found);
  return true;
}

const RouteHandler* Router::Match(std::string_view method, std::string_view path,
                                  PathParams& params) const {
  std::vector<std::string> segments;
  if (!SplitPath(path, segments)) return nullptr;
  for (const auto& r : routes_) {
    if (r.method == method && MatchSegments(r, segments, params)) return &r.handler;
  }
  return nullptr;
}

void Router::Handle(std::shared_ptr<Exchange> exchange) {
  const Request& req = exchange->request();
  const std::string_view path = req.Path();
  std::vector<std::string> segments;
  if (!SplitPath(path, segments)) {
    exchange->Respond(JsonError(400, "BAD_REQUEST", "the path has a malformed %-escape"));
    return;
  }
  std::string allow;
  for (const auto& r : routes_) {
    PathParams params;
    if (!MatchSegments(r, segments, params)) continue;
    if (r.method == req.method) {
      r.handler(std::move(exchange), params);
      return;
    }
    if (allow.find(r.method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + r.method;
  }
  if (!allow.empty()) {
    Response resp = JsonError(405, "METHOD_NOT_ALLOWED",
                              "method " + req.method.substr(0, 16) + " is not allowed here");
    resp.headers.emplace_back("Allow", allow);
    exchange->Respond(std::move(resp));
    return;
  }
  exchange->Respond(JsonError(404, "NOT_FOUND", "no such endpoint"));
}

}  // namespace edge::http
